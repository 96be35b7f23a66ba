"""``LATER["TASK_POLICIES"]`` on both databases: tasks declared with a plain ``@task``
(``tests/engine/policy_tasks.py``, as in a package you did not write) get their queue,
priority and unique option at enqueue and their retry policy and timeout at
execution from the settings; a task's own options and ``.using()`` win."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from later_django import api
from later_django.compat.tasks import InvalidTask, TaskResultStatus, task
from later_django.conf import later_settings
from later_django.core.limits import QueueLimit
from later_django.engine.execution.values import task_timeout_ms
from later_django.engine.queue_limits import claim_limited
from later_django.storage.stores import stores_for
from tests.engine import policy_tasks
from tests.engine.support import NAMESPACE, result, row_counts, run_burst, run_until_finished

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

MODULE = "tests.engine.policy_tasks"
PLAIN = f"{MODULE}.plain"


def policies(alias: str, entries: dict[str, Any], **more: Any) -> override_settings:
    later = {"NAMESPACE": NAMESPACE, "DATABASE": alias, "TASK_POLICIES": entries, **more}
    return override_settings(LATER=later)


def routed(result_id: str) -> tuple[str, int]:
    stored = result(result_id).task
    return stored.queue_name, stored.priority


def test_a_task_declared_without_options_goes_where_its_policy_says(engine_db: str) -> None:
    with policies(engine_db, {PLAIN: {"queue": "reports", "priority": 7}}):
        enqueued = policy_tasks.plain.enqueue(1)
        assert (enqueued.task.queue_name, enqueued.task.priority) == ("reports", 7)
        assert routed(enqueued.id) == ("reports", 7)
        run_burst(queues=["default"])
        assert result(enqueued.id).status == TaskResultStatus.READY
        run_burst(queues=["reports"])
        assert result(enqueued.id).status == TaskResultStatus.SUCCESSFUL


def test_enqueue_many_applies_the_policy_too(engine_db: str) -> None:
    with policies(engine_db, {f"{MODULE}.*": {"queue": "reports", "priority": -3}}):
        results = api.enqueue_many(policy_tasks.plain, [((1,), {}), ((2,), {})])
        assert [routed(each.id) for each in results] == [("reports", -3)] * 2


def test_the_tasks_own_queue_and_using_win_over_the_policy(engine_db: str) -> None:
    with policies(engine_db, {f"{MODULE}.*": {"queue": "emails", "priority": -5}}):
        assert routed(policy_tasks.plain.enqueue(1).id) == ("emails", -5)
        own = policy_tasks.with_own_options.enqueue("x")
        assert routed(own.id) == ("reports", 5)
        using = policy_tasks.plain.using(queue_name="reports", priority=3).enqueue(1)
        assert routed(using.id) == ("reports", 3)
        # Django's defaults cannot be told from no choice: the policy applies to them.
        defaults = policy_tasks.plain.using(queue_name="default", priority=0).enqueue(1)
        assert routed(defaults.id) == ("emails", -5)


def test_a_policy_queue_the_backend_does_not_list_is_refused(engine_db: str) -> None:
    with policies(engine_db, {PLAIN: {"queue": "nowhere"}}), pytest.raises(InvalidTask) as raised:
        policy_tasks.plain.enqueue(1)
    assert str(raised.value) == (
        f"Queue 'nowhere' (LATER['TASK_POLICIES'][{PLAIN!r}] for task {PLAIN}) is not in "
        "TASKS['default']['QUEUES'] ['default', 'emails', 'reports']."
    )
    assert row_counts(engine_db)["later_storage"] == 0


def test_the_policys_retry_is_used_when_the_job_fails(engine_db: str) -> None:
    retry = {"max_retries": 2, "backoff": "immediate"}
    fails = f"{MODULE}.plain_fails"
    with policies(engine_db, {fails: {"retry": {"max_retries": 0}}}, RETRY=retry):
        [failed] = run_until_finished([policy_tasks.plain_fails.enqueue("gone").id])
        assert (failed.status, failed.attempts) == (TaskResultStatus.FAILED, 1)
    with policies(engine_db, {}, RETRY=retry):
        [failed] = run_until_finished([policy_tasks.plain_fails.enqueue("gone").id])
        assert failed.attempts == 3  # LATER["RETRY"] without a policy
    with policies(engine_db, {f"{MODULE}.*": {"retry": {"max_retries": 0}}}, RETRY=retry):
        own = policy_tasks.with_own_options.enqueue("x")
        [failed] = run_until_finished([own.id], queues=["reports"])
        assert failed.attempts == 2  # the task's own retry={"max_retries": 1}


def test_the_policys_timeout_is_between_the_tasks_own_and_the_setting(engine_db: str) -> None:
    entries = {PLAIN: {"timeout": 2.5}, f"{MODULE}.plain_*": {"timeout": None}}
    with policies(engine_db, entries, TIMEOUT=30):
        settings = later_settings()
        assert task_timeout_ms(policy_tasks.plain, settings) == 2_500
        own = task(timeout=1.5)(policy_tasks.plain.func)
        assert own.module_path == PLAIN
        assert task_timeout_ms(own, settings) == 1_500
        assert task_timeout_ms(policy_tasks.plain_fails, settings) is None  # None: no limit
        assert task_timeout_ms(policy_tasks.with_own_unique, settings) == 30_000


def test_a_policys_unique_folds_a_second_enqueue_with_the_same_arguments(engine_db: str) -> None:
    with policies(engine_db, {PLAIN: {"unique": {"key": "arguments"}}}):
        first, again = policy_tasks.plain.enqueue(1), policy_tasks.plain.enqueue(1)
        other = policy_tasks.plain.enqueue(2)
        by_keyword = policy_tasks.plain.enqueue(value=1)
    assert again.id == first.id
    assert len({first.id, other.id, by_keyword.id}) == 3
    assert stores_for(engine_db).queue.depth(NAMESPACE) == 3


def test_a_policys_unique_key_function_is_imported_from_its_path(engine_db: str) -> None:
    key = f"{MODULE}.first_argument_key"
    with policies(engine_db, {PLAIN: {"unique": {"key": key}}}):
        first = policy_tasks.plain.enqueue(1)
        assert policy_tasks.plain.enqueue(value=1).id == first.id
        assert policy_tasks.plain.enqueue(2).id != first.id


def test_the_tasks_own_unique_wins_over_the_policys(engine_db: str) -> None:
    with policies(engine_db, {f"{MODULE}.*": {"unique": {"key": "arguments"}}}):
        first = policy_tasks.with_own_unique.enqueue(1)
        # Its own key "one-at-a-time" holds whatever the arguments.
        assert policy_tasks.with_own_unique.enqueue(2).id == first.id


def test_a_policy_limits_its_queue_beside_queue_limits(engine_db: str) -> None:
    entries = {f"{MODULE}.*": {"queue": "reports", "concurrency": 1, "rate": "10/1m"}}
    with policies(engine_db, entries, QUEUE_LIMITS={"emails": {"concurrency": 4}}):
        assert later_settings().queue_limits == {
            "emails": QueueLimit(concurrency=4),
            "reports": QueueLimit(concurrency=1, rate_count=10, rate_window_ms=60_000),
        }


def test_the_queue_a_policy_limits_hands_out_no_more_than_its_limit(engine_db: str) -> None:
    entries = {f"{MODULE}.*": {"queue": "reports", "concurrency": 1}}
    with policies(engine_db, entries):
        for value in range(3):
            policy_tasks.plain.enqueue(value)
        limit = later_settings().queue_limits["reports"]
        stores = stores_for(engine_db)
        taken = claim_limited(stores, NAMESPACE, "w1", "reports", limit, 5, 30_000)
        assert len(taken.messages) == 1
        assert claim_limited(stores, NAMESPACE, "w2", "reports", limit, 5, 30_000).messages == []
