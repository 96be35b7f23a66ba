"""Counter triggers, partial and covering indexes, per database vendor.

* ``later_queue_depth`` follows ``later_delivery_queue``: publishing a ready
  row adds one, claiming (``lease_until`` set) subtracts one, handing a claimed
  row back adds one, deleting a ready row subtracts one, deleting (acking) a
  claimed row changes nothing.
* ``later_stage_counts`` follows ``later_jobs_index`` for the live stages:
  insert adds, a stage change moves one from the old stage to the new, delete
  subtracts. A same-stage re-save, or an upsert the revision guard rejects,
  changes nothing.

SQLite has one writer at a time; its row triggers write shard 0. PostgreSQL
uses statement-level triggers with transition tables (one counter write per
statement, however many rows) into shard ``pg_backend_pid() % 8``, so workers
do not queue behind one hot counter row.
"""

from later_django.migration_operations import ReleasedMigration, VendorSQL

LIVE_STAGES = "('delayed', 'waiting', 'enqueued', 'running', 'requeued')"

SQLITE_INDEXES = [
    "CREATE INDEX later_storage_expire_idx ON later_storage (date_expire) "
    "WHERE date_expire IS NOT NULL",
    "CREATE INDEX later_storage_range_expire_idx ON later_storage_range (date_expire) "
    "WHERE date_expire IS NOT NULL",
    # Claim order is priority, then age; the trailing columns let the claim
    # filter (queue, due, not leased) be decided from the index alone.
    "CREATE INDEX later_delivery_queue_claim_idx ON later_delivery_queue "
    "(namespace, priority DESC, sequence, queue_name, available_at, lease_until)",
    # Live-stage counts and per-stage listings (newest first) from the index alone.
    "CREATE INDEX later_jobs_index_stage_idx ON later_jobs_index "
    "(namespace, stage, stage_date_ms, job_id, date_expire)",
    "CREATE INDEX later_jobs_index_partition_idx ON later_jobs_index "
    "(namespace, topic, partition_id, sequence) WHERE topic IS NOT NULL",
    "CREATE INDEX later_jobs_index_parent_idx ON later_jobs_index "
    "(namespace, parent_job_id, stage_date_ms) WHERE parent_job_id IS NOT NULL",
    "CREATE INDEX later_jobs_index_expire_idx ON later_jobs_index "
    "(namespace, date_expire) WHERE date_expire IS NOT NULL",
]

# Internal keys are ASCII and compared as prefixes (half-open ranges such as
# ``["ns-stats-", "ns-stats.")``), which needs byte order: under a linguistic
# default collation (e.g. en_US.UTF-8) punctuation is ignored and such a range
# misses keys. SQLite compares bytes (BINARY) already.
POSTGRES_BYTE_ORDER_KEYS = [
    'ALTER TABLE later_storage ALTER COLUMN key TYPE varchar(500) COLLATE "C"',
    'ALTER TABLE later_storage_range ALTER COLUMN range_key TYPE varchar(500) COLLATE "C"',
]
POSTGRES_DEFAULT_ORDER_KEYS = [
    'ALTER TABLE later_storage ALTER COLUMN key TYPE varchar(500) COLLATE "default"',
    'ALTER TABLE later_storage_range ALTER COLUMN range_key TYPE varchar(500) COLLATE "default"',
]

POSTGRES_INDEXES = [
    "CREATE INDEX later_storage_expire_idx ON later_storage (date_expire) "
    "WHERE date_expire IS NOT NULL",
    "CREATE INDEX later_storage_range_expire_idx ON later_storage_range (date_expire) "
    "WHERE date_expire IS NOT NULL",
    "CREATE INDEX later_delivery_queue_claim_idx ON later_delivery_queue "
    "(namespace, priority DESC, sequence) INCLUDE (queue_name, available_at, lease_until)",
    "CREATE INDEX later_jobs_index_stage_idx ON later_jobs_index "
    "(namespace, stage, stage_date_ms, job_id) INCLUDE (date_expire)",
    "CREATE INDEX later_jobs_index_partition_idx ON later_jobs_index "
    "(namespace, topic, partition_id, sequence) WHERE topic IS NOT NULL",
    "CREATE INDEX later_jobs_index_parent_idx ON later_jobs_index "
    "(namespace, parent_job_id, stage_date_ms) WHERE parent_job_id IS NOT NULL",
    "CREATE INDEX later_jobs_index_expire_idx ON later_jobs_index "
    "(namespace, date_expire) WHERE date_expire IS NOT NULL",
]

INDEX_NAMES = [
    "later_storage_expire_idx",
    "later_storage_range_expire_idx",
    "later_delivery_queue_claim_idx",
    "later_jobs_index_stage_idx",
    "later_jobs_index_partition_idx",
    "later_jobs_index_parent_idx",
    "later_jobs_index_expire_idx",
]
DROP_INDEXES = [f"DROP INDEX IF EXISTS {name}" for name in INDEX_NAMES]

SQLITE_DEPTH_UPSERT = (
    "INSERT INTO later_queue_depth (namespace, queue_name, shard, ready) "
    "SELECT {row}.namespace, {row}.queue_name, 0, {delta} WHERE true "
    "ON CONFLICT (namespace, queue_name, shard) DO UPDATE SET ready = ready + excluded.ready;"
)


def sqlite_stage_upsert(stages: str) -> str:
    """The SQLite stage-counter upsert for the stages of the SQL list ``stages``
    (``{row}``/``{delta}`` left to fill); migration 0005 reuses it."""
    return (
        "INSERT INTO later_stage_counts (namespace, stage, shard, count) "
        "SELECT {row}.namespace, {row}.stage, 0, {delta} WHERE {row}.stage IN " + stages + " "
        "ON CONFLICT (namespace, stage, shard) DO UPDATE SET count = count + excluded.count;"
    )


def sqlite_stage_count_triggers(stages: str) -> list[str]:
    """The three SQLite ``later_stage_counts`` triggers, counting the stages of ``stages``."""
    upsert = sqlite_stage_upsert(stages)
    return [
        "CREATE TRIGGER later_stage_counts_on_insert AFTER INSERT ON later_jobs_index BEGIN "
        + upsert.format(row="NEW", delta="1")
        + " END",
        "CREATE TRIGGER later_stage_counts_on_move AFTER UPDATE OF stage ON later_jobs_index "
        "WHEN OLD.stage IS NOT NEW.stage BEGIN "
        + upsert.format(row="OLD", delta="-1")
        + " "
        + upsert.format(row="NEW", delta="1")
        + " END",
        "CREATE TRIGGER later_stage_counts_on_delete AFTER DELETE ON later_jobs_index BEGIN "
        + upsert.format(row="OLD", delta="-1")
        + " END",
    ]


SQLITE_STAGE_UPSERT = sqlite_stage_upsert(LIVE_STAGES)
SQLITE_STAGE_COUNT_TRIGGER_NAMES = (
    "later_stage_counts_on_insert",
    "later_stage_counts_on_move",
    "later_stage_counts_on_delete",
)

SQLITE_TRIGGERS = [
    "CREATE TRIGGER later_queue_depth_on_insert AFTER INSERT ON later_delivery_queue "
    "WHEN NEW.lease_until IS NULL BEGIN "
    + SQLITE_DEPTH_UPSERT.format(row="NEW", delta="1")
    + " END",
    "CREATE TRIGGER later_queue_depth_on_claim AFTER UPDATE OF lease_until "
    "ON later_delivery_queue WHEN OLD.lease_until IS NULL AND NEW.lease_until IS NOT NULL "
    "BEGIN " + SQLITE_DEPTH_UPSERT.format(row="NEW", delta="-1") + " END",
    "CREATE TRIGGER later_queue_depth_on_release AFTER UPDATE OF lease_until "
    "ON later_delivery_queue WHEN OLD.lease_until IS NOT NULL AND NEW.lease_until IS NULL "
    "BEGIN " + SQLITE_DEPTH_UPSERT.format(row="NEW", delta="1") + " END",
    "CREATE TRIGGER later_queue_depth_on_delete AFTER DELETE ON later_delivery_queue "
    "WHEN OLD.lease_until IS NULL BEGIN "
    + SQLITE_DEPTH_UPSERT.format(row="OLD", delta="-1")
    + " END",
    *sqlite_stage_count_triggers(LIVE_STAGES),
]
SQLITE_DROP_TRIGGERS = [
    f"DROP TRIGGER IF EXISTS {name}"
    for name in (
        "later_queue_depth_on_insert",
        "later_queue_depth_on_claim",
        "later_queue_depth_on_release",
        "later_queue_depth_on_delete",
        *SQLITE_STAGE_COUNT_TRIGGER_NAMES,
    )
]


def postgres_stage_counts_function(stages: str, create: str = "CREATE FUNCTION") -> str:
    """``later_stage_counts_follow()`` counting the stages of the SQL list ``stages``;
    migration 0005 passes ``CREATE OR REPLACE FUNCTION``."""
    return (
        "\n"
        + create
        + """ later_stage_counts_follow() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    shard_id smallint := (pg_backend_pid() % 8)::smallint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO later_stage_counts (namespace, stage, shard, count)
        SELECT namespace, stage, shard_id, COUNT(*) FROM new_rows
        WHERE stage IN """
        + stages
        + """
        GROUP BY namespace, stage ORDER BY namespace, stage
        ON CONFLICT (namespace, stage, shard)
        DO UPDATE SET count = later_stage_counts.count + EXCLUDED.count;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO later_stage_counts (namespace, stage, shard, count)
        SELECT namespace, stage, shard_id, -COUNT(*) FROM old_rows
        WHERE stage IN """
        + stages
        + """
        GROUP BY namespace, stage ORDER BY namespace, stage
        ON CONFLICT (namespace, stage, shard)
        DO UPDATE SET count = later_stage_counts.count + EXCLUDED.count;
    ELSE
        INSERT INTO later_stage_counts (namespace, stage, shard, count)
        SELECT namespace, stage, shard_id, SUM(delta) FROM (
            SELECT o.namespace, o.stage, -1 AS delta
            FROM old_rows o JOIN new_rows n ON n.namespace = o.namespace AND n.job_id = o.job_id
            WHERE o.stage IS DISTINCT FROM n.stage
            UNION ALL
            SELECT n.namespace, n.stage, 1 AS delta
            FROM old_rows o JOIN new_rows n ON n.namespace = o.namespace AND n.job_id = o.job_id
            WHERE o.stage IS DISTINCT FROM n.stage
        ) AS moves
        WHERE stage IN """
        + stages
        + """
        GROUP BY namespace, stage HAVING SUM(delta) <> 0 ORDER BY namespace, stage
        ON CONFLICT (namespace, stage, shard)
        DO UPDATE SET count = later_stage_counts.count + EXCLUDED.count;
    END IF;
    RETURN NULL;
END;
$$
"""
    )


# PostgreSQL: one function per counter; the statement-level triggers pass the
# operation, and the function folds the statement's transition table(s) into
# one grouped upsert, in key order so two writers sharing a shard never lock
# its rows in opposite orders.
POSTGRES_FUNCTIONS = [
    """
CREATE FUNCTION later_queue_depth_follow() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    shard_id smallint := (pg_backend_pid() % 8)::smallint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO later_queue_depth (namespace, queue_name, shard, ready)
        SELECT namespace, queue_name, shard_id, COUNT(*) FROM new_rows
        WHERE lease_until IS NULL
        GROUP BY namespace, queue_name ORDER BY namespace, queue_name
        ON CONFLICT (namespace, queue_name, shard)
        DO UPDATE SET ready = later_queue_depth.ready + EXCLUDED.ready;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO later_queue_depth (namespace, queue_name, shard, ready)
        SELECT namespace, queue_name, shard_id, -COUNT(*) FROM old_rows
        WHERE lease_until IS NULL
        GROUP BY namespace, queue_name ORDER BY namespace, queue_name
        ON CONFLICT (namespace, queue_name, shard)
        DO UPDATE SET ready = later_queue_depth.ready + EXCLUDED.ready;
    ELSE
        INSERT INTO later_queue_depth (namespace, queue_name, shard, ready)
        SELECT n.namespace, n.queue_name, shard_id,
               SUM(CASE WHEN n.lease_until IS NULL THEN 1 ELSE -1 END)
        FROM old_rows o JOIN new_rows n ON n.sequence = o.sequence
        WHERE (o.lease_until IS NULL) <> (n.lease_until IS NULL)
        GROUP BY n.namespace, n.queue_name ORDER BY n.namespace, n.queue_name
        ON CONFLICT (namespace, queue_name, shard)
        DO UPDATE SET ready = later_queue_depth.ready + EXCLUDED.ready;
    END IF;
    RETURN NULL;
END;
$$
""",
    postgres_stage_counts_function(LIVE_STAGES),
]

POSTGRES_TRIGGERS = [
    "CREATE TRIGGER later_queue_depth_on_insert AFTER INSERT ON later_delivery_queue "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION later_queue_depth_follow()",
    "CREATE TRIGGER later_queue_depth_on_update AFTER UPDATE ON later_delivery_queue "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION later_queue_depth_follow()",
    "CREATE TRIGGER later_queue_depth_on_delete AFTER DELETE ON later_delivery_queue "
    "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION later_queue_depth_follow()",
    "CREATE TRIGGER later_stage_counts_on_insert AFTER INSERT ON later_jobs_index "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION later_stage_counts_follow()",
    "CREATE TRIGGER later_stage_counts_on_update AFTER UPDATE ON later_jobs_index "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION later_stage_counts_follow()",
    "CREATE TRIGGER later_stage_counts_on_delete AFTER DELETE ON later_jobs_index "
    "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION later_stage_counts_follow()",
]
POSTGRES_DROP_TRIGGERS = [
    "DROP TRIGGER IF EXISTS later_queue_depth_on_insert ON later_delivery_queue",
    "DROP TRIGGER IF EXISTS later_queue_depth_on_update ON later_delivery_queue",
    "DROP TRIGGER IF EXISTS later_queue_depth_on_delete ON later_delivery_queue",
    "DROP TRIGGER IF EXISTS later_stage_counts_on_insert ON later_jobs_index",
    "DROP TRIGGER IF EXISTS later_stage_counts_on_update ON later_jobs_index",
    "DROP TRIGGER IF EXISTS later_stage_counts_on_delete ON later_jobs_index",
    "DROP FUNCTION IF EXISTS later_queue_depth_follow()",
    "DROP FUNCTION IF EXISTS later_stage_counts_follow()",
]


class Migration(ReleasedMigration):
    dependencies = [("later_django", "0001_initial")]

    operations = [
        VendorSQL(
            forwards={
                "sqlite": SQLITE_INDEXES + SQLITE_TRIGGERS,
                "postgresql": POSTGRES_BYTE_ORDER_KEYS
                + POSTGRES_INDEXES
                + POSTGRES_FUNCTIONS
                + POSTGRES_TRIGGERS,
            },
            backwards={
                "sqlite": SQLITE_DROP_TRIGGERS + DROP_INDEXES,
                "postgresql": POSTGRES_DROP_TRIGGERS + DROP_INDEXES + POSTGRES_DEFAULT_ORDER_KEYS,
            },
        )
    ]
