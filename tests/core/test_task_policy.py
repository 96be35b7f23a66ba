"""``LATER["TASK_POLICIES"]`` as pure values: which entry a task's path takes each key
from (exact first, then patterns longest first), and the rules every value keeps."""

from __future__ import annotations

from typing import Any

import pytest

from later_django.core.limits import QueueLimit
from later_django.core.retry import RetryPolicy
from later_django.core.task_policy import NO_POLICY, task_policies, task_policy_problems

PATH = "wagtail.tasks.update_reference_index_task"


def test_an_exact_key_beats_every_pattern_and_the_longest_pattern_beats_shorter_ones() -> None:
    policies = task_policies(
        {
            "wagtail.*": {"queue": "short", "priority": 1},
            "wagtail.tasks.*": {"queue": "long"},
            PATH: {"priority": 9},
        },
        {},
    )
    found = policies.for_path(PATH)
    assert (found.queue, found.priority) == ("long", 9)
    assert found.origin == {"queue": "wagtail.tasks.*", "priority": PATH}
    other = policies.for_path("wagtail.tasks.other")
    assert (other.queue, other.priority) == ("long", 1)
    assert policies.for_path("wagtail.admin.x").queue == "short"
    assert policies.for_path("shop.tasks.x") is NO_POLICY


def test_patterns_of_equal_length_keep_the_settings_order() -> None:
    policies = task_policies({"a.*.c": {"queue": "first"}, "a.b.*": {"queue": "second"}}, {})
    assert policies.for_path("a.b.c").queue == "first"


def test_a_key_is_taken_whole_and_none_sets_it_to_nothing() -> None:
    policies = task_policies(
        {
            "shop.*": {"retry": {"max_retries": 0}, "timeout": 5, "unique": {}},
            "shop.tasks.sync": {"retry": {"backoff": "fixed"}, "timeout": None, "unique": None},
        },
        {},
    )
    found = policies.for_path("shop.tasks.sync")
    # The exact entry's retry mapping, whole: max_retries is RetryPolicy's default, not 0.
    assert found.retry == RetryPolicy(backoff="fixed")
    assert "timeout" in found.sets and found.timeout is None
    assert found.unique is None
    assert policies.for_path("shop.tasks.other").retry == RetryPolicy(max_retries=0)


def test_the_lookup_is_cached_per_path() -> None:
    policies = task_policies({"shop.*": {"queue": "shop"}}, {})
    assert policies.for_path("shop.a") is policies.for_path("shop.a")


def test_unique_keys_of_the_settings_form() -> None:
    policies = task_policies(
        {
            "a.arguments": {"unique": {"for_seconds": 60}},
            "a.task": {"unique": {"key": "task", "while": ["enqueued"]}},
            "a.function": {"unique": {"key": "shop.keys.page_key"}},
        },
        {},
    )
    by_arguments = policies.for_path("a.arguments")
    assert by_arguments.unique is not None and by_arguments.unique.key is None
    assert by_arguments.unique.for_seconds == 60.0
    whole = policies.for_path("a.task").unique
    assert whole is not None and whole.key == "task"
    assert whole.while_stages == frozenset({"enqueued"})
    function = policies.for_path("a.function")
    assert function.unique_key_function == "shop.keys.page_key"


def test_limits_belong_to_the_entrys_queue() -> None:
    policies = task_policies({"wagtail.*": {"queue": "wagtail", "concurrency": 2}}, {})
    assert policies.queue_limits() == {"wagtail": QueueLimit(concurrency=2)}


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ([], "LATER['TASK_POLICIES'] must be a dict of task paths or patterns, got []"),
        ({"a b": {"queue": "x"}}, "LATER['TASK_POLICIES'] key 'a b' must be a task's module path"),
        ({"a.b": {}}, "LATER['TASK_POLICIES']['a.b'] must be a dict of some of"),
        ({"a.b": {"queues": "x"}}, "['a.b'] has unknown key(s) ['queues']; allowed:"),
        ({"a.b": {"queue": ""}}, "['a.b']['queue'] must be a queue name"),
        ({"a.b": {"queue": "__later_x"}}, "starts with '__later', which is reserved"),
        ({"a.b": {"priority": 101}}, "['a.b']['priority'] must be from -100 to 100, got 101"),
        ({"a.b": {"priority": True}}, "['a.b']['priority'] must be a whole number, got True"),
        ({"a.b": {"retry": {"max_retries": -1}}}, "['a.b']['retry']['max_retries'] must be"),
        ({"a.b": {"retry": {"tries": 1}}}, "['a.b']['retry'] has unknown keys ['tries']"),
        ({"a.b": {"timeout": 0}}, "['a.b']['timeout'] must be None or a positive number"),
        ({"a.b": {"unique": {"key": "lambda"}}}, "['a.b']['unique']['key'] must be 'arguments'"),
        ({"a.b": {"unique": {"while": ["gone"]}}}, "['a.b']['unique']['while'] must name"),
        ({"a.b": {"concurrency": 2}}, "['a.b'] sets ['concurrency'] without 'queue'"),
        ({"a.b": {"queue": "q", "rate": "fast"}}, "['a.b']['rate'] must be '<count>/<window>'"),
        ({"a.b": {"queue": "q", "concurrency": 0}}, "['a.b']['concurrency'] must be an integer"),
    ],
)
def test_a_bad_entry_is_named_with_its_rule(raw: Any, named: str) -> None:
    problems = task_policy_problems(raw, {})
    assert len(problems) == 1 and named in problems[0], problems
    with pytest.raises(ValueError, match="TASK_POLICIES"):
        task_policies(raw, {})


def test_a_queues_limits_are_declared_once() -> None:
    twice = {"a.*": {"queue": "q", "concurrency": 1}, "b.*": {"queue": "q", "rate": "1/1s"}}
    assert task_policy_problems(twice, {}) == [
        "LATER['TASK_POLICIES']['b.*'] limits queue 'q', which "
        "LATER['TASK_POLICIES']['a.*'] limits too; declare a queue's limits in one place"
    ]
    also_in_settings = {"a.*": {"queue": "q", "concurrency": 1}}
    assert task_policy_problems(also_in_settings, {"q": QueueLimit(concurrency=3)}) == [
        "LATER['TASK_POLICIES']['a.*'] limits queue 'q', which LATER['QUEUE_LIMITS'] "
        "limits too; declare a queue's limits in one place"
    ]
    # Routing to a queue QUEUE_LIMITS limits, without limits of its own, is fine.
    assert task_policy_problems({"a.*": {"queue": "q"}}, {"q": QueueLimit(1)}) == []
