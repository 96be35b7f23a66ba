"""The exception rules of a retry policy (``give_up_on``, ``retry_on``) as values:
matching on a class's MRO by path, their precedence, the worker's own errors, how a
policy with rules is stored in a record and how one stored before them reads back.
Pure: no database."""

from __future__ import annotations

import msgpack
import pytest
from django.core.exceptions import ObjectDoesNotExist

from later_django.conf import later_settings
from later_django.core import stages
from later_django.core.records import JobError, JobRecord, decode_record, encode_record
from later_django.core.retry import RetryPolicy, lineage, recorded_lineage
from later_django.engine import moves
from later_django.engine.writes import JobWrites
from later_django.exceptions import TaskTimeout, WorkerLost, class_path
from tests.engine.give_up_tasks import RAISED

MISSING = "django.core.exceptions.ObjectDoesNotExist"
FIVE_KEYS = {"max_retries", "backoff", "initial", "max", "jitter"}


def test_lineage_is_the_class_paths_of_the_mro_without_object() -> None:
    assert lineage(RAISED["model"]) == (
        "django.contrib.auth.models.User.DoesNotExist",
        MISSING,
        "builtins.Exception",
        "builtins.BaseException",
    )


def test_give_up_on_matches_the_class_and_its_subclasses_only() -> None:
    policy = RetryPolicy(give_up_on=(MISSING,))

    assert policy.give_up_rule(lineage(ObjectDoesNotExist)) == (
        f"{MISSING} is in the retry policy's give_up_on"
    )
    assert policy.give_up_rule(lineage(RAISED["model"])) == (
        f"django.contrib.auth.models.User.DoesNotExist is a {MISSING}, "
        "which is in the retry policy's give_up_on"
    )
    assert policy.give_up_rule(lineage(KeyError)) is None
    assert RetryPolicy().give_up_rule(lineage(ObjectDoesNotExist)) is None


def test_retry_on_retries_only_its_classes_and_give_up_on_wins() -> None:
    only = RetryPolicy(retry_on=("builtins.ConnectionError", "builtins.TimeoutError"))
    assert only.give_up_rule(lineage(ConnectionResetError)) is None
    assert only.give_up_rule(lineage(KeyError)) == (
        "builtins.KeyError is not in the retry policy's retry_on "
        "(builtins.ConnectionError, builtins.TimeoutError)"
    )
    both = RetryPolicy(retry_on=("builtins.LookupError",), give_up_on=("builtins.KeyError",))
    assert both.give_up_rule(lineage(IndexError)) is None
    assert (
        both.give_up_rule(lineage(KeyError))
        == "builtins.KeyError is in the retry policy's give_up_on"
    )


@pytest.mark.parametrize("kind", [WorkerLost, TaskTimeout])
def test_the_workers_own_errors_are_left_to_the_retry_count_by_retry_on(kind) -> None:
    """A worker stopped or an attempt past its timeout is not the task's exception:
    ``retry_on`` does not give up on it; ``give_up_on`` does when it names it."""
    recorded = recorded_lineage(class_path(kind))
    assert recorded == lineage(kind)
    assert RetryPolicy(retry_on=("builtins.ConnectionError",)).give_up_rule(recorded) is None
    base = "later_django.exceptions.LaterError"
    assert RetryPolicy(give_up_on=(base,)).give_up_rule(recorded) == (
        f"{class_path(kind)} is a {base}, which is in the retry policy's give_up_on"
    )
    assert recorded_lineage("app.errors.Gone") == ("app.errors.Gone",)


def running_record() -> JobRecord:
    return JobRecord(
        job_id="01JTESTGIVEUP0000000000000",
        namespace="default",
        task_path="app.tasks.sync",
        args=[],
        kwargs={},
        queue_name="default",
        priority=0,
        backend="default",
        stage=stages.RUNNING,
        stage_at_ms=1_000,
        created_at_ms=1_000,
        history=[(stages.ENQUEUED, 1_000)],
        worker_ids=["host:1:a"],
    )


@pytest.mark.parametrize(
    ("policy", "stage", "reason"),
    [
        (RetryPolicy(retry_on=("builtins.ConnectionError",)), stages.REQUEUED, None),
        (
            RetryPolicy(max_retries=1, give_up_on=("later_django.exceptions.LaterError",)),
            stages.FAILED,
            "Gave up at once on attempt 1 (1 retry left): later_django.exceptions.WorkerLost "
            "is a later_django.exceptions.LaterError, which is in the retry policy's give_up_on",
        ),
    ],
    ids=["retry_on-retries-it", "give_up_on-names-its-base"],
)
def test_a_lost_attempt_known_by_its_recorded_path_meets_the_rules(policy, stage, reason) -> None:
    """Lost attempts are failed without an exception in hand: the recorded path stands."""
    record = running_record()
    lost = JobError(class_path(WorkerLost), "lease lapsed", 2_000, 1)

    moves.fail_attempt(JobWrites("default"), record, 2_000, lost, later_settings(), policy)

    assert (record.stage, record.reason) == (stage, reason)


def test_a_policy_without_rules_stores_the_five_keys_every_release_reads() -> None:
    """A record written now stays readable by a worker of the previous release (whose
    policy refuses unknown keys) unless its policy uses the new rules."""
    assert set(RetryPolicy().to_dict()) == FIVE_KEYS
    ruled = RetryPolicy(give_up_on=(MISSING,), retry_on=("builtins.ConnectionError",))
    stored = ruled.to_dict()
    assert stored["give_up_on"] == [MISSING] and stored["retry_on"] == ["builtins.ConnectionError"]
    assert RetryPolicy.from_mapping(stored, "here") == ruled


def test_a_policy_with_rules_survives_the_record_codec() -> None:
    record = running_record()
    record.retry = RetryPolicy(give_up_on=(MISSING,)).to_dict()

    decoded = decode_record(encode_record(record))

    assert RetryPolicy.from_mapping(decoded.retry, "here").give_up_on == (MISSING,)


def test_a_record_stored_before_the_rules_decodes_with_none() -> None:
    """The bytes an earlier release wrote: a retry policy of five keys, no reason."""
    old = {
        "v": 1,
        **{"id": "01JOLDRECORD00000000000000", "ns": "default", "task": "app.tasks.sync"},
        **{"args": [], "kwargs": {}, "queue": "default", "prio": 0, "stage": "requeued"},
        **{"stage_at": 2_000, "created": 1_000, "hist": [["enqueued", 1_000]]},
        "retry": {
            "max_retries": 3,
            "backoff": "fixed",
            "initial": 1.0,
            "max": 600.0,
            "jitter": True,
        },
        "errors": [["app.errors.Gone", "Traceback ...", 1_500, 1]],
        "workers": ["host:1:a"],
    }

    record = decode_record(msgpack.packb(old, use_bin_type=True))

    assert record.reason is None
    policy = RetryPolicy.from_mapping(record.retry, "here")
    assert (policy.give_up_on, policy.retry_on, policy.backoff) == ((), None, "fixed")
