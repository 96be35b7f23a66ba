"""Starting and finishing claimed jobs: the worker's writes, one module per room.

* :mod:`~later_django.engine.execution.values`: the shared values
  (``StartedJob``, ``HeldPartition``, ``Outcome``, ``WorkerArgs``), a task's
  timeout and retry policy, the error of a lost attempt.
* :mod:`~later_django.engine.execution.start`: a claimed batch of delivery
  messages planned and started (``plan_batch``, ``BatchStart``, ``start_batch``).
* :mod:`~later_django.engine.execution.heads`: partition heads started under the
  partition fence (``start_heads``).
* :mod:`~later_django.engine.execution.finish`: outcomes written and the
  partitions continued (``finish_and_continue``).
* :mod:`~later_django.engine.execution.lost`: attempts the worker gives up
  failed now by the finish path (``record_lost_attempts``).

Every transaction that starts or finishes a partition job is fenced by the
partition lease's owner and epoch; a stale owner's write changes nothing.
Imports flow one way: values ← start ← heads ← finish ← lost.
"""
