"""The pass framework: registry, namespace-wide leases, intervals, failures."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

from later_django.core.clock import now_ms
from later_django.core.keys import pass_lease_key
from later_django.maintenance import (
    LEASE_MARGIN_SECONDS,
    MaintenancePass,
    PassContext,
    register_pass,
    run_due_passes,
)
from later_django.models import StorageValue
from later_django.storage.stores import stores_for
from tests.maintenance.conftest import NAMESPACE, make_runner

DB = pytest.mark.django_db(databases="__all__")


def count_calls(calls: list[str]):  # type: ignore[no-untyped-def]
    def run(context: PassContext) -> int:
        calls.append(context.owner)
        return 1

    return run


def wait_for(condition: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout} s")
        time.sleep(0.02)


# --- registry (no database) ---


def test_a_second_pass_under_a_taken_name_is_refused(temporary_passes) -> None:
    temporary_passes("probe_taken", 1.0, lambda context: 0)
    with pytest.raises(ValueError, match="'probe_taken' is already registered"):
        register_pass(MaintenancePass("probe_taken", 2.0, lambda context: 0))


def test_registering_the_same_pass_object_again_changes_nothing(temporary_passes) -> None:
    first = temporary_passes("probe_same", 1.0, lambda context: 0)
    assert register_pass(first) is first


def test_a_pass_name_that_cannot_be_part_of_a_key_is_refused() -> None:
    with pytest.raises(ValueError, match="'no-dash'"):
        MaintenancePass("no-dash", 1.0, lambda context: 0)
    with pytest.raises(ValueError, match="interval_seconds must be a positive number"):
        MaintenancePass("zero", 0, lambda context: 0)


def test_the_built_in_passes_are_registered_in_order(alias_free_settings) -> None:
    from later_django.maintenance import registered_passes

    names = [p.name for p in registered_passes(alias_free_settings)]
    builtin = [
        "promote",
        "recurring",
        "sweep",
        "wal_checkpoint",
        "vacuum",
        "reconcile",
        "queue_sample",
        "purge",
        "workflows",
    ]
    assert [name for name in names if name in builtin] == builtin


@pytest.fixture
def alias_free_settings():  # type: ignore[no-untyped-def]
    from later_django.conf import later_settings

    return later_settings()


# --- coordination (both databases) ---


@DB
def test_a_pass_runs_once_per_interval_namespace_wide(alias: str, temporary_passes) -> None:
    calls: list[str] = []
    temporary_passes("probe_once", 30.0, count_calls(calls))
    first, second = (
        make_runner(alias, "probe_once", owner="A"),
        make_runner(alias, "probe_once", owner="B"),
    )
    before = now_ms()
    assert [run.name for run in first.run_due()] == ["probe_once"]
    assert second.run_due(force=True) == []
    assert first.run_due(force=True) == []
    assert calls == ["A"]
    lease = StorageValue.objects.using(alias).get(key=pass_lease_key(NAMESPACE, "probe_once"))
    assert bytes(lease.value) == b"A"
    # Due again one interval after the run started, not a lease margin later.
    assert before + 30_000 <= lease.date_expire <= now_ms() + 30_000


@DB
def test_a_pass_is_due_again_one_interval_after_its_start(alias: str, temporary_passes) -> None:
    calls: list[tuple[str, float]] = []

    def run(context: PassContext) -> int:
        calls.append((context.owner, time.time()))
        return 1

    temporary_passes("probe_again", 0.3, run)
    first, second = (
        make_runner(alias, "probe_again", owner="A"),
        make_runner(alias, "probe_again", owner="B"),
    )
    # The pass's start is when A's runner took the lease (wall-clock ms, as the lease's
    # expiry), at or after this instant and before A's run was called: under load the
    # call comes tens of ms after the lease, so the gap between the two calls may be
    # less than the interval while B still waited a whole interval after A's start.
    before_first = time.time()
    first.run_due()
    wait_for(lambda: second.run_due(force=True), what="the second process's run")
    assert [owner for owner, _ in calls] == ["A", "B"]
    # 2 ms: the lease's times are whole milliseconds.
    assert calls[1][1] - before_first >= 0.3 - 0.002


@DB
def test_a_running_pass_holds_its_lease_for_its_budget_plus_the_margin(
    alias: str, temporary_passes
) -> None:
    seen: list[tuple[list, int]] = []
    other = make_runner(alias, "probe_long", owner="B")
    key = pass_lease_key(NAMESPACE, "probe_long")

    def run(context: PassContext) -> int:
        # Another process looks while this one runs: it must not start the pass,
        # although the pass's interval (0.1 s) is long over.
        time.sleep(0.2)
        expiry = StorageValue.objects.using(alias).get(key=key).date_expire
        seen.append((other.run_due(force=True), expiry - now_ms()))
        return 0

    temporary_passes("probe_long", 0.1, run, max_run_seconds=5.0)
    runs = make_runner(alias, "probe_long", owner="A").run_due()
    assert [run.name for run in runs] == ["probe_long"]
    refused, lease_left_ms = seen[0]
    assert refused == []
    assert lease_left_ms > (LEASE_MARGIN_SECONDS + 5.0 - 1.0) * 1000
    # The run took longer than the interval: the lease is gone and the pass due at once.
    assert stores_for(alias).kv.get(key) is None
    assert [run.name for run in other.run_due(force=True)] == ["probe_long"]


@DB
def test_a_lease_left_by_a_process_that_died_mid_pass_lapses(alias: str, temporary_passes) -> None:
    calls: list[str] = []
    temporary_passes("probe_dead", 0.1, count_calls(calls))
    # A process took the lease and died: its key stays until it expires.
    assert stores_for(alias).kv.set_if_absent(pass_lease_key(NAMESPACE, "probe_dead"), b"dead", 0.5)
    survivor = make_runner(alias, "probe_dead", owner="B")
    assert survivor.run_due(force=True) == []
    wait_for(lambda: survivor.run_due(force=True), what="the survivor's run after the lapse")
    assert calls == ["B"]


@DB
def test_a_process_that_lost_its_lease_leaves_the_new_holder_alone(
    alias: str, temporary_passes
) -> None:
    key = pass_lease_key(NAMESPACE, "probe_lost")
    storage = stores_for(alias).kv

    def run(context: PassContext) -> int:
        storage.delete(key)  # the lease lapsed meanwhile ...
        assert storage.set_if_absent(key, b"C", 60)  # ... and another process took it
        assert context.extend_lease(120) is False
        return 1

    temporary_passes("probe_lost", 0.1, run)
    make_runner(alias, "probe_lost", owner="A").run_due()
    lease = StorageValue.objects.using(alias).get(key=key)
    assert bytes(lease.value) == b"C"
    assert lease.date_expire > now_ms() + 50_000


@DB
def test_a_failing_pass_is_reported_and_the_others_still_run(alias: str, temporary_passes) -> None:
    calls: list[str] = []

    def broken(context: PassContext) -> int:
        raise RuntimeError("broken on purpose")

    temporary_passes("probe_broken", 30.0, broken)
    temporary_passes("probe_fine", 30.0, count_calls(calls))
    runs = make_runner(alias, "probe_broken", "probe_fine").run_due()
    assert [(run.name, run.error) for run in runs] == [
        ("probe_broken", "RuntimeError: broken on purpose"),
        ("probe_fine", None),
    ]
    assert calls == ["test-process"]


@DB
def test_defer_keeps_every_process_off_the_pass(alias: str, temporary_passes) -> None:
    def run(context: PassContext) -> int:
        context.defer(60)
        return 0

    temporary_passes("probe_defer", 0.1, run)
    make_runner(alias, "probe_defer", owner="A").run_due()
    time.sleep(0.2)
    assert make_runner(alias, "probe_defer", owner="B").run_due(force=True) == []
    lease = StorageValue.objects.using(alias).get(key=pass_lease_key(NAMESPACE, "probe_defer"))
    assert lease.date_expire > now_ms() + 55_000


@DB
def test_a_pass_with_nothing_wanted_takes_no_lease(alias: str, temporary_passes) -> None:
    calls: list[str] = []
    temporary_passes("probe_unwanted", 30.0, count_calls(calls), wanted=lambda context: False)
    assert make_runner(alias, "probe_unwanted").run_due() == []
    assert calls == []
    assert stores_for(alias).kv.get(pass_lease_key(NAMESPACE, "probe_unwanted")) is None


@DB
def test_a_process_does_not_look_again_before_its_next_try(alias: str, temporary_passes) -> None:
    looks: list[int] = []

    def wanted(context: PassContext) -> bool:
        looks.append(1)
        return False

    temporary_passes("probe_quiet", 30.0, lambda context: 0, wanted=wanted)
    runner = make_runner(alias, "probe_quiet")
    for _ in range(20):
        runner.run_due()
    assert len(looks) == 1
    assert runner.seconds_until_next() > 5


@DB
def test_run_due_passes_runs_only_the_named_passes(alias: str, temporary_passes) -> None:
    calls: list[str] = []
    temporary_passes("probe_named", 30.0, count_calls(calls))
    temporary_passes("probe_other", 30.0, count_calls(calls))
    from later_django.conf import later_settings

    runs = run_due_passes(
        using=alias,
        namespace=NAMESPACE,
        settings=later_settings(),
        owner="solo",
        names=["probe_named"],
    )
    assert [run.name for run in runs] == ["probe_named"]
    assert calls == ["solo"]
    with pytest.raises(ValueError, match="unknown maintenance pass"):
        run_due_passes(
            using=alias, namespace=NAMESPACE, settings=later_settings(), owner="x", names=["nope"]
        )


@DB
def test_a_broken_wanted_check_fails_its_pass_alone(alias: str, temporary_passes) -> None:
    calls: list[str] = []

    def broken(context: PassContext) -> bool:
        raise KeyError("no such thing")

    temporary_passes("probe_bad_check", 30.0, count_calls(calls), wanted=broken)
    temporary_passes("probe_after", 30.0, count_calls(calls))
    runs = make_runner(alias, "probe_bad_check", "probe_after").run_due()
    assert [(run.name, run.error) for run in runs] == [
        ("probe_bad_check", "KeyError: 'no such thing'"),
        ("probe_after", None),
    ]
    assert calls == ["test-process"]


@DB
def test_a_pass_that_did_something_is_logged_at_info_with_its_figures(
    alias: str, temporary_passes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="later_django")
    temporary_passes("probe_busy", 30.0, lambda context: 3)
    temporary_passes("probe_idle", 30.0, lambda context: 0)

    make_runner(alias, "probe_busy", "probe_idle").run_due()

    lines = {r.maintenance_pass: r for r in caplog.records if hasattr(r, "maintenance_pass")}
    assert (lines["probe_busy"].levelno, lines["probe_busy"].done) == (logging.INFO, 3)
    assert (lines["probe_idle"].levelno, lines["probe_idle"].done) == (logging.DEBUG, 0)
    assert lines["probe_busy"].getMessage().startswith("maintenance pass 'probe_busy': 3 ")
    assert lines["probe_busy"].seconds >= 0
