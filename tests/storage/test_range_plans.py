"""PostgreSQL: a finish's read of its jobs' children ranges, whatever the statistics.

Every finish reads (and empties) the children ranges of the jobs it finishes and
decrements their fan-in children's counters (``kv.read_ranges_decrementing``).
Beside a 10,000-job batch ``later_storage_range`` holds ~28,000 rows; with
``range_key = ANY(…)`` and a table never analysed (this machine's server runs no
autovacuum, and a fresh table has no statistics until autovacuum's first
``ANALYZE``) the planner scanned all of them at every finish: 3-7 ms a finish,
``bench.py --scenarios batch`` at 0.52 of a plain drain's rate.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connections, transaction

from later_django.core.keys import FAN_IN_MARK, children_key, pending_parents_key
from later_django.storage.driver import Replanned
from later_django.storage.postgres import WORKER_PREPARE_THRESHOLD
from later_django.storage.queries.kv import KvQueries
from later_django.storage.stores import stores_for
from tests.conftest import use_database

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

NAMESPACE = "plans"
#: A batch's jobs range, and one children range per member.
BATCH_JOBS, MEMBERS = 10_000, 10_000
#: Jobs a finish finishes (about a batch of a worker's claim).
FINISHING = 16


def _fill(alias: str) -> None:
    """The range rows beside a 10,000-job batch, inserted in one statement, and the
    table's statistics as on a table never analysed (rolled back with the test's
    transaction: a superuser's writes to the catalogue)."""
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "INSERT INTO later_storage_range (range_key, value) "
            "SELECT %s, convert_to(g::text, 'UTF8') FROM generate_series(1, %s) AS g "
            "UNION ALL SELECT %s || g::text || '-next', %s::bytea || 'child'::bytea "
            "FROM generate_series(1, %s) AS g",
            [f"{NAMESPACE}-flow-x-jobs", BATCH_JOBS, f"{NAMESPACE}-job-", FAN_IN_MARK, MEMBERS],
        )
        cursor.execute("DELETE FROM pg_statistic WHERE starelid = 'later_storage_range'::regclass")
        cursor.execute(
            "UPDATE pg_class SET reltuples = -1, relpages = 0 "
            "WHERE oid = 'later_storage_range'::regclass"
        )


RANGES = "later_storage_range"


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *[node for child in plan.get("Plans", []) for node in _nodes(child)]]


def _statements(alias: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """The two statements that empty a finish's children ranges, with the parameters
    of a finish of ``FINISHING`` jobs."""
    queries = stores_for(alias).driver.queries(KvQueries)
    keys = [children_key(NAMESPACE, str(n)) for n in range(1, FINISHING + 1)]
    prefix, suffix = pending_parents_key(NAMESPACE, "\x00").split("\x00")
    return {
        "read_ranges_decrementing": (
            queries.read_ranges_decrementing,
            {
                "keys": keys,
                "now": 1,
                "prefix": prefix,
                "suffix": suffix,
                "mark": FAN_IN_MARK,
                "mark_length": len(FAN_IN_MARK),
                "skip": len(FAN_IN_MARK) + 1,
            },
        ),
        "decrement_many": (
            queries.decrement_many,
            {"keys": [pending_parents_key(NAMESPACE, "child")], "by": 1, "now": 1, "ranges": keys},
        ),
    }


@pytest.mark.parametrize("name", ["read_ranges_decrementing", "decrement_many"])
def test_a_finish_empties_its_childrens_ranges_by_index_whatever_the_statistics(
    request: pytest.FixtureRequest, name: str
) -> None:
    """The ranges' rows are found by one probe of the range index per key and deleted
    by their ``ctid``: no node of the plan reads ``later_storage_range`` whole or
    throws rows away by the hundred, on a table of 20,000 rows never analysed (the plan the statement runs with: planned
    at each run, :class:`~later_django.storage.driver.Replanned`)."""
    alias = use_database(request, "postgres")
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        if not cursor.fetchone()[0]:
            pytest.skip("dropping a table's statistics takes a superuser")
    statement, params = _statements(alias)[name]
    driver = stores_for(alias).driver
    with transaction.atomic(using=alias):
        _fill(alias)
        # Run as well as planned: the 16 children ranges are read and emptied.
        rows = driver.fetch_all("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params)
        nodes = _nodes(rows[0][0][0]["Plan"])
        scans = [node["Node Type"] for node in nodes if node.get("Relation Name") == RANGES]
        assert scans and "Seq Scan" not in scans, scans
        thrown_away = sum(
            node.get("Rows Removed by Filter", 0) + node.get("Rows Removed by Index Recheck", 0)
            for node in nodes
        )
        assert thrown_away < 100, nodes
        with connections[alias].cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM later_storage_range WHERE range_key LIKE %s",
                [f"{NAMESPACE}-job-%-next"],
            )
            assert cursor.fetchone()[0] == MEMBERS - FINISHING
        transaction.set_rollback(True, using=alias)


def test_a_replanned_statement_is_never_prepared(request: pytest.FixtureRequest) -> None:
    """A worker's session prepares the statements it repeats (decision 106), but not
    a :class:`~later_django.storage.driver.Replanned` one: its plan is made at each
    run, so it cannot outlive the table size it was made for. The control, an
    ordinary statement run as often on the same kept cursor, is prepared."""
    alias = use_database(request, "postgres")
    connections[alias].close()  # a session with nothing prepared yet
    try:
        connections[alias].ensure_connection()
        driver = stores_for(alias).driver
        driver.keep_statements_prepared()
        statement, params = _statements(alias)["read_ranges_decrementing"]
        assert isinstance(statement, Replanned)
        control = "SELECT count(*) FROM later_storage WHERE key = ANY(%(keys)s)"
        with transaction.atomic(using=alias):
            for _ in range(WORKER_PREPARE_THRESHOLD + 3):
                driver.fetch_all(statement, params)
                driver.fetch_all(control, {"keys": ["a", "b"]})
            with connections[alias].cursor() as cursor:
                cursor.execute("SELECT statement FROM pg_prepared_statements")
                prepared = [row[0] for row in cursor.fetchall()]
        assert any(text.startswith("SELECT count(*) FROM later_storage") for text in prepared)
        assert not [text for text in prepared if text.startswith("WITH found")], prepared
    finally:
        connections[alias].close()  # the next test's session prepares nothing
