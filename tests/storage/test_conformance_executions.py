"""Conformance of ``ExecutionPort`` (``stores_for(alias).executions``) on SQLite,
PostgreSQL and MariaDB: execution leases (renew, release, read, purge) and worker heartbeat rows
(live set, graceful removal, bounded purge), as the port's docstrings state."""

from __future__ import annotations

import pytest
from django.db import connections, transaction

from later_django.storage.execution import RunningExecution
from later_django.storage.stores import stores_for
from later_django.storage.types import ExecutionLease, JobIndexRow, WorkerRow
from tests.storage import three_databases

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

NS = "ns"
OTHER_NS = "ns-other"
T = 1_000_000  # a fixed epoch-ms origin: these methods take every time as an argument


def lease_rows(db_alias: str, namespace: str = NS) -> dict[str, tuple[str, int, int]]:
    """job_id -> (owner, lease_until, attempt) of every execution lease, read with SQL."""
    with connections[db_alias].cursor() as cursor:
        cursor.execute(
            "SELECT job_id, owner, lease_until, attempt FROM later_job_execution "
            "WHERE namespace = %s",
            [namespace],
        )
        return {job_id: (owner, until, attempt) for job_id, owner, until, attempt in cursor}


def worker_ids(db_alias: str, namespace: str = NS) -> list[str]:
    with connections[db_alias].cursor() as cursor:
        cursor.execute(
            "SELECT worker_id FROM later_worker WHERE namespace = %s ORDER BY worker_id",
            [namespace],
        )
        return [worker_id for (worker_id,) in cursor]


def worker(worker_id: str, heartbeat_at_ms: int, **fields: object) -> WorkerRow:
    values: dict = {
        "worker_id": worker_id,
        "host": "host-1",
        "pid": 4242,
        "concurrency": 4,
        "queues": ["default", "mail"],
        "busy": 0,
        "started_at_ms": T,
        "heartbeat_at_ms": heartbeat_at_ms,
    }
    values.update(fields)
    return WorkerRow(**values)


def index_row(job_id: str, stage: str) -> JobIndexRow:
    return JobIndexRow(
        job_id=job_id,
        payload_type="t",
        stage=stage,
        stage_date_ms=T,
        revision=1,
        created_at_ms=T,
    )


# --- lease_renew ---


def test_lease_renew_extends_only_the_owners_leases_and_returns_them(db_alias: str) -> None:
    executions = stores_for(db_alias).executions
    executions.lease_acquire_many(NS, "a", T, [("j1", T + 100, 1), ("j2", T + 100, 2)])
    executions.lease_acquire_many(NS, "b", T, [("j3", T + 100, 1)])
    renewed = executions.lease_renew(NS, "a", ["j1", "j2", "j3", "absent"], T + 500)
    assert sorted(renewed) == ["j1", "j2"]
    assert lease_rows(db_alias) == {
        "j1": ("a", T + 500, 1),
        "j2": ("a", T + 500, 2),
        "j3": ("b", T + 100, 1),
    }


def test_lease_renew_by_a_non_owner_changes_nothing(db_alias: str) -> None:
    executions = stores_for(db_alias).executions
    executions.lease_acquire_many(NS, "a", T, [("j1", T + 100, 1)])
    before = lease_rows(db_alias)
    assert executions.lease_renew(NS, "intruder", ["j1"], T + 9_999) == []
    assert lease_rows(db_alias) == before
    # Another namespace's owner of the same name holds nothing here either.
    assert executions.lease_renew(OTHER_NS, "a", ["j1"], T + 9_999) == []
    assert lease_rows(db_alias) == before
    assert executions.lease_renew(NS, "a", [], T + 9_999) == []
    assert lease_rows(db_alias) == before


def test_lease_renew_after_a_takeover_leaves_the_new_holders_lease(db_alias: str) -> None:
    executions = stores_for(db_alias).executions
    executions.lease_acquire_many(NS, "a", T, [("j1", T + 100, 1)])
    # The lease lapsed and another worker started the job again.
    executions.lease_acquire_many(NS, "b", T + 200, [("j1", T + 300, 2)])
    assert executions.lease_renew(NS, "a", ["j1"], T + 9_999) == []
    assert lease_rows(db_alias) == {"j1": ("b", T + 300, 2)}


# --- lease_release_many ---


def test_lease_release_many_deletes_only_the_owners_leases_and_counts_them(
    db_alias: str,
) -> None:
    executions = stores_for(db_alias).executions
    executions.lease_acquire_many(NS, "a", T, [("j1", T + 100, 1), ("j2", T + 100, 1)])
    executions.lease_acquire_many(NS, "b", T, [("j3", T + 100, 1)])
    executions.lease_acquire_many(OTHER_NS, "a", T, [("j1", T + 100, 1)])
    assert executions.lease_release_many(NS, "a", ["j1", "j3", "absent"]) == 1
    assert lease_rows(db_alias) == {"j2": ("a", T + 100, 1), "j3": ("b", T + 100, 1)}
    assert lease_rows(db_alias, OTHER_NS) == {"j1": ("a", T + 100, 1)}
    # Releasing again: nothing held, nothing deleted.
    assert executions.lease_release_many(NS, "a", ["j1"]) == 0
    assert executions.lease_release_many(NS, "a", []) == 0
    assert executions.lease_release_many(NS, "b", ["j2"]) == 0
    assert lease_rows(db_alias) == {"j2": ("a", T + 100, 1), "j3": ("b", T + 100, 1)}


# --- lease_get_many ---


def test_lease_get_many_returns_current_rows_lapsed_ones_included(db_alias: str) -> None:
    executions = stores_for(db_alias).executions
    executions.lease_acquire_many(NS, "a", T, [("live", T + 10**12, 1), ("lapsed", T + 1, 1)])
    executions.lease_acquire_many(NS, "b", T, [("other-owner", T + 50, 3)])
    executions.lease_acquire_many(OTHER_NS, "a", T, [("elsewhere", T + 50, 1)])
    got = executions.lease_get_many(NS, ["live", "lapsed", "other-owner", "elsewhere", "absent"])
    assert got == {
        "live": ExecutionLease("live", "a", T + 10**12),
        "lapsed": ExecutionLease("lapsed", "a", T + 1),
        "other-owner": ExecutionLease("other-owner", "b", T + 50),
    }
    assert executions.lease_get_many(NS, []) == {}
    assert executions.lease_get_many(NS, ["absent"]) == {}


def test_lease_get_many_shows_a_renewal_and_forgets_a_release(db_alias: str) -> None:
    executions = stores_for(db_alias).executions
    executions.lease_acquire_many(NS, "a", T, [("j1", T + 100, 1), ("j2", T + 100, 1)])
    executions.lease_renew(NS, "a", ["j1"], T + 700)
    executions.lease_release_many(NS, "a", ["j2"])
    assert executions.lease_get_many(NS, ["j1", "j2"]) == {"j1": ExecutionLease("j1", "a", T + 700)}


# --- leases_of_owners ---


def test_leases_of_owners_lists_the_owners_leases_oldest_start_first(db_alias: str) -> None:
    executions = stores_for(db_alias).executions
    executions.lease_acquire_many(NS, "a", T + 300, [("j1", T + 900, 1), ("j0", T + 900, 2)])
    executions.lease_acquire_many(NS, "b", T + 100, [("j2", T + 50, 3)])  # lapsed at T + 50
    executions.lease_acquire_many(NS, "c", T, [("j3", T + 900, 1)])
    executions.lease_acquire_many(OTHER_NS, "a", T, [("j9", T + 900, 1)])
    found = executions.leases_of_owners(NS, ["a", "b", "absent"], 10)
    assert found == [
        RunningExecution("j2", "b", 3, T + 100, T + 50),
        RunningExecution("j0", "a", 2, T + 300, T + 900),
        RunningExecution("j1", "a", 1, T + 300, T + 900),
    ]
    assert executions.leases_of_owners(OTHER_NS, ["a"], 10) == [
        RunningExecution("j9", "a", 1, T, T + 900)
    ]
    # A repeated owner counts once.
    assert len(executions.leases_of_owners(NS, ["c", "c"], 10)) == 1


def test_leases_of_owners_is_bounded_by_its_limit(db_alias: str) -> None:
    executions = stores_for(db_alias).executions
    executions.lease_acquire_many(NS, "a", T, [(f"j{n:02}", T + 900, 1) for n in range(12)])
    executions.lease_acquire_many(NS, "b", T - 1, [("early", T + 900, 1)])
    assert [lease.job_id for lease in executions.leases_of_owners(NS, ["a", "b"], 3)] == [
        "early",
        "j00",
        "j01",
    ]
    assert executions.leases_of_owners(NS, ["a"], 0) == []
    assert executions.leases_of_owners(NS, [], 10) == []


def test_leases_of_owners_follows_a_takeover_and_a_release(db_alias: str) -> None:
    executions = stores_for(db_alias).executions
    executions.lease_acquire_many(NS, "a", T, [("j1", T + 100, 1), ("j2", T + 100, 1)])
    executions.lease_acquire_many(NS, "b", T + 200, [("j1", T + 300, 2)])
    executions.lease_release_many(NS, "a", ["j2"])
    assert executions.leases_of_owners(NS, ["a"], 10) == []
    assert executions.leases_of_owners(NS, ["a", "b"], 10) == [
        RunningExecution("j1", "b", 2, T + 200, T + 300)
    ]


# --- lease_purge_dead ---


def test_lease_purge_dead_removes_lapsed_leases_of_jobs_not_running(db_alias: str) -> None:
    stores = stores_for(db_alias)
    executions = stores.executions
    executions.lease_acquire_many(
        NS,
        "a",
        T,
        [
            ("finished", T + 10, 1),  # lapsed, index row success: dead
            ("deleted", T + 20, 1),  # lapsed, no index row: dead
            ("retried", T + 30, 1),  # lapsed, index row requeued: dead
            ("lost", T + 40, 1),  # lapsed, index row still running: kept
            ("fresh", T + 5_000, 1),  # not lapsed before the cut-off: kept
        ],
    )
    executions.lease_acquire_many(OTHER_NS, "a", T, [("finished", T + 10, 1)])
    stores.index.job_index_upsert(
        NS,
        [
            index_row("finished", "success"),
            index_row("retried", "requeued"),
            index_row("lost", "running"),
            index_row("fresh", "success"),
        ],
    )
    assert executions.lease_purge_dead(NS, T + 1_000, 2) == 2, "bounded by the limit"
    assert len(lease_rows(db_alias)) == 3
    assert executions.lease_purge_dead(NS, T + 1_000, 2) == 1
    assert executions.lease_purge_dead(NS, T + 1_000, 2) == 0
    assert set(lease_rows(db_alias)) == {"lost", "fresh"}
    assert lease_rows(db_alias, OTHER_NS) == {"finished": ("a", T + 10, 1)}


def test_lease_purge_dead_keeps_a_lease_lapsing_at_the_cut_off(db_alias: str) -> None:
    executions = stores_for(db_alias).executions
    executions.lease_acquire_many(NS, "a", T, [("edge", T + 1_000, 1), ("before", T + 999, 1)])
    assert executions.lease_purge_dead(NS, T + 1_000, 0) == 0
    assert set(lease_rows(db_alias)) == {"edge", "before"}
    assert executions.lease_purge_dead(NS, T + 1_000, 10) == 1
    assert set(lease_rows(db_alias)) == {"edge"}


# --- workers: heartbeat, live set, removal, purge ---


def test_workers_live_returns_workers_that_beat_after_the_cut_off(db_alias: str) -> None:
    executions = stores_for(db_alias).executions
    executions.worker_heartbeat(NS, worker("w-old", T + 100))
    executions.worker_heartbeat(NS, worker("w-edge", T + 200))
    executions.worker_heartbeat(NS, worker("w-new", T + 300, busy=2, queues=["q"]))
    executions.worker_heartbeat(OTHER_NS, worker("w-elsewhere", T + 900))
    live = executions.workers_live(NS, T + 200)
    assert live == [worker("w-new", T + 300, busy=2, queues=["q"])]
    assert sorted(w.worker_id for w in executions.workers_live(NS, T + 199)) == [
        "w-edge",
        "w-new",
    ]
    assert executions.workers_live(NS, T + 300) == []


def test_workers_live_shows_the_latest_heartbeat(db_alias: str) -> None:
    executions = stores_for(db_alias).executions
    executions.worker_heartbeat(NS, worker("w", T + 100, busy=0))
    executions.worker_heartbeat(NS, worker("w", T + 400, busy=3))
    assert executions.workers_live(NS, T + 300) == [worker("w", T + 400, busy=3)]


def test_worker_remove_deletes_only_that_workers_row(db_alias: str) -> None:
    executions = stores_for(db_alias).executions
    executions.worker_heartbeat(NS, worker("w1", T + 100))
    executions.worker_heartbeat(NS, worker("w2", T + 100))
    executions.worker_heartbeat(OTHER_NS, worker("w1", T + 100))
    executions.worker_remove(NS, "w1")
    assert worker_ids(db_alias) == ["w2"]
    assert worker_ids(db_alias, OTHER_NS) == ["w1"]
    assert [w.worker_id for w in executions.workers_live(NS, 0)] == ["w2"]
    executions.worker_remove(NS, "w1")  # already gone: fine
    executions.worker_remove(NS, "never-there")
    assert worker_ids(db_alias) == ["w2"]


def test_worker_purge_dead_is_bounded_by_its_limit_and_spares_live_workers(
    db_alias: str,
) -> None:
    executions = stores_for(db_alias).executions
    for n in range(3):
        executions.worker_heartbeat(NS, worker(f"dead-{n}", T + n))
    executions.worker_heartbeat(NS, worker("at-cut-off", T + 1_000))
    executions.worker_heartbeat(NS, worker("alive", T + 5_000))
    executions.worker_heartbeat(OTHER_NS, worker("dead-elsewhere", T))
    assert executions.worker_purge_dead(NS, T + 1_000, 0) == 0
    assert len(worker_ids(db_alias)) == 5
    assert executions.worker_purge_dead(NS, T + 1_000, 2) == 2
    assert len(worker_ids(db_alias)) == 3
    assert executions.worker_purge_dead(NS, T + 1_000, 2) == 1
    assert executions.worker_purge_dead(NS, T + 1_000, 2) == 0
    assert worker_ids(db_alias) == ["alive", "at-cut-off"]
    assert worker_ids(db_alias, OTHER_NS) == ["dead-elsewhere"]


def test_a_heartbeat_is_a_hot_update_on_postgres(postgres_alias: str) -> None:
    """No index holds ``heartbeat_at`` (migration 0015), so a beat leaves no dead row
    version for VACUUM. Counted inside one transaction, where PostgreSQL's
    per-transaction statistics are exact."""
    executions = stores_for(postgres_alias).executions
    with transaction.atomic(using=postgres_alias):
        executions.worker_heartbeat(NS, worker("w1", 1_000))
        for beat in range(3):
            executions.worker_heartbeat(NS, worker("w1", 2_000 + beat))
        with connections[postgres_alias].cursor() as cursor:
            cursor.execute(
                "SELECT pg_stat_get_xact_tuples_updated('later_worker'::regclass), "
                "pg_stat_get_xact_tuples_hot_updated('later_worker'::regclass)"
            )
            updated, hot = cursor.fetchone()
    assert (updated, hot) == (3, 3)
