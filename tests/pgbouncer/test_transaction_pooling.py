"""The web side through PgBouncer in transaction pooling (pgbouncer 1.18, no
prepared-statement support), in a process of its own (:mod:`tests.pgbouncer.web_side`).

Enqueue, rollback, ``enqueue_many``, ``get_result`` and the admin work with the
settings docs/operations.md gives: Django's default ``prepare_threshold`` (``None``:
psycopg never prepares, server-side binding then uses the unnamed statement), with
or without ``server_side_binding``. With a ``prepare_threshold`` set, later_django's
server-bound statements are prepared on one server connection and fail on the next.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from later_django.compat.tasks import TaskResultDoesNotExist, TaskResultStatus
from later_django.overview.figures import STAGES
from tests.pgbouncer.conftest import start_pooled_worker
from tests.worker import tasks
from tests.worker.test_worker_process import (
    START_SECONDS,
    all_successful,
    delivery_rows,
    finished,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

#: Single enqueues per server connection: more than psycopg's default
#: ``prepare_threshold`` (5), so each statement would be prepared in every round.
PER_ROUND = 8
ROUNDS = 3


@pytest.mark.parametrize(
    "options",
    [{}, {"server_side_binding": True}],
    ids=["django-defaults", "server_side_binding"],
)
def test_enqueue_and_rollback_through_transaction_pooling_across_server_connections(
    pg_alias: str, transaction_pool, web_side, lines: Path, options: dict
) -> None:
    outcome = web_side(
        transaction_pool.route(**options),
        "enqueue",
        path=str(lines),
        rounds=ROUNDS,
        per_round=PER_ROUND,
        many=20,
    )

    assert outcome["error"] is None
    # Every round ran on another PostgreSQL backend, each past the prepare threshold.
    assert len(set(outcome["backends"])) == ROUNDS, outcome["backends"]
    with pytest.raises(TaskResultDoesNotExist):
        tasks.record.get_result(outcome["rolled_back"])
    committed = [*outcome["jobs"], *outcome["many"]]
    assert len(committed) == ROUNDS * PER_ROUND + 20
    for job_id in committed:
        assert tasks.record.get_result(job_id).status == TaskResultStatus.READY
    assert tasks.record.get_result(outcome["delayed"]).status == TaskResultStatus.READY
    assert len(delivery_rows(pg_alias)) == len(committed)


def test_a_prepare_threshold_breaks_enqueue_on_the_next_server_connection(
    pg_alias: str, transaction_pool, web_side, lines: Path
) -> None:
    """What the documented settings avoid: psycopg prepares ``_pg3_0``… after 5
    executions on the server connection of round one; round two runs on another
    one, where that statement does not exist."""
    outcome = web_side(
        transaction_pool.route(prepare_threshold=5),
        "enqueue",
        path=str(lines),
        rounds=2,
        per_round=PER_ROUND,
        many=0,
    )

    assert outcome["error"] is not None, outcome
    assert 'prepared statement "_pg3_' in outcome["error"], outcome["error"]
    assert "does not exist" in outcome["error"]
    # Round one committed; the failed enqueue of round two left nothing.
    assert len(outcome["jobs"]) == PER_ROUND
    assert len(delivery_rows(pg_alias)) == PER_ROUND


def test_get_result_enqueue_many_and_the_admin_through_transaction_pooling(
    pg_alias: str, transaction_pool, session_pool, web_side, workers, lines: Path
) -> None:
    web = transaction_pool.route()
    outcome = web_side(web, "enqueue", path=str(lines), rounds=2, per_round=6, many=30)
    assert outcome["error"] is None
    committed = [*outcome["jobs"], *outcome["many"]]
    worker = start_pooled_worker(workers, pg_alias, session_pool)
    wait_for(
        lambda: all_successful([tasks.record.get_result(job) for job in committed]),
        START_SECONDS,
        "every job run by the session-pooled worker",
        workers,
    )

    seen = web_side(web, "results", ids=[*committed, outcome["delayed"]])
    labels = [f"single {n}.{i}" for n in range(2) for i in range(6)]
    labels += [f"many {n}" for n in range(30)]
    assert [seen[job]["status"] for job in committed] == ["SUCCESSFUL"] * len(committed)
    assert [seen[job]["return_value"] for job in committed] == labels
    assert seen[outcome["delayed"]]["status"] == "READY"

    pages = web_side(web, "admin", delayed=outcome["delayed"])
    assert list(pages["pages"].values()) == [200] * (3 + len(STAGES)), pages["pages"]
    assert 'id="later-panel-stages"' in pages["dashboard"]
    assert pages["without_token"] == 403
    assert pages["run_now"] == 302
    # Run now put the delayed job in the queue, and the worker ran it.
    done = wait_for(
        lambda: finished(tasks.record.get_result(outcome["delayed"])),
        10,
        "the delayed job run after Run now",
        workers,
    )
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert f":{worker.pid}:" in done.worker_ids[0]
