"""Operator actions on stored jobs: retry a failed job, run a delayed job now, cancel
a live job, delete a job; one module per family.

* :mod:`~later_django.engine.job_actions.one_job`: one job at a time (the
  dashboard's buttons: ``retry_failed``, ``run_now``, ``delete_job``; ``cancel_job``,
  ``cancel_many``).
* :mod:`~later_django.engine.job_actions.bulk`: every job of a stage that a
  ``JobSelection`` picks, in bounded batches (``retry_selected``, ``cancel_selected``,
  ``delete_selected``, ``run_now_selected``: the native API, ``later_jobs`` and the
  dashboard's bulk actions); the queued jobs' cancel walks the queues' messages
  (:mod:`~later_django.engine.job_actions.queued_cancel`).
* :mod:`~later_django.engine.job_actions.selection`: ``JobSelection``,
  ``BulkOutcome``, the stages each bulk action takes.
* :mod:`~later_django.engine.job_actions.record_checks`: the checks and moves of
  one locked record that both share, and what a cancel reports.

Each single action is one transaction on the job's database, and each batch is
one: it reads the records under a row lock (PostgreSQL ``FOR UPDATE``; SQLite's
write lock is held by the transaction), checks the stage it found, and writes
every change through the engine (:mod:`later_django.engine.moves`,
:func:`later_django.engine.writes.commit`), so the record, its index row, its
schedule entry and its delivery message change together or not at all.

Jobs on a topic partition are refused, except deleting a finished one and
cancelling a live one (a request its partition's owner carries out): the
partition's order (head, sequence, lease) is the partition code's to keep, and
a retried or re-run job would have to go back through its partition.
"""
