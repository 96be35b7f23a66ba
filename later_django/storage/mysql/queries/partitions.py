"""MySQL/MariaDB partition statements: SQLite's unbatched shapes, lists as JSON arrays.

``batched`` is False: the store runs one statement per partition or row inside
one transaction (``write_transaction``), and composes ``fence_and_next`` from the
lease store's ``renew``, :attr:`next_rows` and the kv store's
``range_members_many``. A list of partitions binds as a JSON array of
``[topic, partition_id]`` read with ``JSON_TABLE`` (its ordinality keeps the
caller's order, the order the rows are written and locked in); a list of job ids
as a JSON array of strings. Writes over a list are multi-table ``DELETE``s joined
to the ``JSON_TABLE``: an ``IN (SELECT ... JSON_TABLE)`` there scans the whole
table on MariaDB 10.11.

A partition's lowest row is found by ``sequence = (SELECT ... ORDER BY sequence
LIMIT 1)`` on the primary key ``(namespace, topic, partition_id, sequence)``: one
index probe per partition (``MIN(sequence)`` read the whole partition there). The
job record's key is ``CONCAT(prefix, job_id)``: ``||`` is OR on MySQL, and
``key`` is a reserved word.
"""

from __future__ import annotations

from later_django.storage.driver import Returning, RowsStatement
from later_django.storage.mysql import MysqlDriver
from later_django.storage.queries.partitions import (
    CLAIM_FROM,
    CLAIM_ORDER,
    HEAD_COLUMNS,
    PartitionQueries,
)

#: ``%(partitions)s`` (a JSON array of ``[topic, partition_id]``) as rows of ``p``,
#: numbered in the caller's order.
_PARTITIONS = (
    "JSON_TABLE(%(partitions)s, '$[*]' COLUMNS (ord FOR ORDINALITY, "
    "topic VARCHAR(200) COLLATE utf8mb4_bin PATH '$[0]', partition_id INT PATH '$[1]')) AS p"
)


def _ids(param: str, alias: str) -> str:
    """The job ids of the JSON array ``%(param)s`` as the rows of ``alias.v``."""
    return (
        f"JSON_TABLE(%({param})s, '$[*]' COLUMNS "
        f"(v VARCHAR(200) COLLATE utf8mb4_bin PATH '$')) AS {alias}"
    )


def _lowest(exits: bool) -> str:
    """Joins ``j``, the lowest row of partition ``p`` (other than the jobs ``%(exits)s``
    when ``exits``), and ``i``, its job's index row."""
    skip = " AND k.job_id NOT IN (SELECT e.v FROM " + _ids("exits", "e") + ")" if exits else ""
    return (
        "STRAIGHT_JOIN later_partition_job AS j ON j.namespace = %(namespace)s "
        "AND j.topic = p.topic AND j.partition_id = p.partition_id "
        "AND j.sequence = (SELECT k.sequence "
        "FROM later_partition_job AS k WHERE k.namespace = %(namespace)s "
        "AND k.topic = p.topic AND k.partition_id = p.partition_id" + skip + " "
        "ORDER BY k.sequence LIMIT 1) "
        "LEFT JOIN later_jobs_index AS i ON i.namespace = %(namespace)s AND i.job_id = j.job_id "
    )


#: ``later_storage``'s reserved ``key`` column quoted in the shared claim text.
_CLAIM_FROM = CLAIM_FROM.replace("s.key = ", "s.`key` = ")
if _CLAIM_FROM == CLAIM_FROM:
    raise RuntimeError("the shared claim text no longer joins later_storage on s.key")


@MysqlDriver.register
class MysqlPartitionQueries(PartitionQueries):
    batched = False
    # The upsert writes only when the topic is registered with that count (an INSERT
    # ... SELECT of no row writes nothing: ROW_COUNT() 0); its row lock on the
    # sequence makes a concurrent allocator of the partition wait, then add to the
    # committed value. The read, by primary key, sees this transaction's own write.
    sequence_allocate = Returning(
        [
            "INSERT INTO later_partition_sequence (namespace, topic, partition_id, "
            "next_sequence) SELECT namespace, topic, %(partition_id)s, %(taken)s + 1 "
            "FROM later_topic WHERE namespace = %(namespace)s AND topic = %(topic)s "
            "AND partitions = %(partitions)s "
            "ON DUPLICATE KEY UPDATE "
            "next_sequence = later_partition_sequence.next_sequence + %(taken)s"
        ],
        "SELECT next_sequence FROM later_partition_sequence WHERE namespace = %(namespace)s "
        "AND topic = %(topic)s AND partition_id = %(partition_id)s AND ROW_COUNT() > 0",
    )
    jobs_insert = RowsStatement(
        "INSERT INTO later_partition_job (namespace, topic, partition_id, sequence, job_id, "
        "earliest_run_at) VALUES {values}",
        row=(
            "(%(namespace)s, %(topic)s, %(partition_id)s, %(sequence)s, %(job_id)s, "
            "%(earliest_run_at)s)"
        ),
    )
    # Inserts only when no committed head shows (a READ COMMITTED read, no lock), so an
    # existing head is neither changed nor locked; a head inserted meanwhile by an
    # uncommitted transaction is waited for and then kept (the no-op update).
    head_insert_if_absent = (
        f"INSERT INTO later_partition_head ({HEAD_COLUMNS}) "
        "SELECT %(namespace)s, %(topic)s, %(partition_id)s, %(sequence)s, %(job_id)s, "
        "%(earliest_run_at)s, %(stage)s FROM DUAL WHERE NOT EXISTS (SELECT 1 "
        "FROM later_partition_head AS h WHERE h.namespace = %(namespace)s "
        "AND h.topic = %(topic)s AND h.partition_id = %(partition_id)s) "
        "ON DUPLICATE KEY UPDATE namespace = later_partition_head.namespace"
    )
    jobs_delete = (
        "DELETE j FROM "
        + _ids("exits", "e")
        + " STRAIGHT_JOIN later_partition_job AS j FORCE INDEX (later_partition_job_job_uniq) "
        "ON j.namespace = %(namespace)s AND j.job_id = e.v"
    )
    job_run_at = (
        "UPDATE later_partition_job FORCE INDEX (later_partition_job_job_uniq) "
        "SET earliest_run_at = %(at)s "
        "WHERE namespace = %(namespace)s AND job_id = %(job_id)s"
    )
    # Each named partition's lowest row, with its job's stage from the index, becomes
    # its head, in the order the partitions are named (the store sorts them).
    head_recompute = (
        f"INSERT INTO later_partition_head ({HEAD_COLUMNS}) "
        "SELECT j.namespace, j.topic, j.partition_id, j.sequence, j.job_id, "
        "j.earliest_run_at, COALESCE(i.stage, 'enqueued') FROM "
        + _PARTITIONS
        + " "
        + _lowest(exits=False)
        + "ORDER BY p.ord "
        "ON DUPLICATE KEY UPDATE sequence = j.sequence, job_id = j.job_id, "
        "earliest_run_at = j.earliest_run_at, stage = COALESCE(i.stage, 'enqueued')"
    )
    # Each named partition's lowest row but the exits, with index stage and record,
    # in the order the partitions are named.
    next_rows = (
        "SELECT j.topic, j.partition_id, j.sequence, j.job_id, COALESCE(i.stage, 'enqueued'), "
        "j.earliest_run_at, s.value FROM "
        + _PARTITIONS
        + " "
        + _lowest(exits=True)
        + "LEFT JOIN later_storage AS s ON s.`key` = CONCAT(%(prefix)s, j.job_id) "
        "AND (s.date_expire IS NULL OR s.date_expire > %(now)s) "
        "ORDER BY p.ord"
    )
    # One partition (the store loops in one transaction): its lowest row when it has
    # no head. The lowest row is found by its sequence, not by ``ORDER BY ... LIMIT 1``
    # over the join: an INSERT reading its own table (the NOT EXISTS) fills a temporary
    # table first, and that read every row of the partition.
    heads_materialize = (
        f"INSERT INTO later_partition_head ({HEAD_COLUMNS}) "
        "SELECT j.namespace, j.topic, j.partition_id, j.sequence, j.job_id, "
        "j.earliest_run_at, COALESCE(i.stage, 'enqueued') FROM later_partition_job AS j "
        "LEFT JOIN later_jobs_index AS i ON i.namespace = %(namespace)s AND i.job_id = j.job_id "
        "WHERE j.namespace = %(namespace)s AND j.topic = %(topic)s "
        "AND j.partition_id = %(partition_id)s AND j.sequence = (SELECT k.sequence "
        "FROM later_partition_job AS k WHERE k.namespace = %(namespace)s "
        "AND k.topic = %(topic)s AND k.partition_id = %(partition_id)s "
        "ORDER BY k.sequence LIMIT 1) "
        "AND NOT EXISTS (SELECT 1 FROM later_partition_head AS h "
        "WHERE h.namespace = %(namespace)s AND h.topic = %(topic)s "
        "AND h.partition_id = %(partition_id)s) "
        "ON DUPLICATE KEY UPDATE namespace = later_partition_head.namespace"
    )
    # The heads of the named partitions that have no row left, run after
    # head_recompute: a head it did not move still names a job whose row is gone (the
    # partition was empty in its read), so that is what is asked, by the job's key
    # (an anti-join: as NOT EXISTS the server read every job id of the namespace).
    # Asking whether the partition has any row would be a locking read here (what a
    # DELETE reads is locked, even at READ COMMITTED): it waited for an enqueue's
    # uncommitted row, then saw it and kept a head naming a deleted row (tried).
    head_delete_if_empty = (
        "DELETE h FROM "
        + _PARTITIONS
        + " STRAIGHT_JOIN later_partition_head AS h ON h.namespace = %(namespace)s "
        "AND h.topic = p.topic AND h.partition_id = p.partition_id "
        "LEFT JOIN later_partition_job AS j FORCE INDEX (later_partition_job_job_uniq) "
        "ON j.namespace = %(namespace)s AND j.job_id = h.job_id WHERE j.job_id IS NULL"
    )
    heads_claim = (
        _CLAIM_FROM.format(record_key="CONCAT(%(prefix)s, h.job_id)")
        + " AND h.job_id NOT IN (SELECT x.v FROM "
        + _ids("exclude", "x")
        + ")"
        + CLAIM_ORDER
    )
