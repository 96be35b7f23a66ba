"""Errors that retrying cannot fix: a retry policy's ``give_up_on`` and ``retry_on``
fail a job at once, whatever retries remain, and its record says so (``reason``);
other errors are retried as before. On both databases, with a real burst worker."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import override_settings

from later_django.compat.tasks import TaskResultStatus
from later_django.core.keys import job_key
from later_django.core.records import JobRecord, decode_record
from later_django.storage.stores import stores_for
from tests.engine import give_up_tasks as tasks
from tests.engine.support import NAMESPACE, run_until_finished
from tests.engine.tasks import read_lines

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

MISSING = "django.core.exceptions.ObjectDoesNotExist"
USER_MISSING = "django.contrib.auth.models.User.DoesNotExist"


def run(alias: str, task, runs: Path, kind: str) -> tuple[JobRecord, list[str]]:
    """Enqueues ``task`` raising ``kind``, runs it to its end; its stored record and
    the attempts that called it."""
    enqueued = task.enqueue(str(runs), kind)
    [finished] = run_until_finished([enqueued.id])
    assert finished.status == TaskResultStatus.FAILED
    raw = stores_for(alias).kv.get(job_key(NAMESPACE, enqueued.id))
    assert raw is not None
    return decode_record(raw), read_lines(runs)


def test_a_class_in_give_up_on_fails_the_job_after_one_attempt_with_retries_left(
    engine_db: str, tmp_path: Path
) -> None:
    record, runs = run(engine_db, tasks.give_up_on_missing, tmp_path / "runs", "missing")

    assert runs == ["missing"]
    assert record.stage == "failed" and record.attempts == 1
    assert [error.exception_class_path for error in record.errors] == [MISSING]
    assert record.reason == (
        f"Gave up at once on attempt 1 (3 retries left): {MISSING} is in the retry "
        "policy's give_up_on"
    )


def test_a_subclass_of_a_class_in_give_up_on_gives_up_too(engine_db: str, tmp_path: Path) -> None:
    """A model's ``DoesNotExist`` is an ``ObjectDoesNotExist``: matched on its MRO."""
    record, runs = run(engine_db, tasks.give_up_on_missing, tmp_path / "runs", "model")

    assert runs == ["model"]
    assert [error.exception_class_path for error in record.errors] == [USER_MISSING]
    assert record.reason == (
        f"Gave up at once on attempt 1 (3 retries left): {USER_MISSING} is a {MISSING}, "
        "which is in the retry policy's give_up_on"
    )


def test_a_class_not_in_give_up_on_is_retried_until_its_retries_are_used_up(
    engine_db: str, tmp_path: Path
) -> None:
    record, runs = run(engine_db, tasks.give_up_on_missing, tmp_path / "runs", "boom")

    assert runs == ["boom"] * 4
    assert record.attempts == 4 and len(record.errors) == 4
    assert record.reason is None, "it ran out of retries: no rule gave up"
    assert record.retry is not None and record.retry["give_up_on"] == [MISSING]


def test_retry_on_retries_its_classes_and_their_subclasses_only(
    engine_db: str, tmp_path: Path
) -> None:
    reset, reset_runs = run(engine_db, tasks.retry_on_connection, tmp_path / "reset", "reset")
    key, key_runs = run(engine_db, tasks.retry_on_connection, tmp_path / "key", "key")

    assert reset_runs == ["reset"] * 4 and reset.reason is None
    assert key_runs == ["key"]
    assert key.reason == (
        "Gave up at once on attempt 1 (3 retries left): builtins.KeyError is not in the "
        "retry policy's retry_on (builtins.ConnectionError)"
    )


def test_give_up_on_wins_over_retry_on(engine_db: str, tmp_path: Path) -> None:
    key, key_runs = run(engine_db, tasks.retry_lookups_but_keys, tmp_path / "key", "key")
    index, index_runs = run(engine_db, tasks.retry_lookups_but_keys, tmp_path / "index", "index")

    assert key_runs == ["key"]
    assert key.reason is not None and "builtins.KeyError is in the retry policy's give_up_on" in (
        key.reason
    )
    assert index_runs == ["index"] * 4 and index.reason is None


def test_the_server_setting_gives_up_for_a_task_without_its_own_policy(
    engine_db: str, tmp_path: Path
) -> None:
    retry = {"max_retries": 2, "backoff": "immediate", "give_up_on": [MISSING]}
    with override_settings(LATER={"NAMESPACE": NAMESPACE, "DATABASE": engine_db, "RETRY": retry}):
        missing, missing_runs = run(
            engine_db, tasks.raise_with_server_policy, tmp_path / "missing", "model"
        )
        boom, boom_runs = run(engine_db, tasks.raise_with_server_policy, tmp_path / "boom", "boom")

    assert missing_runs == ["model"]
    assert missing.reason is not None
    assert missing.reason.startswith("Gave up at once on attempt 1 (2 retries left): ")
    assert boom_runs == ["boom"] * 3 and boom.reason is None
