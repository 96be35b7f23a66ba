"""The hand-written migrations build exactly the models' schema, with triggers, both ways."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connections

from later_django.migration_operations import RELEASED_VENDORS

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

EXPECTED_TABLES = {
    "later_storage",
    "later_storage_range",
    "later_delivery_queue",
    "later_queue_depth",
    "later_job_execution",
    "later_topic",
    "later_partition_sequence",
    "later_partition_job",
    "later_partition_head",
    "later_partition_lease",
    "later_worker",
    "later_log_partition",
    "later_log_record",
    "later_log_consumer_offset",
    "later_log_consumer_member",
    "later_log_consumer_lease",
    "later_jobs_index",
    "later_stage_counts",
    "later_job_transition_metrics",
    "later_job_wait_metrics",
    "later_queue_samples",
    "later_task_minute",
}
EXPECTED_INDEXES = {
    "later_storage_expire_idx",
    "later_storage_range_expire_idx",
    "later_delivery_queue_claim_idx",
    "later_jobs_index_stage_idx",
    "later_jobs_index_partition_idx",
    "later_jobs_index_parent_idx",
    "later_jobs_index_expire_idx",
    "later_jobs_index_queued_idx",
    "later_jobs_index_task_idx",
    "later_jobs_index_queue_idx",
    "later_jobs_index_error_idx",
}


def later_tables(alias: str) -> set[str]:
    with connections[alias].cursor() as cursor:
        names = connections[alias].introspection.table_names(cursor)
    return {name for name in names if name.startswith("later_")}


CATALOG_QUERIES = {
    ("sqlite", "trigger"): "SELECT name FROM sqlite_master WHERE type = 'trigger'",
    ("sqlite", "index"): "SELECT name FROM sqlite_master WHERE type = 'index'",
    ("postgresql", "trigger"): "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal",
    ("postgresql", "index"): (
        "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
    ),
    ("mysql", "trigger"): (
        "SELECT trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE()"
    ),
    ("mysql", "index"): (
        "SELECT DISTINCT index_name FROM information_schema.statistics"
        " WHERE table_schema = DATABASE() AND index_name <> 'PRIMARY'"
    ),
}


def released_migrations_run_on(alias: str) -> None:
    """Skips a test of what a released migration (0001-0018) does on a vendor where
    those migrations run nothing: on MySQL they only move Django's migration state,
    and ``0019_mysql_schema`` builds the whole schema (decision 212), so migrating
    back to one of them leaves no later_* table there to look at."""
    vendor = connections[alias].vendor
    if vendor not in RELEASED_VENDORS:
        pytest.skip(
            f"the released migrations 0001-0018 run nothing on {vendor} (0019 builds its "
            "schema whole: decision 212), so what one of them changes does not exist there"
        )


def catalog_names(alias: str, kind: str) -> set[str]:
    """Names of the triggers or indexes of the database, read from its catalog."""
    connection = connections[alias]
    with connection.cursor() as cursor:
        cursor.execute(CATALOG_QUERIES[(connection.vendor, kind)])
        return {row[0] for row in cursor.fetchall()}


def trigger_names(alias: str) -> set[str]:
    return catalog_names(alias, "trigger")


def index_names(alias: str) -> set[str]:
    return catalog_names(alias, "index")


def test_makemigrations_finds_nothing_to_do() -> None:
    output = io.StringIO()
    call_command(
        "makemigrations", "later_django", check=True, dry_run=True, stdout=output, verbosity=1
    )
    assert "No changes detected" in output.getvalue()


def test_migrate_creates_all_22_tables_with_the_models_names(db_alias: str) -> None:
    model_tables = {
        model._meta.db_table for model in apps.get_app_config("later_django").get_models()
    }
    assert model_tables == EXPECTED_TABLES
    assert later_tables(db_alias) == EXPECTED_TABLES


def test_migrate_creates_the_counter_triggers_and_vendor_indexes(db_alias: str) -> None:
    triggers = trigger_names(db_alias)
    assert {t for t in triggers if t.startswith("later_queue_depth_on_")}, triggers
    assert {t for t in triggers if t.startswith("later_stage_counts_on_")}, triggers
    assert index_names(db_alias) >= EXPECTED_INDEXES


def test_the_postgresql_counter_functions_join_no_transition_tables(postgres_alias: str) -> None:
    """Migration 0009: PL/pgSQL keeps the plan of its first call, a nested loop over
    two unindexed transition tables, which made one UPDATE of 10,000 index rows take
    about 40 s; the functions sum the tables instead (their counts are pinned by
    tests/storage/test_job_index.py)."""
    with connections[postgres_alias].cursor() as cursor:
        cursor.execute(
            "SELECT proname, prosrc FROM pg_proc WHERE proname IN "
            "('later_stage_counts_follow', 'later_queue_depth_follow') ORDER BY proname"
        )
        sources = dict(cursor.fetchall())
    assert sorted(sources) == ["later_queue_depth_follow", "later_stage_counts_follow"]
    for name, source in sources.items():
        assert " JOIN " not in source.upper(), f"{name} joins old_rows to new_rows again"


def test_migrating_to_zero_and_back_removes_and_restores_everything(db_alias: str) -> None:
    call_command("migrate", "later_django", "zero", database=db_alias, verbosity=0)
    try:
        assert later_tables(db_alias) == set()
        assert not {t for t in trigger_names(db_alias) if t.startswith("later_")}
        if connections[db_alias].vendor == "postgresql":
            with connections[db_alias].cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_proc WHERE proname LIKE 'later\\_%%'")
                assert cursor.fetchone()[0] == 0
    finally:
        call_command("migrate", "later_django", database=db_alias, verbosity=0)
    assert later_tables(db_alias) == EXPECTED_TABLES
    assert index_names(db_alias) >= EXPECTED_INDEXES


def stage_counter_totals(alias: str) -> dict[tuple[str, str], int]:
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT namespace, stage, SUM(count) FROM later_stage_counts GROUP BY namespace, stage"
        )
        return {(ns, stage): int(total) for ns, stage, total in cursor.fetchall() if total}


class OldColumnsIndex:
    """Writes index rows with the columns of releases before migration 0018 (the
    store's upsert writes the filter columns too)."""

    def __init__(self, alias: str) -> None:
        self.alias = alias

    @staticmethod
    def columns(r: Any) -> tuple:
        names = ("job_id", "payload_type", "stage", "stage_date_ms", "revision")
        names += ("created_at_ms", "date_expire_ms")
        return tuple(getattr(r, name) for name in names)

    def job_index_upsert(self, namespace: str, rows: list) -> None:
        with connections[self.alias].cursor() as cursor:
            cursor.executemany(
                "INSERT INTO later_jobs_index (namespace, job_id, payload_type, stage,"
                " stage_date_ms, revision, created_at_ms, date_expire)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                [(namespace, *self.columns(r)) for r in rows],
            )


def test_migration_0005_counts_the_finished_rows_already_in_the_index(db_alias: str) -> None:
    released_migrations_run_on(db_alias)
    from later_django.core.clock import now_ms
    from later_django.storage.types import JobIndexRow

    def row(job_id: str, stage: str, date_expire_ms: int | None = None) -> JobIndexRow:
        return JobIndexRow(
            job_id=job_id,
            payload_type="t",
            stage=stage,
            stage_date_ms=now_ms(),
            revision=0,
            created_at_ms=now_ms(),
            date_expire_ms=date_expire_ms,
        )

    hour = 3_600_000
    call_command("migrate", "later_django", "0004", database=db_alias, verbosity=0)
    try:
        store = OldColumnsIndex(db_alias)
        store.job_index_upsert(
            "ns",
            [
                row("a", "success", now_ms() + hour),
                row("b", "success", now_ms() - 1_000),  # expired, not swept yet
                row("c", "failed", now_ms() + hour),
                row("d", "running"),
            ],
        )
        store.job_index_upsert("other", [row("z", "failed", now_ms() + hour)])
        before = {("ns", "running"): 1}
        assert stage_counter_totals(db_alias) == before, "0002's triggers count live stages"

        call_command("migrate", "later_django", "0005", database=db_alias, verbosity=0)
        backfilled = {
            ("ns", "running"): 1,
            ("ns", "success"): 2,
            ("ns", "failed"): 1,
            ("other", "failed"): 1,
        }
        assert stage_counter_totals(db_alias) == backfilled
        store.job_index_upsert("ns", [row("e", "failed", now_ms() + hour)])
        assert stage_counter_totals(db_alias)[("ns", "failed")] == 2, "the triggers count on"

        call_command("migrate", "later_django", "0004", database=db_alias, verbosity=0)
        assert stage_counter_totals(db_alias) == before, "reverse removes the finished counters"
        store.job_index_upsert("ns", [row("f", "success", now_ms() + hour)])
        assert stage_counter_totals(db_alias) == before, "and 0002's triggers are back"
    finally:
        call_command("migrate", "later_django", database=db_alias, verbosity=0)


def test_migration_0012_adds_the_attempts_table_and_takes_it_away(db_alias: str) -> None:
    released_migrations_run_on(db_alias)
    from later_django.core.clock import now_ms
    from later_django.storage.stores import stores_for
    from later_django.storage.types import JobIndexMetricsBatch, TaskMinuteSample

    attempt = TaskMinuteSample("t", "failed", "E", now_ms(), 3, 1, 2.0, 2.0, "01A")
    batch = JobIndexMetricsBatch(transitions=[("failed", now_ms(), 1)], task_minutes=[attempt])
    call_command("migrate", "later_django", "0011", database=db_alias, verbosity=0)
    try:
        assert "later_task_minute" not in later_tables(db_alias)
        call_command("migrate", "later_django", "0012", database=db_alias, verbosity=0)
        stores_for(db_alias).metrics.record_batch("ns", batch)
        stores_for(db_alias).metrics.record_batch("ns", batch)
        with connections[db_alias].cursor() as cursor:
            cursor.execute("SELECT count, sum_ms, sample_job_id FROM later_task_minute")
            assert cursor.fetchall() == [(2, 4, "01A")]
        call_command("migrate", "later_django", "0011", database=db_alias, verbosity=0)
        assert "later_task_minute" not in later_tables(db_alias)
        assert "later_job_transition_metrics" in later_tables(db_alias)
    finally:
        call_command("migrate", "later_django", database=db_alias, verbosity=0)


def test_record_keys_carry_no_like_index_beside_their_primary_key(db_alias: str) -> None:
    # Django's varchar_pattern_ops twin (PostgreSQL) would cost an index entry on
    # every record write for lookups later_django never makes; migration 0004 drops it.
    assert not {name for name in index_names(db_alias) if name.startswith("later_storage_key_")}


def test_migration_0018_fills_the_filter_columns_of_rows_already_in_the_index(
    db_alias: str,
) -> None:
    released_migrations_run_on(db_alias)
    from later_django.core.clock import now_ms
    from later_django.core.keys import job_key
    from later_django.core.records import JobError, JobRecord, encode_record
    from later_django.storage.stores import stores_for

    def record(job_id: str, queue: str, errors: list[str]) -> JobRecord:
        return JobRecord(
            job_id=job_id,
            namespace="ns",
            task_path="app.t",
            args=[],
            kwargs={},
            queue_name=queue,
            priority=0,
            backend="default",
            stage="failed",
            stage_at_ms=now_ms(),
            created_at_ms=now_ms(),
            errors=[JobError(path, "tb", now_ms(), n) for n, path in enumerate(errors, 1)],
        )

    filter_indexes = {
        "later_jobs_index_task_idx",
        "later_jobs_index_queue_idx",
        "later_jobs_index_error_idx",
    }
    call_command("migrate", "later_django", "0017", database=db_alias, verbosity=0)
    try:
        assert not index_names(db_alias) & filter_indexes
        kv = stores_for(db_alias).kv
        kv.set(job_key("ns", "a"), encode_record(record("a", "emails", ["E1", "app.E2"])))
        kv.set(job_key("ns", "b"), encode_record(record("b", "default", [])))
        kv.set(job_key("ns", "c"), b"not a record")
        with connections[db_alias].cursor() as cursor:
            for job_id in ("a", "b", "c", "d"):  # d: its record is gone
                cursor.execute(
                    "INSERT INTO later_jobs_index (namespace, job_id, payload_type, stage,"
                    " stage_date_ms, revision, created_at_ms) VALUES (%s, %s, %s, %s, %s, 1, %s)",
                    ["ns", job_id, "app.t", "failed", now_ms(), now_ms()],
                )
        call_command("migrate", "later_django", "0018", database=db_alias, verbosity=0)
        assert index_names(db_alias) >= filter_indexes
        with connections[db_alias].cursor() as cursor:
            cursor.execute(
                "SELECT job_id, queue_name, error_class FROM later_jobs_index ORDER BY job_id"
            )
            assert cursor.fetchall() == [
                ("a", "emails", "app.E2"),
                ("b", "default", None),
                ("c", None, None),
                ("d", None, None),
            ]
        call_command("migrate", "later_django", "0017", database=db_alias, verbosity=0)
        assert not index_names(db_alias) & filter_indexes
        with connections[db_alias].cursor() as cursor:
            cursor.execute("SELECT * FROM later_jobs_index WHERE job_id = 'a'")
            names = [column[0] for column in cursor.description]
        assert "queue_name" not in names and "error_class" not in names
        assert {t for t in trigger_names(db_alias) if "stage_counts" in t}, (
            "the stage-count triggers outlive the columns' drop"
        )
    finally:
        call_command("migrate", "later_django", database=db_alias, verbosity=0)
