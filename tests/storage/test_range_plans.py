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

import json
from typing import Any

import pytest
from django.db import connections, transaction

from later_django.core.keys import FAN_IN_MARK, children_key, pending_parents_key
from later_django.storage.driver import PLACEHOLDER, Replanned
from later_django.storage.postgres import WORKER_PREPARE_THRESHOLD
from later_django.storage.queries.kv import KvQueries
from later_django.storage.stores import stores_for
from later_django.storage.types import Increment
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
    """The statements that read and empty a finish's children ranges, with the
    parameters of a finish of ``FINISHING`` jobs (the rows' sequences: those of the
    first ``FINISHING`` children ranges)."""
    queries = stores_for(alias).driver.queries(KvQueries)
    keys = [children_key(NAMESPACE, str(n)) for n in range(1, FINISHING + 1)]
    prefix, suffix = pending_parents_key(NAMESPACE, "\x00").split("\x00")
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT sequence FROM later_storage_range WHERE range_key = ANY(%s)", [keys])
        sequences = [row[0] for row in cursor.fetchall()]
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
        "range_rows_delete": (queries.range_rows_delete, {"sequences": sequences}),
        "decrement_many": (
            queries.decrement_many,
            {"keys": [pending_parents_key(NAMESPACE, "child")], "by": 1, "now": 1, "ranges": keys},
        ),
    }


#: The server's types of the statements' parameters, to prepare them by name.
TYPES = {
    "keys": "varchar[]",
    "now": "bigint",
    "prefix": "text",
    "suffix": "text",
    "mark": "bytea",
    "mark_length": "integer",
    "skip": "integer",
}


def _plan(alias: str, statement: str, params: dict[str, Any], *, generic: bool) -> list[Any]:
    """The nodes of ``statement``'s plan, run (``EXPLAIN ANALYZE``): with ``generic``
    the plan a prepared statement caches (``PREPARE`` … ``EXECUTE`` under
    ``force_generic_plan``), else the one made for these values."""
    if not generic:
        rows = stores_for(alias).driver.fetch_all(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params
        )
        return _nodes(rows[0][0][0]["Plan"])
    names = list(dict.fromkeys(PLACEHOLDER.findall(statement)))
    numbered = PLACEHOLDER.sub(lambda match: f"${names.index(match.group(1)) + 1}", statement)
    with connections[alias].cursor() as cursor:
        cursor.execute(
            f"PREPARE later_plan_check ({', '.join(TYPES[n] for n in names)}) AS {numbered}"
        )
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE later_plan_check "
            f"({', '.join(['%s'] * len(names))})",
            [params[name] for name in names],
        )
        plan = cursor.fetchone()[0]
        cursor.execute("DEALLOCATE later_plan_check")
    return _nodes((plan if isinstance(plan, list) else json.loads(plan))[0]["Plan"])


@pytest.mark.parametrize(
    ("name", "generic"),
    [
        ("read_ranges_decrementing", True),
        ("read_ranges_decrementing", False),
        ("range_rows_delete", False),
        ("decrement_many", False),
    ],
)
def test_a_finish_reads_and_empties_its_childrens_ranges_by_index_whatever_the_statistics(
    request: pytest.FixtureRequest, name: str, generic: bool
) -> None:
    """The ranges' rows are found by one probe of the range index per key (and deleted
    by their sequences): no node of the plan reads ``later_storage_range`` whole or
    throws rows away by the hundred, on a table of 20,000 rows never analysed. The
    read is prepared by a worker's session, so its generic plan is checked too; the
    deletes are :class:`~later_django.storage.driver.Replanned` (planned at each run,
    for the values given)."""
    alias = use_database(request, "postgres")
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        if not cursor.fetchone()[0]:
            pytest.skip("dropping a table's statistics takes a superuser")
    with transaction.atomic(using=alias):
        _fill(alias)
        statement, params = _statements(alias)[name]
        assert isinstance(statement, Replanned) is (name != "read_ranges_decrementing")
        nodes = _plan(alias, statement, params, generic=generic)
        scans = [node["Node Type"] for node in nodes if node.get("Relation Name") == RANGES]
        assert scans and "Seq Scan" not in scans, scans
        thrown_away = sum(
            node.get("Rows Removed by Filter", 0) + node.get("Rows Removed by Index Recheck", 0)
            for node in nodes
        )
        assert thrown_away < 100, nodes
        found = sum(
            node.get("Actual Rows", 0) * node.get("Actual Loops", 1)
            for node in nodes
            if node.get("Relation Name") == RANGES
        )
        assert found >= FINISHING, nodes
        transaction.set_rollback(True, using=alias)


def test_a_finish_empties_the_ranges_it_read(request: pytest.FixtureRequest) -> None:
    """``read_ranges_decrementing`` on PostgreSQL: the children ranges that held a live
    member are empty afterwards (the second statement), the others untouched, and
    the counter their marked members name lowered by one per range."""
    alias = use_database(request, "postgres")
    kv = stores_for(alias).kv
    prefix, suffix = pending_parents_key(NAMESPACE, "\x00").split("\x00")
    with transaction.atomic(using=alias):
        _fill(alias)
        counter = pending_parents_key(NAMESPACE, "child")
        kv.apply([Increment(counter, MEMBERS)], savepoint=False)
        keys = [children_key(NAMESPACE, str(n)) for n in range(1, FINISHING + 1)]
        members, left = kv.read_ranges_decrementing(keys, FAN_IN_MARK, prefix, suffix)
        assert sorted(members) == sorted(keys)
        assert left == {counter: MEMBERS - FINISHING}
        assert kv.range_members_many(keys) == {}
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT count(*) FROM later_storage_range")
            assert cursor.fetchone()[0] == BATCH_JOBS + MEMBERS - FINISHING
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
        statement, params = _statements(alias)["range_rows_delete"]
        assert isinstance(statement, Replanned)
        control = "SELECT count(*) FROM later_storage WHERE key = ANY(%(keys)s)"
        with transaction.atomic(using=alias):
            for _ in range(WORKER_PREPARE_THRESHOLD + 3):
                driver.execute(statement, params)
                driver.fetch_all(control, {"keys": ["a", "b"]})
            with connections[alias].cursor() as cursor:
                cursor.execute("SELECT statement FROM pg_prepared_statements")
                prepared = [row[0] for row in cursor.fetchall()]
        assert any(text.startswith("SELECT count(*) FROM later_storage") for text in prepared)
        assert not [text for text in prepared if text.startswith("DELETE FROM later_storage_range")]
    finally:
        connections[alias].close()  # the next test's session prepares nothing
