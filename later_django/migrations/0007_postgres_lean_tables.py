"""PostgreSQL: HOT-friendly hot tables, and autovacuum settings that fit a queue.

Measured with ``bench/bloat.py --quick`` before this migration, a plain job left
5.7 dead tuples that only VACUUM reclaims (non-HOT updates and deletes):

* ``later_delivery_queue`` 2: the claim ``UPDATE`` (``lease_owner``, ``lease_until``)
  and the ack ``DELETE``. The claim was never HOT: the claim index included
  ``lease_until``;
* ``later_storage`` 1.7: the record written ``running`` at start and finished at
  the end; the start changes no indexed column but found no room on its full page
  (0.3 of 2 updates were HOT); the finish sets ``date_expire``, which the sweep's
  partial index ``later_storage_expire_idx`` holds, so it cannot be HOT;
* ``later_job_execution`` 1 (the lease's ``DELETE`` at finish) and ``later_jobs_index``
  1 (``running`` -> ``success`` moves the indexed ``stage``/``stage_date_ms``).

What this migration changes (no statement and no guarantee changes):

1. ``later_delivery_queue_claim_idx`` drops ``lease_until`` from its ``INCLUDE``.
   The claim locks its candidates (``FOR UPDATE SKIP LOCKED``), so its plan is an
   ordered *Index Scan* that reads every candidate's heap tuple anyway and checks
   ``lease_until`` there (``Filter:`` in ``EXPLAIN``). Measured with 20,000 ready
   rows and with 5,000 claimed rows at the front: the same plan, the same 5,000
   rows removed by the filter after their heap visits, 162 buffers instead of
   182 (the index is smaller), the same time. Without it no index holds a column
   the claim or a renewal changes, so both are HOT updates when the page has room.
   ``queue_name`` and ``available_at`` stay: the claim never changes them.
2. ``fillfactor`` leaves room on each page for the next version of its rows:

   * ``later_delivery_queue`` 50: every row is updated once (the claim) shortly
     after its insert, and renewed while its job runs; half a page free holds a
     new version of every row on it. The table holds only ready and running
     messages, so the halved density costs a few pages;
   * ``later_storage`` 70: a record's start update is HOT when its page has room
     for one more version (pruning then frees the old one). Measured share of
     HOT starts (``bloat.py --quick``, 5,000 jobs): enqueued in batches of 500 at
     once, 0.29-0.31 with 100, 0.36 with 80, 0.52-0.55 with 70, 0.67 with 60; at
     a steady 200 jobs/s in batches of 10 the newest page usually has room
     anyway (0.74-0.98 with 100 over three runs, 0.92-1.00 with 70). Records are
     kept for ``RETENTION`` (a day by default), so the reserved space is paid for
     every kept record: 70 (1.43 times the packed heap) halves the non-HOT starts
     of a burst; less would cost more space for little;
   * ``later_stage_counts``, ``later_queue_depth`` 10 (the lowest allowed): a few
     dozen tiny rows updated by every statement that moves a job; with nine
     tenths of each page free a HOT update finds room on its page, and even a
     long transaction that holds back pruning takes many times longer before the
     versions spill onto new pages (and new index entries);
   * ``later_partition_lease`` 50: a few rows renewed about every second
     (``lease_until`` is not indexed: HOT).

   ``later_job_execution``, ``later_jobs_index``, ``later_worker`` and the partition
   rows keep 100: their updates change an indexed column (``lease_until``,
   ``stage``, ``heartbeat_at``, ``earliest_run_at``), so free space would not make
   them HOT. A new ``fillfactor`` applies to pages written from now on; pages
   already full stay as they are until rewritten.
3. autovacuum, per table (PostgreSQL's defaults vacuum a table once its dead
   tuples pass 50 + 20 % of its rows, throttled by a 2 ms cost delay):

   * queue tables (``later_delivery_queue``, ``later_job_execution``,
     ``later_partition_job``, ``later_partition_head``, ``later_worker``): their
     rows churn completely, a few times a second, and their size says nothing
     about how much of them is dead: a backlog of a million messages would wait
     for 200,000 dead tuples under the default. Vacuum them by a fixed threshold
     (``autovacuum_vacuum_scale_factor = 0``, ``autovacuum_vacuum_threshold =
     1000``: a few seconds of traffic at 200 jobs/s, and few enough that the
     claim's ordered walk never steps over many dead entries), the same for
     inserts (``autovacuum_vacuum_insert_scale_factor = 0``,
     ``autovacuum_vacuum_insert_threshold = 10000``: a burst of enqueued messages
     gets its pages marked all-visible and frozen early), and unthrottled
     (``autovacuum_vacuum_cost_delay = 0``): they are small, so a vacuum reads a
     handful of pages, and a throttled vacuum only lets dead tuples pile up while
     it sleeps;
   * counter tables (``later_stage_counts``, ``later_queue_depth``,
     ``later_partition_lease``): HOT updates prune themselves, but ``n_dead_tup``
     counts them until pruned; the same fixed threshold (1000) and no cost delay
     keeps their few pages clean;
   * history tables (``later_storage``, ``later_jobs_index``): one row per job,
     kept for ``RETENTION`` and deleted by the sweep, so they are large (a day at
     200 jobs/s is 17 million rows). A fixed threshold would scan all their
     indexes every minute; the default 20 % lets millions of dead tuples build
     up. ``autovacuum_vacuum_scale_factor = 0.02`` with a threshold of 1000 vacuums
     them after about 2 % of their rows died, and the default cost delay keeps
     those larger vacuums gentle on I/O.

   ``autovacuum_naptime`` (how often autovacuum visits a database, one minute by
   default) is a server setting no table can change; see docs/operations.md.

SQLite has no fillfactor, HOT or autovacuum: nothing changes there. Reverse: the
claim index with ``lease_until`` again, every option above reset to the server's.
"""

from later_django.migration_operations import ReleasedMigration, VendorSQL

QUEUE_VACUUM = {
    "autovacuum_vacuum_scale_factor": "0",
    "autovacuum_vacuum_threshold": "1000",
    "autovacuum_vacuum_insert_scale_factor": "0",
    "autovacuum_vacuum_insert_threshold": "10000",
    "autovacuum_vacuum_cost_delay": "0",
}
COUNTER_VACUUM = {
    "autovacuum_vacuum_scale_factor": "0",
    "autovacuum_vacuum_threshold": "1000",
    "autovacuum_vacuum_cost_delay": "0",
}
HISTORY_VACUUM = {
    "autovacuum_vacuum_scale_factor": "0.02",
    "autovacuum_vacuum_threshold": "1000",
}

#: table -> its storage parameters (``ALTER TABLE ... SET``); the docstring says why.
TABLE_OPTIONS: dict[str, dict[str, str]] = {
    "later_delivery_queue": {"fillfactor": "50", **QUEUE_VACUUM},
    "later_job_execution": dict(QUEUE_VACUUM),
    "later_partition_job": dict(QUEUE_VACUUM),
    "later_partition_head": dict(QUEUE_VACUUM),
    "later_worker": dict(QUEUE_VACUUM),
    "later_stage_counts": {"fillfactor": "10", **COUNTER_VACUUM},
    "later_queue_depth": {"fillfactor": "10", **COUNTER_VACUUM},
    "later_partition_lease": {"fillfactor": "50", **COUNTER_VACUUM},
    "later_storage": {"fillfactor": "70", **HISTORY_VACUUM},
    "later_jobs_index": dict(HISTORY_VACUUM),
}

SET_OPTIONS = [
    f"ALTER TABLE {table} SET ("
    + ", ".join(f"{name} = {value}" for name, value in options.items())
    + ")"
    for table, options in TABLE_OPTIONS.items()
]
RESET_OPTIONS = [
    f"ALTER TABLE {table} RESET (" + ", ".join(options) + ")"
    for table, options in TABLE_OPTIONS.items()
]

# The claim index without ``lease_until`` (see 1. above), and 0002's for the reverse.
HOT_CLAIM_INDEX = [
    "DROP INDEX IF EXISTS later_delivery_queue_claim_idx",
    "CREATE INDEX later_delivery_queue_claim_idx ON later_delivery_queue "
    "(namespace, priority DESC, sequence) INCLUDE (queue_name, available_at)",
]
COVERING_CLAIM_INDEX = [
    "DROP INDEX IF EXISTS later_delivery_queue_claim_idx",
    "CREATE INDEX later_delivery_queue_claim_idx ON later_delivery_queue "
    "(namespace, priority DESC, sequence) INCLUDE (queue_name, available_at, lease_until)",
]


class Migration(ReleasedMigration):
    dependencies = [("later_django", "0006_claim_from_every_queue")]

    operations = [
        VendorSQL(
            forwards={"sqlite": [], "postgresql": HOT_CLAIM_INDEX + SET_OPTIONS},
            backwards={"sqlite": [], "postgresql": RESET_OPTIONS + COVERING_CLAIM_INDEX},
        )
    ]
