"""The worker: processes that claim jobs from the delivery queue and run them.

* :mod:`~later_django.worker.runner` - one process: claim, start, run, finish;
* :mod:`~later_django.worker.heartbeat` - lease renewal and the ``later_worker`` row;
* :mod:`~later_django.worker.wakeup` - how an idle process learns of new work;
* :mod:`~later_django.worker.supervisor` - ``--processes N``: forks, signals, restarts.
"""
