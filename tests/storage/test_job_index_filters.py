"""The job index's filtered lists (migration 0018): task, queue and error filters as
keyset pages of the filter indexes, on SQLite, PostgreSQL and MariaDB.

A filtered page returns exactly the matching rows in the list's order over any
number of pages, and a filter that matches nothing reads no row: the plans are
asserted (PostgreSQL ``EXPLAIN (ANALYZE, FORMAT JSON)``, SQLite ``EXPLAIN QUERY
PLAN``, MariaDB ``ANALYZE``), not timed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connections

from later_django.core.clock import now_ms
from later_django.storage.job_filters import parse_stage_cursor
from later_django.storage.queries.index import UNINDEXED_FILTER_STAGES, IndexQueries
from later_django.storage.stores import driver_for, stores_for
from later_django.storage.types import IndexFilters, JobIndexRow
from tests.conftest import use_database
from tests.storage import three_databases

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

HOUR_MS = 3_600_000
FILTER_INDEXES = {
    "later_jobs_index_task_idx",
    "later_jobs_index_queue_idx",
    "later_jobs_index_error_idx",
}


def row(n: int, stage: str = "failed", **fields: Any) -> JobIndexRow:
    """Row ``n`` of a stage: 3 tasks, 2 queues, an error of 4 classes but none on
    every fifth row; two rows share each millisecond (the keyset's tie-break)."""
    base = 1_800_000_000_000
    values: dict[str, Any] = {
        "job_id": f"job-{n:05}",
        "payload_type": f"app.tasks.t{n % 3}",
        "stage": stage,
        "stage_date_ms": base - n // 2,
        "revision": 1,
        "created_at_ms": base - n // 2 - 5,
        "date_expire_ms": now_ms() + HOUR_MS if stage in ("success", "failed") else None,
        "queue_name": f"q{n % 2}",
        "error_class": None if n % 5 == 4 else f"app.errors.E{n % 4}",
    }
    values.update(fields)
    return JobIndexRow(**values)


def walk(db_alias: str, stage: str, filters: IndexFilters, limit: int, **kw: Any) -> list[str]:
    """Every job id of the filtered list, page after page."""
    store = stores_for(db_alias).index
    seen: list[str] = []
    cursor = None
    for _ in range(1000):
        page = store.job_index_list_filtered("ns", stage, filters, cursor, limit, **kw)
        assert len(page.items) <= limit
        seen += [item.job_id for item in page.items]
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor
    raise AssertionError("the walk did not end")


def expected(rows: list[JobIndexRow], stage: str, picks: Any) -> list[str]:
    now = now_ms()
    kept = [
        r
        for r in rows
        if r.stage == stage and (r.date_expire_ms is None or r.date_expire_ms > now) and picks(r)
    ]
    kept.sort(key=lambda r: (r.stage_date_ms, r.job_id), reverse=True)
    return [r.job_id for r in kept]


@pytest.mark.parametrize("stage", ["failed", "delayed", "running"])
def test_a_filter_returns_exactly_the_matching_jobs_in_order_over_pages(
    db_alias: str, stage: str
) -> None:
    rows = [row(n, stage) for n in range(150)]
    rows += [row(n, "success") for n in range(150, 200)]  # another stage
    rows.append(row(200, stage, date_expire_ms=now_ms() - 1, queue_name="q0"))  # expired
    store = stores_for(db_alias).index
    store.job_index_upsert("ns", rows)
    store.job_index_upsert("other", [row(n, stage) for n in range(20)])  # another namespace
    cases = [
        (IndexFilters(task_path="app.tasks.t1"), lambda r: r.payload_type == "app.tasks.t1"),
        (IndexFilters(queue_name="q0"), lambda r: r.queue_name == "q0"),
        (IndexFilters(error_class="app.errors.E2"), lambda r: r.error_class == "app.errors.E2"),
        (
            IndexFilters("app.tasks.t2", "q1", "app.errors.E1"),
            lambda r: (
                (r.payload_type, r.queue_name, r.error_class)
                == ("app.tasks.t2", "q1", "app.errors.E1")
            ),
        ),
        (IndexFilters(queue_name="nosuch"), lambda r: False),
    ]
    for filters, picks in cases:
        want = expected(rows, stage, picks)
        assert walk(db_alias, stage, filters, 7) == want, filters
        assert walk(db_alias, stage, filters, 1) == want, filters
    since = rows[60].stage_date_ms
    want = expected(rows, stage, lambda r: r.queue_name == "q1" and r.stage_date_ms >= since)
    assert 0 < len(want) < 75
    assert walk(db_alias, stage, IndexFilters(queue_name="q1"), 4, since_ms=since) == want


def test_the_columns_follow_the_row_and_old_rows_without_them_match_nothing(
    db_alias: str,
) -> None:
    store = stores_for(db_alias).index
    store.job_index_upsert("ns", [row(1, "requeued", error_class="app.E", queue_name="a")])
    store.job_index_upsert("ns", [row(1, "failed", revision=2, error_class="app.F")])
    got = store.job_index_get("ns", "job-00001")
    assert (got.stage, got.queue_name, got.error_class) == ("failed", "q1", "app.F")
    assert walk(db_alias, "failed", IndexFilters(error_class="app.E"), 5) == []
    assert walk(db_alias, "failed", IndexFilters(error_class="app.F"), 5) == ["job-00001"]
    store.job_index_upsert("ns", [row(2, queue_name=None, error_class=None)])
    assert walk(db_alias, "failed", IndexFilters(queue_name="q0"), 5) == []


def test_a_filtered_page_needs_a_filter(db_alias: str) -> None:
    store = stores_for(db_alias).index
    with pytest.raises(ValueError, match="needs a filter"):
        store.job_index_list_filtered("ns", "failed", IndexFilters(), None, 5)
    with pytest.raises(ValueError, match="not a job-list cursor"):
        store.job_index_list_filtered("ns", "failed", IndexFilters(queue_name="q"), "q:5", 5)


def _statement(
    db_alias: str, stage: str, filters: IndexFilters, cursor: str | None
) -> tuple[str, dict]:
    """The statement and parameters ``job_index_list_filtered`` runs for one page."""
    columns = filters.columns()
    after = None if cursor is None else parse_stage_cursor(cursor)
    params: dict[str, Any] = {"namespace": "ns", "stage": stage, "now": now_ms(), "limit": 51}
    params.update(columns)
    if after is not None:
        params["after_date_ms"], params["after_job_id"] = after
    text = (
        driver_for(db_alias)
        .queries(IndexQueries)
        .list_filtered(
            tuple(columns),
            after=after is not None,
            since=False,
            indexed=stage not in UNINDEXED_FILTER_STAGES,
        )
    )
    return text, params


def analyzed(cursor: Any, text: str, params: dict) -> list[dict[str, Any]]:
    """MariaDB's ``ANALYZE`` of a statement (it runs it): one dict per step of the plan,
    ``r_rows`` the rows the step read."""
    cursor.execute("ANALYZE " + text, params)
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]


def _nodes(plan: dict) -> list[dict]:
    found = [plan]
    for child in plan.get("Plans", []):
        found += _nodes(child)
    return found


#: Filters matching nothing, and one matching only the two oldest rows.
NOTHING = [
    IndexFilters(queue_name="nosuch"),
    IndexFilters(task_path="app.tasks.none"),
    IndexFilters(error_class="app.errors.None"),
    IndexFilters(task_path="app.tasks.t1", queue_name="nosuch"),
]
OLDEST_ONLY = IndexFilters(queue_name="rare")


def test_a_filter_matching_nothing_reads_no_rows(db_alias: str, vendor: str) -> None:
    n = 5_000
    rows = [row(i) for i in range(n - 2)]
    rows += [row(i, queue_name="rare") for i in range(n - 2, n)]
    store = stores_for(db_alias).index
    for start in range(0, n, 1000):
        store.job_index_upsert("ns", rows[start : start + 1000])
    connection = connections[db_alias]
    with connection.cursor() as cursor:
        cursor.execute(
            {"sqlite": "ANALYZE", "mysql": "ANALYZE TABLE later_jobs_index"}.get(
                vendor, "VACUUM ANALYZE later_jobs_index"
            )
        )
        if vendor == "mysql":
            cursor.fetchall()  # ANALYZE TABLE returns its report
        for filters in [*NOTHING, OLDEST_ONLY]:
            for cursor_text in (None, "i:1800000000000:job-00000"):
                text, params = _statement(db_alias, "failed", filters, cursor_text)
                if vendor == "sqlite":
                    cursor.execute("EXPLAIN QUERY PLAN " + text, params)
                    details = [detail for *_, detail in cursor.fetchall()]
                    used = [d for d in details if any(name in d for name in FILTER_INDEXES)]
                    assert used and all(d.startswith("SEARCH") for d in details), details
                    assert not any("TEMP B-TREE" in d for d in details), details
                    continue
                if vendor == "mysql":
                    (step,) = analyzed(cursor, text, params)
                    assert step["key"] in FILTER_INDEXES, step
                    assert "filesort" not in step["Extra"], step
                    read = float(step["r_rows"] or 0)
                    assert read <= (2 if filters is OLDEST_ONLY else 0), (filters, step)
                    continue
                cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + text, params)
                (value,) = cursor.fetchone()
                plan = (json.loads(value) if isinstance(value, str) else value)[0]["Plan"]
                nodes = _nodes(plan)
                scans = [node for node in nodes if "Relation Name" in node]
                assert [node["Node Type"] for node in scans] == ["Index Scan"], nodes
                assert scans[0]["Index Name"] in FILTER_INDEXES, scans
                assert not any(node["Node Type"] == "Sort" for node in nodes), nodes
                read = scans[0]["Actual Rows"] + scans[0].get("Rows Removed by Filter", 0)
                assert read <= (2 if filters is OLDEST_ONLY else 0), (filters, scans)
    assert walk(db_alias, "failed", OLDEST_ONLY, 50) == ["job-04999", "job-04998"]


def test_a_page_behind_a_cursor_reads_the_page_not_the_rows_before_it(
    request: pytest.FixtureRequest,
) -> None:
    """MariaDB (F8 of docs/design/mariadb-driver-survey.md): a keyset written as a row
    value, ``(stage_date_ms, job_id) < (...)``, is no index range there, so a page deep
    in a list read every row before its cursor; the spelled-out keyset reads the page.
    Stage lists and filtered lists, on 5,000 rows, with a cursor 4,000 rows in."""
    alias = use_database(request, "mariadb")
    n = 5_000
    store = stores_for(alias).index
    rows = [row(i) for i in range(n)]
    for start in range(0, n, 1000):
        store.job_index_upsert("ns", rows[start : start + 1000])
    deep = rows[4_000]
    after = {"after_date_ms": deep.stage_date_ms, "after_job_id": deep.job_id}
    queries = driver_for(alias).queries(IndexQueries)
    base = {"namespace": "ns", "stage": "failed", "now": now_ms(), "limit": 51, **after}
    pages = [(queries.list_by_stage_after, base, 51)]
    for filters, matching in [
        (IndexFilters(queue_name="q0"), 2),
        (IndexFilters(task_path="app.tasks.t1"), 3),
        (IndexFilters(queue_name="nosuch"), 0),
    ]:
        columns = filters.columns()
        text = queries.list_filtered(tuple(columns), after=True, since=False, indexed=True)
        # A filter matching one row in ``matching`` reads about that many per row kept.
        pages.append((text, {**base, **columns}, 51 * matching))
    with connections[alias].cursor() as cursor:
        cursor.execute("ANALYZE TABLE later_jobs_index")
        cursor.fetchall()
        for text, params, bound in pages:
            (step,) = analyzed(cursor, text, params)
            assert float(step["r_rows"] or 0) <= bound + 4, (text, step)
            assert "filesort" not in step["Extra"], step
