"""Paused queues in one process, on both databases: the stored pause (api and
``later_queue``), what a worker's claim asks for while queues are paused
(:class:`~later_django.worker.claim_queues.ClaimQueues`), the wake-up of a
resume, and how ``later_status`` shows a pause. The real workers obeying a
pause are in ``tests/worker/test_pause_workers.py``."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from django.test import override_settings

from later_django import api
from later_django.core.clock import now_ms
from later_django.management.commands.later_status import health_problems
from later_django.overview.snapshot import read_overview
from later_django.storage.stores import stores_for
from later_django.worker.claim_queues import NOTHING, ClaimQueues

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

NS = "pause_ns"


@pytest.fixture
def later(db_alias: str) -> Iterator[str]:
    with override_settings(LATER={"NAMESPACE": NS, "DATABASE": db_alias}):
        yield db_alias


def publish(
    alias: str, queue_name: str, count: int = 1, available_at_ms: int | None = None
) -> None:
    stores_for(alias).queue.publish(NS, queue_name, [b"m"] * count, available_at_ms=available_at_ms)


# --- the stored pause ---


def test_pause_is_stored_once_and_resume_removes_it(later: str) -> None:
    assert api.pause_queue("emails", by="ops") is True
    assert api.pause_queue("emails", by="someone else") is False
    (paused,) = api.paused_queues()
    assert (paused.name, paused.by) == ("emails", "ops")
    assert abs(paused.paused_at_ms - now_ms()) < 60_000

    assert api.resume_queue("emails") is True
    assert api.resume_queue("emails") is False
    assert api.paused_queues() == []


def test_pauses_belong_to_their_namespace(later: str) -> None:
    api.pause_queue("emails")
    with override_settings(LATER={"NAMESPACE": "other_ns", "DATABASE": later}):
        assert api.paused_queues() == []
        api.pause_queue("reports")
    assert [queue.name for queue in api.paused_queues()] == ["emails"]


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("", "non-empty string"),
        (None, "non-empty string"),
        ("x" * 201, "longer than 200"),
        ("__later_topic", "later_django's own"),
    ],
)
def test_a_name_that_cannot_be_a_queue_is_refused_by_name(
    later: str, name: object, rule: str
) -> None:
    with pytest.raises(ValueError, match=rule):
        api.pause_queue(name)  # type: ignore[arg-type]
    assert api.paused_queues() == []


def test_a_pause_inside_a_rolled_back_transaction_is_not_stored(later: str) -> None:
    with pytest.raises(RuntimeError), transaction.atomic(using=later):
        api.pause_queue("emails")
        raise RuntimeError("the caller's work failed")
    assert api.paused_queues() == []


def test_enqueues_into_a_paused_queue_still_succeed(later: str) -> None:
    api.pause_queue("default")
    publish(later, "default", 3)
    assert stores_for(later).queue.depth(NS, "default") == 3


# --- what the claim asks for ---


def test_a_worker_of_named_queues_leaves_the_paused_ones_out(later: str) -> None:
    stores = stores_for(later)
    queues = ClaimQueues(stores, NS, ["default", "emails"], refresh_seconds=0)
    assert queues.current() == ("default", "emails")

    api.pause_queue("emails")
    assert queues.current() == ("default",)
    api.pause_queue("default")
    assert queues.current() == NOTHING
    api.resume_queue("emails")
    assert queues.current() == ("emails",)


def test_a_worker_of_every_queue_claims_the_known_queues_less_the_paused(later: str) -> None:
    stores = stores_for(later)
    for name in ("default", "emails", "reports"):
        publish(later, name)
    queues = ClaimQueues(stores, NS, None, refresh_seconds=0)
    assert queues.current() is None

    api.pause_queue("emails")
    assert queues.current() == ("default", "reports")
    # A queue whose messages are all claimed still has its counter rows.
    claimed = stores.queue.claim(NS, ["reports"], "elsewhere", lease_ms=60_000)
    assert len(claimed) == 1
    assert queues.current() == ("default", "reports")

    api.resume_queue("emails")
    assert queues.current() is None


def test_the_paused_set_is_read_again_only_after_the_refresh_interval(later: str) -> None:
    queues = ClaimQueues(stores_for(later), NS, ["default"], refresh_seconds=3600)
    assert queues.current() == ("default",)
    api.pause_queue("default")
    assert queues.current() == ("default",)  # the set read a moment ago
    queues.refresh_seconds = 0
    assert queues.current() == NOTHING


def test_claiming_from_what_claim_queues_gives_takes_no_paused_message(later: str) -> None:
    stores = stores_for(later)
    publish(later, "default", 2)
    publish(later, "emails", 2)
    api.pause_queue("emails")
    queues = ClaimQueues(stores, NS, None, refresh_seconds=0)

    claimed = stores.queue.claim(NS, queues.current(), "worker", lease_ms=60_000, batch_size=2)

    assert sorted(message.queue_name for message in claimed) == ["default", "default"]
    assert not stores.queue.has_ready(NS, queues.current())
    assert stores.queue.has_ready(NS, ["emails"])


# --- the wake-up of a resume ---


def test_a_resume_notifies_the_listening_workers_at_commit(pg_alias: str) -> None:
    with override_settings(LATER={"NAMESPACE": NS, "DATABASE": pg_alias}):
        api.pause_queue("emails")
        channel = stores_for(pg_alias).driver.wake_channel()
        assert channel is not None
        with channel.subscribe() as subscription:
            with pytest.raises(RuntimeError), transaction.atomic(using=pg_alias):
                api.resume_queue("emails")
                raise RuntimeError("rolled back")
            assert list(subscription.payloads(0.3)) == []
            assert [queue.name for queue in api.paused_queues()] == ["emails"]

            assert api.resume_queue("emails") is True
            assert list(subscription.payloads(2.0))[:1] == [NS]


def test_wake_outside_a_notifying_driver_writes_nothing(db_alias: str) -> None:
    stores = stores_for(db_alias)
    with transaction.atomic(using=db_alias):
        stores.queue.wake(NS)
    assert stores.queue.depth(NS) == 0


# --- how the figures show it ---


def test_status_lists_paused_queues_and_their_jobs_do_not_fail_the_health_check(
    later: str, capsys: pytest.CaptureFixture[str]
) -> None:
    long_ago = now_ms() - 3_600_000
    publish(later, "emails", 2, available_at_ms=long_ago)
    api.pause_queue("emails")
    api.pause_queue("never-used")

    overview = read_overview()
    shown = {queue.queue_name: queue for queue in overview.queues}
    # The configured queues of tests.settings' TASKS, and the paused one never used.
    assert sorted(shown) == ["default", "emails", "never-used", "reports"]
    assert shown["emails"].ready == 2 and shown["emails"].paused_at_ms is not None
    assert shown["emails"].oldest_ready_age_ms >= 3_600_000
    assert overview.oldest_ready_age_ms is None
    assert not [m for _, m in health_problems(overview, 300) if "oldest ready" in m]

    api.resume_queue("emails")
    assert read_overview().oldest_ready_age_ms >= 3_600_000

    call_command("later_status", "--json")
    queues = {q["queue_name"]: q for q in json.loads(capsys.readouterr().out)["queues"]}
    assert queues["emails"]["paused_at_ms"] is None
    assert queues["never-used"]["paused_at_ms"] is not None


# --- later_queue ---


def test_later_queue_pauses_lists_and_resumes(
    later: str, capsys: pytest.CaptureFixture[str]
) -> None:
    publish(later, "emails", 3)
    call_command("later_queue", "pause", "emails", "reports", "--by", "alice")
    out = capsys.readouterr().out
    assert "paused 'emails'" in out and "paused 'reports'" in out
    call_command("later_queue", "pause", "emails")
    assert "'emails' was already paused" in capsys.readouterr().out

    call_command("later_queue", "list")
    lines = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()}
    assert lines["emails"][1] == "3" and "paused" in lines["emails"] and "alice" in lines["emails"]
    assert "paused" in lines["reports"]

    call_command("later_queue", "list", "--json")
    listed = {q["queue"]: q for q in json.loads(capsys.readouterr().out)["queues"]}
    assert listed["emails"]["ready"] == 3 and listed["emails"]["paused_by"] == "alice"
    assert listed["reports"]["paused_at_ms"] is not None

    call_command("later_queue", "resume", "emails", "default")
    out = capsys.readouterr().out
    assert "resumed 'emails'" in out and "'default' was not paused" in out
    assert [queue.name for queue in api.paused_queues()] == ["reports"]


def test_later_queue_by_defaults_to_user_at_host(later: str) -> None:
    call_command("later_queue", "pause", "emails")
    (paused,) = api.paused_queues()
    assert "@" in paused.by


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["pause"], "needs at least one queue name"),
        (["resume"], "needs at least one queue name"),
        (["list", "emails"], "list takes no queue names"),
        (["pause", "__later_x"], "later_django's own"),
    ],
)
def test_later_queue_refuses_bad_arguments(later: str, arguments: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("later_queue", *arguments)
    assert api.paused_queues() == []
