"""``later_maintenance --once``: one line per pass with what it did in its unit (or why
it was skipped), promote and reconcile run when due, and ``LATER["RECURRING"]``
synced as a worker does at start (a definition removed from the settings goes)."""

from __future__ import annotations

import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from later_django.api import enqueue_many
from later_django.core.clock import now_ms
from later_django.core.keys import due_scan_bounds
from later_django.engine.recurring import SOURCE_SETTINGS, list_recurring
from later_django.engine.recurring_settings import sync_configured_recurring
from later_django.maintenance import registered_passes
from later_django.maintenance.reconcile import RECONCILE_MAX_ROWS
from later_django.storage.stores import stores_for
from later_django.storage.types import Set
from tests.engine import tasks
from tests.maintenance.conftest import NAMESPACE, execute

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

NIGHTLY = {"cron": "0 3 * * *", "task": "tests.recurring.tasks.plain", "args": [1]}


def once(*options: str) -> dict[str, str]:
    """Runs ``later_maintenance --once``; returns each printed line by its prefix."""
    out = StringIO()
    call_command("later_maintenance", "--once", *options, stdout=out)
    lines = out.getvalue().splitlines()
    return {line.split(": ", 1)[0]: line.split(": ", 1)[1] for line in lines}


def due_job(alias: str) -> str:
    """A delayed job whose run_after has just passed: promote's work."""
    run_after = timezone.now() + timedelta(milliseconds=300)
    result = tasks.add.using(run_after=run_after).enqueue(1, 2)
    start, stop = due_scan_bounds(NAMESPACE, now_ms() + 60_000)
    assert stores_for(alias).kv.key_scan(start, stop, 10), "the job was not delayed"
    time.sleep(max(0.0, (run_after - timezone.now()).total_seconds()) + 0.05)
    return result.id


def test_once_says_what_each_pass_did_with_units(alias: str) -> None:
    stores = stores_for(alias)
    stores.kv.apply([Set(f"once-dead-{n}", b"x", ttl_seconds=0) for n in range(2)])
    due_job(alias)
    lines = once()
    assert lines["sweep"].startswith("2 rows deleted (")
    assert lines["promote"].startswith("1 job promoted (")
    assert lines["reconcile"].startswith("2 counter tables recounted (")
    assert lines["queue_sample"].startswith("1 sample written (")
    assert lines["purge"].startswith("0 rows deleted (")
    assert lines["recurring"] == "skipped: nothing to do"
    assert lines["vacuum"] == "skipped: switched off by the settings"
    assert lines["recurring sync"] == "0 written, 0 unchanged, 0 deleted"
    # Every registered pass has its line, whether it ran or not.
    assert {p.name for p in registered_passes()} <= set(lines)
    assert stores.queue.depth(NAMESPACE) == 1


def test_recount_recounts_the_counters_from_every_row_whatever_their_number(
    alias: str,
) -> None:
    """``--recount``: the full recount the ``reconcile`` pass leaves to an operator
    once a table holds more than ``RECONCILE_MAX_ROWS`` rows (decision 115)."""
    stores = stores_for(alias)
    queued = RECONCILE_MAX_ROWS + 1
    enqueue_many(tasks.add, [((n, 0), {}) for n in range(queued)], ids_only=True)
    execute(alias, "UPDATE later_queue_depth SET ready = ready + 40")
    # The job index (no rows: queued jobs have none) is recounted, the queue is not.
    assert once("--pass", "reconcile")["reconcile"].startswith("1 counter table recounted (")
    assert stores.index.job_index_stage_counts(NAMESPACE)["enqueued"] == queued + 40
    out = StringIO()
    call_command("later_maintenance", "--recount", stdout=out)
    assert out.getvalue().startswith(
        f"recount: stage counters and queue depths of namespace {NAMESPACE!r} recounted ("
    )
    assert stores.index.job_index_stage_counts(NAMESPACE)["enqueued"] == queued


def test_a_second_once_says_why_the_passes_that_just_ran_were_skipped(alias: str) -> None:
    once()
    lines = once("--pass", "reconcile", "--pass", "promote")
    assert set(lines) == {"reconcile", "promote"}
    assert lines["reconcile"].startswith("skipped: not due (it ran less than its interval, 300 s")
    assert lines["promote"] == "skipped: nothing to do"


def test_a_recurring_job_removed_from_the_settings_is_removed_by_maintenance(alias: str) -> None:
    stores = stores_for(alias)
    sync_configured_recurring(
        stores=stores, namespace=NAMESPACE, configured={"nightly": NIGHTLY, "weekly": NIGHTLY}
    )
    later = {"NAMESPACE": NAMESPACE, "DATABASE": alias, "RECURRING": {"nightly": NIGHTLY}}
    with override_settings(LATER=later):
        lines = once()
    assert lines["recurring sync"] == "0 written, 1 unchanged, 1 deleted"
    stored = list_recurring(stores=stores, namespace=NAMESPACE)
    assert [(d.id, d.source) for d in stored] == [("nightly", SOURCE_SETTINGS)]


def test_only_a_run_of_the_recurring_pass_syncs_the_settings(alias: str) -> None:
    stores = stores_for(alias)
    sync_configured_recurring(stores=stores, namespace=NAMESPACE, configured={"weekly": NIGHTLY})
    lines = once("--pass", "sweep")
    assert "recurring sync" not in lines
    assert [d.id for d in list_recurring(stores=stores, namespace=NAMESPACE)] == ["weekly"]
