"""Promotion of due jobs costs what is due, however many jobs are scheduled for later."""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.test import override_settings
from django.utils import timezone

from later_django.api import enqueue_many
from later_django.compat.tasks import TaskResultStatus
from later_django.conf import setting_problems
from later_django.core.clock import now_ms
from later_django.core.keys import due_scan_bounds
from later_django.engine.promotion import PROMOTION_BATCH, promote_due
from later_django.storage.queries.kv import KvQueries
from later_django.storage.stores import Stores, driver_for, stores_for
from tests.copies import copy_job
from tests.engine import tasks
from tests.engine.support import NAMESPACE, result, row_counts

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

SCHEDULED_LATER = 100_000
DUE = 10


def schedule_far_ahead(alias: str, count: int) -> None:
    """``count`` delayed jobs due in a day: one enqueued, the rest its copies
    (``tests/copies.py``: the same rows, a second rather than ten)."""
    later = tasks.add.using(run_after=timezone.now() + timedelta(days=1))
    [first] = enqueue_many(later, [((0, 0), {})], ids_only=True)
    copy_job(alias, first, count - 1)


def wait_until_due(storage: Stores, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(storage.kv.key_scan(*due_scan_bounds(NAMESPACE, now_ms()), 100)) < count:
        assert time.monotonic() < deadline, "the due jobs did not become due"
        time.sleep(0.02)


def key_scan_plan(alias: str) -> str | list:
    """The plan of the promotion's key scan: SQLite ``EXPLAIN QUERY PLAN`` details,
    PostgreSQL ``EXPLAIN (ANALYZE, FORMAT JSON)``, MariaDB ``ANALYZE FORMAT=JSON`` (the
    statement run, with the rows each table access read: ``r_rows``)."""
    driver = driver_for(alias)
    key_scan = driver.queries(KvQueries).key_scan
    start, stop = due_scan_bounds(NAMESPACE, now_ms())
    params = {"start": start, "stop": stop, "now": now_ms(), "limit": PROMOTION_BATCH}
    with driver.cursor() as cursor:
        if driver.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + key_scan, params)
            return " | ".join(row[-1] for row in cursor.fetchall())
        if driver.vendor == "mysql":
            cursor.execute("ANALYZE FORMAT=JSON " + key_scan, params)
            return json.loads(cursor.fetchone()[0])
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + key_scan, params)
        plan = cursor.fetchone()[0]
        return json.loads(plan) if isinstance(plan, str) else plan


def plan_nodes(node: dict) -> list[dict]:
    return [node, *(found for child in node.get("Plans", []) for found in plan_nodes(child))]


def assert_reads_only_the_due_range(plan: list) -> None:
    """The PostgreSQL plan reads ``later_storage`` through its primary key within
    both bounds of the due range, never sequentially, and finds exactly the due rows."""
    nodes = plan_nodes(plan[0]["Plan"])
    assert not any(node["Node Type"] == "Seq Scan" for node in nodes), plan
    index_walks = [node for node in nodes if node.get("Index Name") == "later_storage_pkey"]
    assert len(index_walks) == 1, plan
    walk = index_walks[0]
    assert walk["Node Type"] in ("Index Scan", "Index Only Scan", "Bitmap Index Scan"), plan
    assert ">= 'default-due-'" in walk["Index Cond"], plan
    assert "< 'default-due-0" in walk["Index Cond"], plan
    assert walk["Actual Rows"] == DUE, plan
    assert all(node.get("Rows Removed by Filter", 0) == 0 for node in nodes), plan


def assert_mariadb_reads_only_the_due_range(plan: dict) -> None:
    """The MariaDB plan is one range walk of ``later_storage``'s primary key, bounded on
    both sides, in key order (no filesort: ``LIMIT`` bounds it too), that read exactly
    the due rows and kept them all."""
    block = plan["query_block"]
    assert "filesort" not in json.dumps(block), plan
    [step] = block["nested_loop"]
    table = step["table"]
    assert (table["table_name"], table["access_type"], table["key"]) == (
        "later_storage",
        "range",
        "PRIMARY",
    ), plan
    assert table["used_key_parts"] == ["key"], plan
    condition = table["attached_condition"]
    assert "later_storage.`key` >= 'default-due-'" in condition, plan
    assert "later_storage.`key` < 'default-due-0" in condition, plan
    assert (table["r_loops"], table["r_rows"], table["r_filtered"]) == (1, DUE, 100), plan


def test_promotion_reads_only_the_due_jobs_among_100_000_scheduled_later(
    engine_db: str,
) -> None:
    storage = stores_for(engine_db)
    schedule_far_ahead(engine_db, SCHEDULED_LATER)
    soon = tasks.add.using(run_after=timezone.now() + timedelta(milliseconds=300))
    due = enqueue_many(soon, [((n, 1), {}) for n in range(DUE)])
    assert storage.index.job_index_stage_counts(NAMESPACE) == {"delayed": SCHEDULED_LATER + DUE}
    wait_until_due(storage, DUE)

    vendor = connections[engine_db].vendor
    if vendor == "mysql":
        # Before and after the table's statistics are taken: the same range walk.
        assert_mariadb_reads_only_the_due_range(key_scan_plan(engine_db))
        with connections[engine_db].cursor() as cursor:
            cursor.execute("ANALYZE TABLE later_storage")
            cursor.fetchall()
        assert_mariadb_reads_only_the_due_range(key_scan_plan(engine_db))
    elif vendor == "sqlite":
        plan = key_scan_plan(engine_db)
        # A range search on the primary key's index, bounded on both sides and
        # walked in key order (no sort), so LIMIT bounds it too.
        assert plan.startswith("SEARCH later_storage USING "), plan
        assert "(key>? AND key<?)" in plan, plan
        assert "SCAN" not in plan, plan
        assert "TEMP B-TREE" not in plan, plan
    else:
        # Before statistics exist PostgreSQL may pick a bitmap walk of the same
        # index range: it too reads only the due entries.
        assert_reads_only_the_due_range(key_scan_plan(engine_db))
        with connections[engine_db].cursor() as cursor:
            cursor.execute("ANALYZE later_storage")
        plan = key_scan_plan(engine_db)
        assert_reads_only_the_due_range(plan)
        # With statistics: an ordered walk of the primary key right under the LIMIT.
        limit = plan[0]["Plan"]
        assert limit["Node Type"] == "Limit", plan
        assert [node["Node Type"] for node in limit["Plans"]] in (
            ["Index Scan"],
            ["Index Only Scan"],
        ), plan
        assert limit["Plans"][0]["Index Name"] == "later_storage_pkey", plan

    # Statements with their parameters: PostgreSQL binds them on the server, so
    # the SQL text alone does not show them.
    statements: list[tuple[str, Any]] = []

    def capture(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connections[engine_db].execute_wrapper(capture):
        promoted = promote_due(stores=stores_for(engine_db), namespace=NAMESPACE)

    assert promoted == DUE
    # ``key`` is quoted on MySQL/MariaDB (a reserved word there).
    scans = [
        (sql, params)
        for sql, params in statements
        if re.search(r"ORDER BY `?key`? LIMIT", sql) and "later_storage" in sql
    ]
    assert len(scans) == 1, [sql[:120] for sql, _ in statements]
    assert scans[0][1]["limit"] == PROMOTION_BATCH, scans[0]
    # The records read (and locked) are those of the due jobs alone.
    [(_, read_params)] = [
        (sql, params)
        for sql, params in statements
        if re.match(r"SELECT (s\.)?`?key`?, (s\.)?value FROM .*later_storage\b", sql)
    ]
    bound = read_params["keys"]
    keys = bound if isinstance(bound, list) else json.loads(bound)
    assert sorted(keys) == sorted(f"{NAMESPACE}-job-{job.id}" for job in due), keys
    assert all(result(job.id).status == TaskResultStatus.READY for job in due)
    assert storage.index.job_index_stage_counts(NAMESPACE) == {
        "delayed": SCHEDULED_LATER,
        "enqueued": DUE,
    }
    assert stores_for(engine_db).queue.depth(NAMESPACE) == DUE
    assert promote_due(stores=stores_for(engine_db), namespace=NAMESPACE) == 0


def test_a_namespace_that_could_overlap_another_namespaces_keys_is_refused(
    engine_db: str,
) -> None:
    # Keys are "<namespace>-..."; with "-" allowed, namespace "default-due-0" would
    # own keys inside namespace "default"'s schedule range and be promoted (deleted)
    # by its pass. Namespaces are therefore letters, digits, "_" and "." only.
    other = {"NAMESPACE": "default-due-0", "DATABASE": engine_db}
    assert [check_id for check_id, _ in setting_problems(other)] == ["later_django.E002"]
    with override_settings(LATER=other), pytest.raises(ImproperlyConfigured, match="NAMESPACE"):
        tasks.add.enqueue(1, 2)
    assert row_counts(engine_db)["later_storage"] == 0
