"""The later_* schema on MySQL/MariaDB (migration 0019, issue 36), and proof that the
migrations that brought it change nothing on PostgreSQL and SQLite.

* On SQLite and PostgreSQL a database built by the migrations as released
  (``tests/released_migrations``, 0001-0018 before MySQL) has, after the current
  migrations ran on it, exactly the schema it had (every table, column, type,
  collation, default, index, constraint, trigger, function and storage option,
  read from the catalogues); a fresh database built by the current migrations has
  the same schema too.
* On MariaDB (the ``mariadb`` alias, skipped only when no server answers): every
  table, key and trigger exists; every text column is ``utf8mb4_bin``; every key fits
  InnoDB's 3,072 bytes as declared, with no prefix part and no hash index (MariaDB
  turns an over-long unique key into a hidden hash index that MySQL rejects); the
  triggers count as PostgreSQL's do, into the session's shard; and the schema
  migrates to zero and back.
"""

from __future__ import annotations

import re
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connections
from django.db.migrations.loader import MigrationLoader
from django.test.utils import override_settings

from later_django.migration_operations import (
    RELEASED_VENDORS,
    SUPPORTED_VENDORS,
    ReleasedMigration,
    VendorSQL,
)
from later_django.storage.stores import stores_for
from later_django.storage.types import Increment, RangeAdd, Set
from tests.test_migrations import EXPECTED_INDEXES, EXPECTED_TABLES, released_migrations_run_on

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True

RELEASED = "tests.released_migrations"
RELEASED_NAMES = [
    "0001_initial",
    "0002_triggers_and_indexes",
    "0003_postgres_claim_function",
    "0004_postgres_drop_storage_key_like_index",
    "0005_count_finished_stages",
    "0006_claim_from_every_queue",
    "0007_postgres_lean_tables",
    "0008_claim_with_records",
    "0009_postgres_counters_without_joins",
    "0010_count_every_stage",
    "0011_worker_busy_queues",
    "0012_task_minute",
    "0013_storage_unindexed_expiry",
    "0014_delivery_count",
    "0015_worker_heartbeat_unindexed",
    "0016_claim_by_queue",
    "0017_bounded_passes",
    "0018_filter_columns",
]

POSTGRES_CATALOGUE = {
    "columns": (
        "SELECT table_name, column_name, ordinal_position, data_type,"
        " character_maximum_length, numeric_precision, collation_name, is_nullable,"
        " column_default FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name LIKE 'later\\_%%'"
    ),
    "indexes": (
        "SELECT tablename, indexname, indexdef FROM pg_indexes"
        " WHERE schemaname = current_schema() AND tablename LIKE 'later\\_%%'"
    ),
    "constraints": (
        "SELECT c.relname, k.conname, pg_get_constraintdef(k.oid) FROM pg_constraint k"
        " JOIN pg_class c ON c.oid = k.conrelid"
        " WHERE c.relnamespace = current_schema()::regnamespace AND c.relname LIKE 'later\\_%%'"
    ),
    "triggers": (
        "SELECT tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t"
        " JOIN pg_class c ON c.oid = t.tgrelid"
        " WHERE NOT t.tgisinternal AND c.relname LIKE 'later\\_%%'"
    ),
    "functions": (
        "SELECT proname, pg_get_function_identity_arguments(oid), pg_get_functiondef(oid)"
        " FROM pg_proc WHERE pronamespace = current_schema()::regnamespace"
        " AND proname LIKE 'later\\_%%'"
    ),
    "storage options": (
        "SELECT relname, relkind, reloptions FROM pg_class"
        " WHERE relnamespace = current_schema()::regnamespace AND relname LIKE 'later\\_%%'"
    ),
}
SQLITE_CATALOGUE = {
    "objects": (
        "SELECT type, name, tbl_name, sql FROM sqlite_master"
        " WHERE tbl_name LIKE 'later\\_%%' ESCAPE '\\'"
    ),
}


def schema_dump(alias: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every later_* object of the database, as its catalogues describe it, sorted."""
    connection = connections[alias]
    queries = POSTGRES_CATALOGUE if connection.vendor == "postgresql" else SQLITE_CATALOGUE
    dump = {}
    with connection.cursor() as cursor:
        for part, query in queries.items():
            cursor.execute(query)
            dump[part] = sorted(tuple(map(repr, row)) for row in cursor.fetchall())
            assert dump[part], f"no {part} in the dump of {alias}"
    return dump


def migrate(alias: str, *target: str) -> None:
    call_command("migrate", "later_django", *target, database=alias, verbosity=0)


def test_the_new_migrations_change_nothing_in_a_released_schema(db_alias: str) -> None:
    """Built by the released 0001-0018, then migrated by the current code: the same
    schema, and the same as a fresh database the current code builds."""
    released_migrations_run_on(db_alias)
    migrate(db_alias, "zero")
    try:
        with override_settings(MIGRATION_MODULES={"later_django": RELEASED}):
            migrate(db_alias, "0018")
        released = schema_dump(db_alias)
        migrate(db_alias)
        assert MigrationLoader(connections[db_alias]).applied_migrations.keys() >= {
            ("later_django", "0019_mysql_schema")
        }
        assert schema_dump(db_alias) == released
        migrate(db_alias, "zero")
        migrate(db_alias)
        assert schema_dump(db_alias) == released
    finally:
        migrate(db_alias)


def table_rows(alias: str) -> dict[str, list[str]]:
    """Every row of every later_* table, as text, sorted per table."""
    connection = connections[alias]
    tables = sorted(t for t in connection.introspection.table_names() if t.startswith("later_"))
    dump = {}
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            dump[table] = sorted(repr(tuple(row)) for row in cursor.fetchall())
    return dump


def test_a_released_database_keeps_its_rows_through_the_new_migrations(db_alias: str) -> None:
    """Built by the released 0001-0018 and holding work (messages in two queues, a
    value, a counter, range members; the counter triggers' rows with them), then
    migrated by the current code: every row of every later_* table is as it was."""
    released_migrations_run_on(db_alias)
    migrate(db_alias, "zero")
    try:
        with override_settings(MIGRATION_MODULES={"later_django": RELEASED}):
            migrate(db_alias, "0018")
        stores = stores_for(db_alias)
        stores.queue.publish("rows", "default", [b"one", b"two"])
        stores.queue.publish("rows", "other", [b"three"], priority=5)
        stores.kv.apply(
            [Set("rows-value", b"v"), Increment("rows-counter", 3), RangeAdd("rows-r", b"m")]
        )
        before = table_rows(db_alias)
        assert sum(len(rows) for rows in before.values()) >= 6, before
        migrate(db_alias)
        assert table_rows(db_alias) == before
    finally:
        migrate(db_alias, "zero")
        migrate(db_alias)


def _without_the_vendor_edits(text: str) -> str:
    """A released migration's text less what decision 212 changed in it: the base
    class and the imports (and the frozen copy's rewritten import paths)."""
    text = text.replace('import_module("tests.released_migrations.', 'import_module("later_')
    text = text.replace('import_module("later_django.migrations.', 'import_module("later_')
    text = re.sub(r"class Migration\((ReleasedMigration|migrations\.Migration)\):", "M", text)
    text = re.sub(
        r"^from (django\.db|later_django\.migration_operations|tests\.\S+) import .*\n",
        "",
        text,
        flags=re.MULTILINE,
    )
    return re.sub(r"\n{3,}", "\n\n", text)


def test_the_released_migrations_changed_only_their_base_class_and_imports() -> None:
    here = Path(import_module("later_django.migrations").__file__).parent
    frozen = Path(import_module(RELEASED).__file__).parent
    for name in RELEASED_NAMES:
        current = (here / f"{name}.py").read_text()
        released = (frozen / f"{name}.py").read_text()
        assert "class Migration(ReleasedMigration):" in current, name
        assert _without_the_vendor_edits(current) == _without_the_vendor_edits(released), name


def test_released_migrations_are_0001_to_0018_and_later_ones_name_every_vendor() -> None:
    """Decision 212: only the released migrations skip MySQL; every VendorSQL of a
    later migration names every vendor (a missing one would stop its migrate)."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    migrations = {
        name: migration
        for (app, name), migration in loader.disk_migrations.items()
        if app == "later_django"
    }
    released = sorted(n for n, m in migrations.items() if isinstance(m, ReleasedMigration))
    assert released == RELEASED_NAMES
    assert all(migrations[name].vendors == RELEASED_VENDORS for name in released)
    later = sorted(set(migrations) - set(released))
    assert later[0] == "0019_mysql_schema"
    for name in later:
        operations = list(migrations[name].operations)
        while operations:
            operation = operations.pop()
            operations.extend(getattr(operation, "database_operations", []))
            if isinstance(operation, VendorSQL):
                assert set(operation.vendors) == set(SUPPORTED_VENDORS), name


def test_vendor_sql_refuses_a_vendor_it_has_no_statements_for() -> None:
    with pytest.raises(ValueError, match="no statements for"):
        VendorSQL(forwards={"sqlite": []}, backwards={"sqlite": []})
    with pytest.raises(ValueError, match="unknown vendors"):
        VendorSQL(
            forwards={"sqlite": [], "postgresql": [], "oracle": []},
            backwards={"sqlite": [], "postgresql": [], "oracle": []},
        )
    with pytest.raises(ValueError, match="backwards"):
        VendorSQL(
            forwards={"sqlite": [], "postgresql": [], "mysql": []},
            backwards={"sqlite": [], "postgresql": []},
        )


# --- MariaDB ---------------------------------------------------------------------------

#: InnoDB's longest index key (DYNAMIC rows), in bytes of the declared column lengths.
INNODB_KEY_LIMIT = 3072


@pytest.fixture
def mariadb() -> str:
    if "mariadb" not in settings.DATABASES:
        pytest.skip(f"MariaDB unreachable: {settings.MARIADB_PROBLEM}")
    return "mariadb"


def rows(alias: str, query: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    with connections[alias].cursor() as cursor:
        cursor.execute(query, params)
        return list(cursor.fetchall())


def later_tables(alias: str) -> set[str]:
    return {
        name
        for (name,) in rows(
            alias,
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = DATABASE() AND table_name LIKE 'later\\_%%'",
        )
    }


def test_mariadb_has_every_table_index_and_trigger(mariadb: str) -> None:
    assert later_tables(mariadb) == EXPECTED_TABLES
    indexes = {
        name
        for (name,) in rows(
            mariadb,
            "SELECT DISTINCT index_name FROM information_schema.statistics"
            " WHERE table_schema = DATABASE()",
        )
    }
    assert indexes >= EXPECTED_INDEXES
    triggers = {
        (name, table, event)
        for name, table, event in rows(
            mariadb,
            "SELECT trigger_name, event_object_table, event_manipulation"
            " FROM information_schema.triggers WHERE trigger_schema = DATABASE()",
        )
    }
    assert triggers == {
        (f"{counter}_on_{event.lower()}", table, event)
        for counter, table in (
            ("later_queue_depth", "later_delivery_queue"),
            ("later_stage_counts", "later_jobs_index"),
        )
        for event in ("INSERT", "UPDATE", "DELETE")
    }
    engines = set(
        rows(
            mariadb,
            "SELECT engine, row_format, table_collation FROM information_schema.tables"
            " WHERE table_schema = DATABASE() AND table_name LIKE 'later\\_%%'",
        )
    )
    assert engines == {("InnoDB", "Dynamic", "utf8mb4_bin")}


def test_mariadb_text_columns_compare_bytes(mariadb: str) -> None:
    """Every text column is utf8mb4_bin, the key columns among them (byte order, as
    ``COLLATE "C"`` on PostgreSQL): a key range ``[prefix-, prefix.)`` holds exactly
    the keys that start with ``prefix-``, whatever their case or accents."""
    collations = rows(
        mariadb,
        "SELECT table_name, column_name, collation_name FROM information_schema.columns"
        " WHERE table_schema = DATABASE() AND table_name LIKE 'later\\_%%'"
        " AND collation_name IS NOT NULL",
    )
    assert {collation for _, _, collation in collations} == {"utf8mb4_bin"}, collations
    key_columns = {
        (table, column)
        for table, column, collation in rows(
            mariadb,
            "SELECT s.table_name, s.column_name, c.collation_name"
            " FROM information_schema.statistics s JOIN information_schema.columns c"
            " ON c.table_schema = s.table_schema AND c.table_name = s.table_name"
            " AND c.column_name = s.column_name"
            " WHERE s.table_schema = DATABASE() AND c.collation_name IS NOT NULL",
        )
    }
    assert ("later_storage", "key") in key_columns
    assert ("later_storage_range", "range_key") in key_columns
    assert ("later_delivery_queue", "queue_name") in key_columns
    with connections[mariadb].cursor() as cursor:
        cursor.executemany(
            "INSERT INTO later_storage (`key`, date_created) VALUES (%s, 0)",
            [("ns-stats-a",), ("ns-stats-B",), ("ns-Stats-c",), ("ns-stats.",), ("ns-statsé",)],
        )
        cursor.execute(
            "SELECT `key` FROM later_storage WHERE `key` >= %s AND `key` < %s ORDER BY `key`",
            ["ns-stats-", "ns-stats."],
        )
        assert [key for (key,) in cursor.fetchall()] == ["ns-stats-B", "ns-stats-a"]


def test_mariadb_keys_fit_innodb_without_prefixes_or_hash_indexes(mariadb: str) -> None:
    """As declared, every key is within 3,072 bytes (``varchar(n)`` counts 4n in
    utf8mb4), so MySQL 8 accepts it too; none is a prefix or a hash index, which
    MariaDB makes of an over-long unique key and MySQL rejects."""
    parts = rows(
        mariadb,
        "SELECT s.table_name, s.index_name, s.column_name, s.sub_part, s.index_type,"
        " c.data_type, c.character_octet_length"
        " FROM information_schema.statistics s JOIN information_schema.columns c"
        " ON c.table_schema = s.table_schema AND c.table_name = s.table_name"
        " AND c.column_name = s.column_name"
        " WHERE s.table_schema = DATABASE() AND s.table_name LIKE 'later\\_%%'",
    )
    lengths: dict[tuple[str, str], int] = {}
    for table, index, column, sub_part, index_type, data_type, octets in parts:
        assert sub_part is None, f"{table}.{index} indexes a prefix of {column}"
        assert index_type == "BTREE", f"{table}.{index} is a {index_type} index"
        size = {"bigint": 8, "int": 4, "smallint": 2}.get(data_type, octets)
        assert size is not None, f"{table}.{index}: {column} ({data_type}) has no length"
        lengths[(table, index)] = lengths.get((table, index), 0) + size
    too_long = {key: length for key, length in lengths.items() if length > INNODB_KEY_LIMIT}
    assert not too_long
    assert lengths[("later_log_consumer_member", "later_log_consumer_member_uniq")] <= 3072
    (_, create_range), *_ = rows(mariadb, "SHOW CREATE TABLE later_storage_range")
    assert "USING HASH" not in create_range.upper()
    assert re.search(
        r"UNIQUE KEY `later_storage_range_member_uniq` \(`range_key`,`value_hash`\)", create_range
    ), create_range


def test_mariadb_hashed_keys_stay_unique(mariadb: str) -> None:
    """The three keys held through a hash still refuse a second equal row, and take
    rows that differ only in the hashed part."""
    from django.db import IntegrityError

    member = (
        "INSERT INTO later_log_consumer_member (namespace, group_name, topic, member_id,"
        " joined_at, heartbeat_at) VALUES ('ns', 'g', 't', %s, 0, 0)"
    )
    range_item = "INSERT INTO later_storage_range (range_key, value) VALUES ('k', %s)"
    minute = (
        "INSERT INTO later_task_minute (namespace, minute_bucket, task_path, queue_name,"
        " outcome, error_class, duration_bucket, count, sum_ms, max_ms, sample_job_id)"
        " VALUES ('ns', 1, %s, %s, 'failed', '', 3, 1, 1, 1, '')"
    )
    # Length-prefixed parts: the task "a.b" in queue "c" is not "a.bc" in queue "".
    for statement, first, second in (
        (member, ["one"], ["One"]),
        (range_item, [b"one"], [b"one\x00"]),
        (minute, ["a.b", "c"], ["a.bc", ""]),
    ):
        with connections[mariadb].cursor() as cursor:
            cursor.execute(statement, first)
            cursor.execute(statement, second)
            with pytest.raises(IntegrityError):
                cursor.execute(statement, first)


def test_mariadb_counter_triggers_count_like_postgresql(mariadb: str) -> None:
    """A ready message counts in its queue's depth (claim takes it off, hand-back puts
    it back, deleting a claimed one changes nothing); every index row counts in its
    stage; an update that keeps the stage counts nothing; all into the session's
    shard, ``CONNECTION_ID() % 8``."""
    statements = [
        "INSERT INTO later_delivery_queue (namespace, queue_name, payload, priority,"
        " available_at) VALUES ('ns', 'a', 'x', 0, 1), ('ns', 'a', 'y', 0, 1),"
        " ('ns', 'b', 'z', 0, 1)",
        "UPDATE later_delivery_queue SET lease_owner = 'w', lease_until = 9"
        " WHERE payload IN ('x', 'z')",
        "UPDATE later_delivery_queue SET lease_until = 10 WHERE payload = 'x'",
        "DELETE FROM later_delivery_queue WHERE payload = 'z'",
        "UPDATE later_delivery_queue SET lease_owner = NULL, lease_until = NULL"
        " WHERE payload = 'x'",
        "DELETE FROM later_delivery_queue WHERE payload = 'y'",
        "INSERT INTO later_jobs_index (namespace, job_id, payload_type, stage,"
        " stage_date_ms, revision, created_at_ms) VALUES"
        " ('ns', '1', 't', 'enqueued', 1, 0, 1), ('ns', '2', 't', 'enqueued', 1, 0, 1),"
        " ('ns', '3', 't', 'delayed', 1, 0, 1)",
        "UPDATE later_jobs_index SET stage = 'running' WHERE job_id IN ('1', '3')",
        "UPDATE later_jobs_index SET revision = 5 WHERE job_id = '1'",
        "INSERT INTO later_jobs_index (namespace, job_id, payload_type, stage,"
        " stage_date_ms, revision, created_at_ms) VALUES ('ns', '2', 't', 'success', 1, 0, 1)"
        " ON DUPLICATE KEY UPDATE stage = IF(revision > 7, 'success', stage)",
        "DELETE FROM later_jobs_index WHERE job_id = '2'",
    ]
    with connections[mariadb].cursor() as cursor:
        # Django's flush empties tables by DELETE here, which the triggers count.
        cursor.execute("DELETE FROM later_queue_depth")
        cursor.execute("DELETE FROM later_stage_counts")
        for statement in statements:
            cursor.execute(statement)
        cursor.execute("SELECT CONNECTION_ID() % 8")
        (shard,) = cursor.fetchone()
    depths = rows(mariadb, "SELECT queue_name, shard, ready FROM later_queue_depth")
    assert sorted(depths) == [("a", shard, 1), ("b", shard, 0)]
    counts = rows(mariadb, "SELECT stage, shard, count FROM later_stage_counts WHERE count <> 0")
    assert sorted(counts) == [("running", shard, 2)]


def test_mariadb_migrates_to_zero_and_back(mariadb: str) -> None:
    migrate(mariadb, "zero")
    try:
        assert later_tables(mariadb) == set()
        assert (
            rows(
                mariadb,
                "SELECT trigger_name FROM information_schema.triggers"
                " WHERE trigger_schema = DATABASE()",
            )
            == []
        )
    finally:
        migrate(mariadb)
    assert later_tables(mariadb) == EXPECTED_TABLES


#: Columns of the MySQL tables that no model has (decisions 214, 215).
MYSQL_ONLY_COLUMNS = {
    "later_jobs_index": {"payload_type_hash", "error_class_hash"},
    "later_log_consumer_member": {"id", "member_hash"},
    "later_storage_range": {"value_hash"},
    "later_task_minute": {"id", "row_hash"},
}


def test_mariadb_tables_hold_the_models_columns(mariadb: str) -> None:
    """Each table has its model's columns, with the model's nullability, plus only the
    hash and surrogate columns; the ORM reads and writes each model there (the cold
    paths and Django's later operations see the tables they expect)."""
    from django.apps import apps

    connection = connections[mariadb]
    for model in apps.get_app_config("later_django").get_models():
        table = model._meta.db_table
        with connection.cursor() as cursor:
            described = connection.introspection.get_table_description(cursor, table)
        columns = {column.name: column.null_ok for column in described}
        fields = {
            field.column: bool(field.null) for field in model._meta.concrete_fields if field.column
        }
        assert set(columns) - set(fields) == MYSQL_ONLY_COLUMNS.get(table, set()), table
        assert {name: columns[name] for name in fields} == fields, table
        assert list(model.objects.using(mariadb).all()[:1]) == []
    from later_django.models import StorageRangeItem, TaskMinuteMetric

    StorageRangeItem.objects.using(mariadb).create(range_key="k", value=b"v")
    TaskMinuteMetric.objects.using(mariadb).create(
        namespace="ns",
        minute_bucket=1,
        task_path="a.b",
        queue_name="q",
        outcome="succeeded",
        error_class="",
        duration_bucket=3,
    )
    assert TaskMinuteMetric.objects.using(mariadb).get(namespace="ns").task_path == "a.b"
    assert TaskMinuteMetric.objects.using(mariadb).filter(namespace="ns").delete()[0] == 1
    (stored,) = StorageRangeItem.objects.using(mariadb).filter(range_key="k")
    assert bytes(stored.value) == b"v"
