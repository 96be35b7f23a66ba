"""MySQL and MariaDB (Django's vendor ``"mysql"``): the whole later_* schema of 0001-0018.

Migrations 0001-0018 are :class:`~later_django.migration_operations.ReleasedMigration`:
on MySQL they only move Django's migration state. This one builds there what they
build on PostgreSQL, in one place and MySQL's way (decisions 212-217); on SQLite and
PostgreSQL it runs nothing (empty lists), so their schema is exactly what it was.

What differs from PostgreSQL, and why:

* **Byte order.** Every table is ``utf8mb4`` with ``utf8mb4_bin`` as its default, so
  every text column (every key column among them) compares and sorts by code point
  (byte order of the UTF-8 text), as ``COLLATE "C"`` does on PostgreSQL: key ranges such
  as ``["ns-stats-", "ns-stats.")`` and keyset pages need it, and a linguistic
  collation (``utf8mb4_general_ci``, ``utf8mb4_0900_ai_ci``) would also fold case. A
  column a later Django ``AddField`` adds takes the table's default: ``utf8mb4_bin``.
* **Keys within InnoDB's 3,072 bytes.** ``varchar(n)`` counts ``4n`` bytes in a key.
  Three keys of the models are longer; each keeps its meaning through a SHA-256 of the
  long part, a ``STORED`` generated column (MySQL computes it; a writer never names it):

  - ``later_log_consumer_member`` (4 x 200 characters, 3,200 bytes): unique on
    ``(namespace, group_name, topic, member_hash)``;
  - ``later_task_minute`` (5,680 bytes): unique on ``(namespace, minute_bucket,
    row_hash)``, ``row_hash`` over task, queue, outcome, error class and duration
    bucket, each length-prefixed so no two rows hash the same text;
  - ``later_storage_range``'s unique ``(range_key, value)`` over a blob: unique on
    ``(range_key, value_hash)``. MariaDB would accept the blob through a hidden hash
    index (``USING HASH``), which MySQL rejects and which no ``ON DUPLICATE KEY`` can
    rely on;
  - ``later_jobs_index_task_idx`` (``payload_type`` is 500 characters) and
    ``later_jobs_index_error_idx`` (``error_class`` is ``text``) hold
    ``payload_type_hash`` / ``error_class_hash`` in the filter column's place: a filter
    reads ``payload_type_hash = UNHEX(SHA2(%s, 256)) AND payload_type = %s``.

  MariaDB refuses a generated column in a primary key, and MySQL services often
  refuse a table without one (``sql_require_primary_key``): the two tables whose key
  is hashed get a surrogate ``id`` primary key beside their unique key.
* **Full indexes for partial and covering ones.** MySQL has neither: each
  ``WHERE`` is dropped and each ``INCLUDE`` column becomes a trailing key column.
  ``later_jobs_index_queued_idx`` (PostgreSQL: ``(namespace, job_id) WHERE stage =
  'enqueued' AND topic IS NULL``) is ``(namespace, stage, topic, job_id)``, which finds
  the same rows as one range. ``DESC`` in the claim index is stored descending by
  MySQL 8.0 and MariaDB 10.8+ (10.6 and 10.7 parse it and build the part ascending).
* **Counter triggers per row, sharded.** MySQL has no statement triggers or transition
  tables: each row written to ``later_delivery_queue`` or ``later_jobs_index`` upserts
  its counter rows itself (the same deltas as PostgreSQL's functions of 0009 and 0010:
  a ready message counts in its queue's depth, every index row in its stage's count).
  The counter row is the shard ``CONNECTION_ID() % 8`` (PostgreSQL: the backend pid),
  so two sessions serialise on a counter row only when their ids meet modulo 8; the
  readers already sum the shards. An upsert whose update changes nothing (a revision
  guard) fires the update trigger with equal old and new rows: it counts nothing.
* **Table options.** ``ENGINE=InnoDB ROW_FORMAT=DYNAMIC`` (the row format of the
  3,072-byte limit). PostgreSQL's fillfactor and autovacuum settings (0007) have no
  MySQL counterpart.

Column types are those Django's MySQL backend gives the models' fields (``longblob``,
``longtext``, ``bigint``...), so Django's later operations find them as it expects.
A database where an earlier release's ``migrate`` stopped half-way on MySQL (0001
failed there) still holds the tables it made: drop them first.

Reverse: every table is dropped (0001-0018 then run nothing on MySQL).
"""

from django.db import migrations

from later_django.migration_operations import VendorSQL

#: Every table's options: InnoDB, DYNAMIC rows, byte-ordered UTF-8 text.
TABLE = " ENGINE=InnoDB ROW_FORMAT=DYNAMIC DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"


def _sha256(expression: str) -> str:
    return f"binary(32) AS (UNHEX(SHA2({expression}, 256))) STORED"


def _length_prefixed(*columns: str) -> str:
    """An injective text of ``columns``: each as ``<length>:<text>``."""
    return "CONCAT(" + ", ".join(f"CHAR_LENGTH({c}), ':', {c}" for c in columns) + ")"


#: table -> its CREATE TABLE body (columns and keys), in 0001's order of models.
TABLES: dict[str, str] = {
    "later_delivery_queue": """
    sequence bigint NOT NULL AUTO_INCREMENT PRIMARY KEY,
    namespace varchar(200) NOT NULL,
    queue_name varchar(200) NOT NULL,
    payload longblob NOT NULL,
    priority integer NOT NULL,
    available_at bigint NOT NULL,
    lease_owner varchar(200) NULL,
    lease_until bigint NULL,
    deliveries integer NOT NULL DEFAULT 0,
    KEY later_delivery_queue_claim_idx
        (namespace, queue_name, priority DESC, sequence, available_at)""",
    "later_jobs_index": """
    namespace varchar(200) NOT NULL,
    job_id varchar(200) NOT NULL,
    payload_type varchar(500) NOT NULL,
    stage varchar(20) NOT NULL,
    stage_date_ms bigint NOT NULL,
    revision bigint NOT NULL,
    created_at_ms bigint NOT NULL,
    wait_ms bigint NULL,
    wait_mode varchar(20) NULL,
    topic varchar(200) NULL,
    partition_id integer NULL,
    sequence bigint NULL,
    parent_job_id varchar(200) NULL,
    date_expire bigint NULL,
    queue_name varchar(200) NULL,
    error_class longtext NULL,
    payload_type_hash """
    + _sha256("payload_type")
    + """,
    error_class_hash """
    + _sha256("error_class")
    + """,
    PRIMARY KEY (namespace, job_id),
    KEY later_jobs_index_stage_idx (namespace, stage, stage_date_ms, job_id, date_expire),
    KEY later_jobs_index_partition_idx (namespace, topic, partition_id, sequence),
    KEY later_jobs_index_parent_idx (namespace, parent_job_id, stage_date_ms),
    KEY later_jobs_index_expire_idx (namespace, date_expire),
    KEY later_jobs_index_queued_idx (namespace, stage, topic, job_id),
    KEY later_jobs_index_task_idx
        (namespace, stage, payload_type_hash, stage_date_ms, job_id),
    KEY later_jobs_index_queue_idx (namespace, stage, queue_name, stage_date_ms, job_id),
    KEY later_jobs_index_error_idx
        (namespace, stage, error_class_hash, stage_date_ms, job_id)""",
    "later_job_transition_metrics": """
    namespace varchar(200) NOT NULL,
    stage varchar(20) NOT NULL,
    minute_bucket bigint NOT NULL,
    count bigint NOT NULL,
    PRIMARY KEY (namespace, stage, minute_bucket)""",
    "later_job_wait_metrics": """
    namespace varchar(200) NOT NULL,
    mode varchar(20) NOT NULL,
    minute_bucket bigint NOT NULL,
    count bigint NOT NULL,
    sum_ms bigint NOT NULL,
    max_ms bigint NOT NULL,
    PRIMARY KEY (namespace, mode, minute_bucket)""",
    "later_log_consumer_lease": """
    namespace varchar(200) NOT NULL,
    group_name varchar(200) NOT NULL,
    topic varchar(200) NOT NULL,
    partition_id integer NOT NULL,
    owner varchar(200) NULL,
    lease_until bigint NOT NULL,
    epoch bigint NOT NULL,
    PRIMARY KEY (namespace, group_name, topic, partition_id)""",
    "later_log_consumer_member": """
    id bigint NOT NULL AUTO_INCREMENT PRIMARY KEY,
    namespace varchar(200) NOT NULL,
    group_name varchar(200) NOT NULL,
    topic varchar(200) NOT NULL,
    member_id varchar(200) NOT NULL,
    joined_at bigint NOT NULL,
    heartbeat_at bigint NOT NULL,
    member_hash """
    + _sha256("member_id")
    + """,
    UNIQUE KEY later_log_consumer_member_uniq (namespace, group_name, topic, member_hash)""",
    "later_log_consumer_offset": """
    namespace varchar(200) NOT NULL,
    group_name varchar(200) NOT NULL,
    topic varchar(200) NOT NULL,
    partition_id integer NOT NULL,
    next_offset bigint NOT NULL,
    updated_at bigint NOT NULL,
    PRIMARY KEY (namespace, group_name, topic, partition_id)""",
    "later_log_partition": """
    namespace varchar(200) NOT NULL,
    topic varchar(200) NOT NULL,
    partition_id integer NOT NULL,
    next_offset bigint NOT NULL,
    PRIMARY KEY (namespace, topic, partition_id)""",
    "later_log_record": """
    namespace varchar(200) NOT NULL,
    topic varchar(200) NOT NULL,
    partition_id integer NOT NULL,
    record_offset bigint NOT NULL,
    record_key longblob NULL,
    payload longblob NOT NULL,
    appended_at bigint NOT NULL,
    PRIMARY KEY (namespace, topic, partition_id, record_offset)""",
    "later_partition_lease": """
    namespace varchar(200) NOT NULL,
    topic varchar(200) NOT NULL,
    partition_id integer NOT NULL,
    owner varchar(200) NULL,
    lease_until bigint NOT NULL,
    epoch bigint NOT NULL,
    PRIMARY KEY (namespace, topic, partition_id)""",
    "later_partition_sequence": """
    namespace varchar(200) NOT NULL,
    topic varchar(200) NOT NULL,
    partition_id integer NOT NULL,
    next_sequence bigint NOT NULL,
    PRIMARY KEY (namespace, topic, partition_id)""",
    "later_queue_depth": """
    namespace varchar(200) NOT NULL,
    queue_name varchar(200) NOT NULL,
    shard smallint NOT NULL DEFAULT 0,
    ready bigint NOT NULL,
    PRIMARY KEY (namespace, queue_name, shard)""",
    "later_queue_samples": """
    namespace varchar(200) NOT NULL,
    minute_bucket bigint NOT NULL,
    queued bigint NOT NULL,
    partitioned bigint NOT NULL,
    PRIMARY KEY (namespace, minute_bucket)""",
    "later_stage_counts": """
    namespace varchar(200) NOT NULL,
    stage varchar(20) NOT NULL,
    shard smallint NOT NULL DEFAULT 0,
    count bigint NOT NULL,
    PRIMARY KEY (namespace, stage, shard)""",
    "later_storage": """
    `key` varchar(500) NOT NULL PRIMARY KEY,
    value longblob NULL,
    counter_value bigint NULL,
    date_created bigint NOT NULL,
    date_updated bigint NULL,
    date_expire bigint NULL,
    date_expire_unindexed bigint NULL,
    KEY later_storage_expire_idx (date_expire)""",
    "later_topic": """
    namespace varchar(200) NOT NULL,
    topic varchar(200) NOT NULL,
    partitions integer NOT NULL,
    created_at bigint NOT NULL,
    PRIMARY KEY (namespace, topic)""",
    "later_job_execution": """
    namespace varchar(200) NOT NULL,
    job_id varchar(200) NOT NULL,
    owner varchar(200) NOT NULL,
    lease_until bigint NOT NULL,
    attempt integer NOT NULL,
    started_at bigint NOT NULL,
    PRIMARY KEY (namespace, job_id),
    KEY later_job_execution_lease_idx (lease_until)""",
    "later_partition_head": """
    namespace varchar(200) NOT NULL,
    topic varchar(200) NOT NULL,
    partition_id integer NOT NULL,
    sequence bigint NOT NULL,
    job_id varchar(200) NOT NULL,
    earliest_run_at bigint NOT NULL,
    stage varchar(20) NOT NULL,
    PRIMARY KEY (namespace, topic, partition_id),
    KEY later_partition_head_due_idx (namespace, earliest_run_at)""",
    "later_partition_job": """
    namespace varchar(200) NOT NULL,
    topic varchar(200) NOT NULL,
    partition_id integer NOT NULL,
    sequence bigint NOT NULL,
    job_id varchar(200) NOT NULL,
    earliest_run_at bigint NOT NULL,
    PRIMARY KEY (namespace, topic, partition_id, sequence),
    KEY later_partition_job_head_idx
        (namespace, topic, partition_id, sequence, earliest_run_at),
    UNIQUE KEY later_partition_job_job_uniq (namespace, job_id)""",
    "later_storage_range": """
    sequence bigint NOT NULL AUTO_INCREMENT PRIMARY KEY,
    range_key varchar(500) NOT NULL,
    value longblob NOT NULL,
    date_expire bigint NULL,
    value_hash """
    + _sha256("value")
    + """,
    KEY later_storage_range_key_idx (range_key, sequence),
    UNIQUE KEY later_storage_range_member_uniq (range_key, value_hash),
    KEY later_storage_range_expire_idx (date_expire)""",
    "later_worker": """
    namespace varchar(200) NOT NULL,
    worker_id varchar(200) NOT NULL,
    host varchar(200) NOT NULL,
    pid integer NOT NULL,
    concurrency integer NOT NULL,
    queues longtext NOT NULL,
    busy integer NOT NULL,
    started_at bigint NOT NULL,
    heartbeat_at bigint NOT NULL,
    busy_queues longtext NOT NULL DEFAULT ('{}'),
    PRIMARY KEY (namespace, worker_id)""",
    "later_task_minute": """
    id bigint NOT NULL AUTO_INCREMENT PRIMARY KEY,
    namespace varchar(200) NOT NULL,
    minute_bucket bigint NOT NULL,
    task_path varchar(500) NOT NULL,
    queue_name varchar(200) NOT NULL,
    outcome varchar(20) NOT NULL,
    error_class varchar(500) NOT NULL,
    duration_bucket smallint NOT NULL,
    count bigint NOT NULL,
    sum_ms bigint NOT NULL,
    max_ms bigint NOT NULL,
    sample_job_id varchar(200) NOT NULL,
    row_hash """
    + _sha256(
        _length_prefixed("task_path", "queue_name", "outcome", "error_class", "duration_bucket")
    )
    + """,
    UNIQUE KEY later_task_minute_uniq (namespace, minute_bucket, row_hash)""",
}

CREATE_TABLES = [f"CREATE TABLE {table} ({body}\n){TABLE}" for table, body in TABLES.items()]
DROP_TABLES = [f"DROP TABLE IF EXISTS {table}" for table in reversed(TABLES)]


def _counter_upsert(table: str, key: str, value: str, row: str, delta: int) -> str:
    """One counter upsert of a trigger: ``delta`` into ``(namespace, <key>, shard)``."""
    return (
        f"INSERT INTO {table} (namespace, {key}, shard, {value}) "
        f"VALUES ({row}.namespace, {row}.{key}, shard_id, {delta}) "
        f"ON DUPLICATE KEY UPDATE {value} = {value} + ({delta});"
    )


def _depth(row: str, delta: int) -> str:
    return _counter_upsert("later_queue_depth", "queue_name", "ready", row, delta)


def _stage(row: str, delta: int) -> str:
    return _counter_upsert("later_stage_counts", "stage", "count", row, delta)


#: The session's counter shard, declared first in every trigger body.
SHARD = "DECLARE shard_id smallint DEFAULT CONNECTION_ID() % 8;"


def _trigger(name: str, event: str, table: str, body: str) -> str:
    return (
        f"CREATE TRIGGER {name} AFTER {event} ON {table} FOR EACH ROW\n"
        f"BEGIN\n    {SHARD}\n{body}\nEND"
    )


TRIGGERS = [
    # later_queue_depth: a ready message (lease_until NULL) counts in its queue.
    _trigger(
        "later_queue_depth_on_insert",
        "INSERT",
        "later_delivery_queue",
        f"    IF NEW.lease_until IS NULL THEN {_depth('NEW', 1)} END IF;",
    ),
    _trigger(
        "later_queue_depth_on_update",
        "UPDATE",
        "later_delivery_queue",
        "    IF NOT (OLD.lease_until IS NULL AND NEW.lease_until IS NULL\n"
        "            AND OLD.namespace = NEW.namespace AND OLD.queue_name = NEW.queue_name) THEN\n"
        f"        IF OLD.lease_until IS NULL THEN {_depth('OLD', -1)} END IF;\n"
        f"        IF NEW.lease_until IS NULL THEN {_depth('NEW', 1)} END IF;\n"
        "    END IF;",
    ),
    _trigger(
        "later_queue_depth_on_delete",
        "DELETE",
        "later_delivery_queue",
        f"    IF OLD.lease_until IS NULL THEN {_depth('OLD', -1)} END IF;",
    ),
    # later_stage_counts: every index row counts in its stage.
    _trigger(
        "later_stage_counts_on_insert", "INSERT", "later_jobs_index", "    " + _stage("NEW", 1)
    ),
    _trigger(
        "later_stage_counts_on_update",
        "UPDATE",
        "later_jobs_index",
        "    IF NOT (OLD.stage = NEW.stage AND OLD.namespace = NEW.namespace) THEN\n"
        f"        {_stage('OLD', -1)}\n"
        f"        {_stage('NEW', 1)}\n"
        "    END IF;",
    ),
    _trigger(
        "later_stage_counts_on_delete", "DELETE", "later_jobs_index", "    " + _stage("OLD", -1)
    ),
]
TRIGGER_NAMES = [
    "later_queue_depth_on_insert",
    "later_queue_depth_on_update",
    "later_queue_depth_on_delete",
    "later_stage_counts_on_insert",
    "later_stage_counts_on_update",
    "later_stage_counts_on_delete",
]
DROP_TRIGGERS = [f"DROP TRIGGER IF EXISTS {name}" for name in TRIGGER_NAMES]


class Migration(migrations.Migration):
    dependencies = [("later_django", "0018_filter_columns")]

    operations = [
        VendorSQL(
            forwards={"sqlite": [], "postgresql": [], "mysql": CREATE_TABLES + TRIGGERS},
            backwards={"sqlite": [], "postgresql": [], "mysql": DROP_TRIGGERS + DROP_TABLES},
        ),
    ]
