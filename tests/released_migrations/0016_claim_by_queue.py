"""The claim index led by the queue, and a claim that merges the queues it serves.

Until now ``later_delivery_queue_claim_idx`` was ``(namespace, priority DESC,
sequence)`` with the queue name only carried for the filter: a claim for queue A
walked, in claim order, every row of every other queue of the namespace ahead of
A's first row. With a million ready messages in a queue no worker serves (a paused
queue, one whose workers run on other hosts, one served by slower workers: exactly
when a backlog builds) every claim of A read a million index entries (328 - 374 ms,
measured in issue 32), and idle workers spent a core doing it.

The index is now ``(namespace, queue_name, priority DESC, sequence)``, and a claim
walks each served queue's own head:

* **served queues** are the ``queue_names`` given, or, when ``NULL`` (a worker for
  every queue), each queue name present in the table, found by a skip scan of the
  index (one index descent per distinct name, never a walk of the rows);
* **per queue**, the ready messages in claim order, at most one batch, locked
  ``FOR UPDATE SKIP LOCKED`` (PostgreSQL; SQLite has one writer);
* **merged**: those candidates in claim order (priority, then age) across the
  queues, at most one batch, and the batch-or-one rule of migration 0003.

So a claim reads at most (served queues times batch) ready rows, plus the leased and
not-yet-due rows at the heads of its own queues, however many rows other queues
hold. The highest priority across the served queues still goes first. On
PostgreSQL, candidates of a queue that lose the merge stay locked until the claim
commits (milliseconds); another claimer skips them, as it skips any row being
claimed.

PostgreSQL: ``later_claim_counted`` (migration 0014) keeps its signature, record
read and delivery count; only its candidates change, and its plan stays pinned
(``enable_seqscan`` and ``enable_bitmapscan`` off). The older claim functions
(``later_claim_batch``, ``later_claim_with_records``), which only a worker of an
earlier release calls, keep working on the new index with a sort. SQLite's claim
statement changes alike (``storage/sqlite/queries/queue.py``). Building the index
locks writes to the queue table for as long as it takes (about a second per
million rows here); run the migration before starting the new workers.

Reverse: 0007's index (PostgreSQL) or 0002's (SQLite), and 0014's function.
"""

from importlib import import_module

from django.db import migrations

from tests.released_migrations._operations import VendorSQL

_0014 = import_module("tests.released_migrations.0014_delivery_count")

POSTGRES_INDEX = [
    "DROP INDEX IF EXISTS later_delivery_queue_claim_idx",
    "CREATE INDEX later_delivery_queue_claim_idx ON later_delivery_queue "
    "(namespace, queue_name, priority DESC, sequence) INCLUDE (available_at)",
]
POSTGRES_INDEX_BEFORE = [
    "DROP INDEX IF EXISTS later_delivery_queue_claim_idx",
    "CREATE INDEX later_delivery_queue_claim_idx ON later_delivery_queue "
    "(namespace, priority DESC, sequence) INCLUDE (queue_name, available_at)",
]
SQLITE_INDEX = [
    "DROP INDEX IF EXISTS later_delivery_queue_claim_idx",
    "CREATE INDEX later_delivery_queue_claim_idx ON later_delivery_queue "
    "(namespace, queue_name, priority DESC, sequence, available_at, lease_until)",
]
SQLITE_INDEX_BEFORE = [
    "DROP INDEX IF EXISTS later_delivery_queue_claim_idx",
    "CREATE INDEX later_delivery_queue_claim_idx ON later_delivery_queue "
    "(namespace, priority DESC, sequence, queue_name, available_at, lease_until)",
]

# 0014's function with other candidates: its head (signature, settings, record
# read) and its tail from ``chosen`` on (the batch-or-one rule, the lease and
# count, the record join) are kept word for word.
_HEAD, _, _ = _0014.CREATE_CLAIM_COUNTED.partition("WITH candidates AS (")
_, _, _TAIL = _0014.CREATE_CLAIM_COUNTED.partition("\n), chosen AS (")
CLAIM_BY_QUEUE = (
    _HEAD.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
    + r"""WITH RECURSIVE
-- The served queues: the given names (each once), or every name of the namespace
-- found by a skip scan of the claim index (one descent per name).
every_queue(queue_name) AS (
    SELECT (SELECT lowest.queue_name FROM later_delivery_queue AS lowest
            WHERE lowest.namespace = p_namespace AND p_queue_names IS NULL
            ORDER BY lowest.queue_name LIMIT 1)
    UNION ALL
    SELECT (SELECT next_name.queue_name FROM later_delivery_queue AS next_name
            WHERE next_name.namespace = p_namespace
              AND next_name.queue_name > every_queue.queue_name
            ORDER BY next_name.queue_name LIMIT 1)
    FROM every_queue WHERE every_queue.queue_name IS NOT NULL
), served(queue_name) AS (
    SELECT DISTINCT listed.queue_name FROM unnest(p_queue_names) AS listed(queue_name)
    UNION ALL
    SELECT every_queue.queue_name FROM every_queue WHERE every_queue.queue_name IS NOT NULL
), candidates AS (
    SELECT picked.sequence, picked.priority
    FROM served CROSS JOIN LATERAL (
        SELECT ready.sequence, ready.priority FROM later_delivery_queue AS ready
        WHERE ready.namespace = p_namespace AND ready.queue_name = served.queue_name
          AND ready.available_at <= p_now
          AND (ready.lease_until IS NULL OR ready.lease_until <= p_now)
        ORDER BY ready.priority DESC, ready.sequence
        LIMIT p_batch
        FOR UPDATE SKIP LOCKED
    ) AS picked
    ORDER BY picked.priority DESC, picked.sequence
    LIMIT p_batch"""
    + "\n), chosen AS ("
    + _TAIL
)
CLAIM_IN_ORDER = _0014.CREATE_CLAIM_COUNTED.replace(
    "CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1
)


class Migration(migrations.Migration):
    dependencies = [("later_django", "0015_worker_heartbeat_unindexed")]

    operations = [
        VendorSQL(
            forwards={"sqlite": SQLITE_INDEX, "postgresql": [*POSTGRES_INDEX, CLAIM_BY_QUEUE]},
            backwards={
                "sqlite": SQLITE_INDEX_BEFORE,
                "postgresql": [*POSTGRES_INDEX_BEFORE, CLAIM_IN_ORDER],
            },
        )
    ]
