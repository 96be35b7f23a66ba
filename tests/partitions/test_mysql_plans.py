"""What MariaDB reads for the partition statements of a finish and the head repair: a
few rows per partition named, never the partition's rows nor the namespace's
(decisions 255 and 257), in a namespace of 2,000 rows and in one of 32 beside it.
Caught here (tried): the head repair's lowest row by ``ORDER BY ... LIMIT 1`` over
its join (249 rows in the large namespace), and the emptied heads' delete as
``NOT EXISTS`` (every job id of the small namespace). A namespace of one or two
rows, where the server read a finish's job rows by the namespace alone, is
``test_a_finish_racing_an_enqueue_leaves_no_head_naming_a_gone_row``'s."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connections, transaction

from later_django.core.keys import job_key_prefix
from later_django.storage.partitions import PartitionEntry
from later_django.storage.queries.partitions import PartitionQueries
from later_django.storage.stores import stores_for
from tests.conftest import use_database

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True

TOPIC = "plans"
#: A large namespace (PARTITIONS partitions of PER_PARTITION rows) and a small one.
LARGE, SMALL = "large", "small"
PARTITIONS, PER_PARTITION = 8, 250
#: The partitions a finish names.
NAMED = [0, 3, 5]


def _job_id(namespace: str, partition: int, sequence: int) -> str:
    return f"{namespace}-{partition}-{sequence:04d}"


def _rows_read(node: Any) -> float:
    """Rows the plan read from tables (``r_loops`` x ``r_rows`` of every table node but
    the ``JSON_TABLE``s, which hold the statement's own list), over the whole tree."""
    if isinstance(node, list):
        return sum(_rows_read(item) for item in node)
    if not isinstance(node, dict):
        return 0.0
    own = 0.0
    if "table_name" in node and "table_function" not in node:
        # A single-table UPDATE's node has no r_loops: it ran once.
        own = float(node.get("r_loops", 1) or 0) * float(node.get("r_rows") or 0)
    return own + sum(_rows_read(value) for value in node.values())


@pytest.fixture
def alias(request: pytest.FixtureRequest) -> str:
    alias = use_database(request, "mariadb")
    store = stores_for(alias).partitions
    for namespace, per_partition in ((LARGE, PER_PARTITION), (SMALL, 4)):
        store.enter(
            namespace,
            [
                PartitionEntry(TOPIC, p, s, _job_id(namespace, p, s), 1_000, "enqueued")
                for p in range(PARTITIONS)
                for s in range(1, per_partition + 1)
            ],
        )
    with connections[alias].cursor() as cursor:
        cursor.execute("ANALYZE TABLE later_partition_job, later_partition_head")
        cursor.fetchall()
    return alias


@pytest.mark.parametrize("namespace", [LARGE, SMALL])
def test_the_finish_statements_read_a_row_or_two_per_partition_named(
    alias: str, namespace: str
) -> None:
    queries = stores_for(alias).driver.queries(PartitionQueries)
    partitions = json.dumps([[TOPIC, p] for p in NAMED])
    # Each named partition's head leaves; its next row gets a new time.
    exits = json.dumps([_job_id(namespace, p, 1) for p in NAMED])
    params = {
        "namespace": namespace,
        "partitions": partitions,
        "exits": exits,
        "prefix": job_key_prefix(namespace),
        "now": 0,
        "at": 5_000,
        "job_id": _job_id(namespace, NAMED[0], 2),
        "topic": TOPIC,
        "partition_id": NAMED[0],
    }
    read: dict[str, float] = {}
    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        # In a finish's order: each statement sees the ones before.
        for name in (
            "next_rows",
            "jobs_delete",
            "job_run_at",
            "head_recompute",
            "head_delete_if_empty",
            "heads_materialize",
        ):
            if name == "heads_materialize":
                # The race's outcome it repairs: a partition with rows and no head.
                cursor.execute(
                    "DELETE FROM later_partition_head WHERE namespace = %s AND topic = %s "
                    "AND partition_id = %s",
                    [namespace, TOPIC, NAMED[0]],
                )
            cursor.execute("ANALYZE FORMAT=JSON " + getattr(queries, name), params)
            read[name] = _rows_read(json.loads(cursor.fetchone()[0]))
        transaction.set_rollback(True, using=alias)
    # A few probes per named partition (its lowest rows, one past each exit, then the
    # row itself, its index row and record); a whole partition is 250 rows.
    bound = 6 * len(NAMED)
    assert {name: rows for name, rows in read.items() if rows > bound} == {}, read
