"""The worker: processes that claim jobs from the delivery queue and run them.

* :mod:`~later_django.worker.runner` - ``Worker``: one process, composed of the actors below;
* :mod:`~later_django.worker.loop` - the main thread's claim → start → run → finish cycle;
* :mod:`~later_django.worker.heads` - claims of partition heads; which partitions are
  held: :mod:`~later_django.worker.partitions`;
* :mod:`~later_django.worker.jobs` - the jobs held and the job threads;
  :mod:`~later_django.worker.task_calls` - the task call and Django's task signals;
* :mod:`~later_django.worker.scheduler` - when maintenance passes and the metrics flush run;
* :mod:`~later_django.worker.process` - stop signals, orphan detection, back-off;
* :mod:`~later_django.worker.handback` / :mod:`~later_django.worker.drain` - claimed
  work given back, the graceful stop;
* :mod:`~later_django.worker.session` - the main connection's relaxed commit durability;
* :mod:`~later_django.worker.heartbeat` - lease renewal and the ``later_worker`` row;
* :mod:`~later_django.worker.wakeup` - how an idle process learns of new work;
* :mod:`~later_django.worker.bell` - the signal-safe wake-up primitive;
* :mod:`~later_django.worker.supervisor` - ``--processes N``: forks, signals, restarts.
"""
