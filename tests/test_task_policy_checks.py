"""The system checks of ``LATER["TASK_POLICIES"]``: a bad value is an error naming
the key and the rule (E019); a key that names no task, or a pattern that matches
none, is a warning (W003)."""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO

import pytest
from django.core.checks import CheckMessage
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from later_django.checks import check_later_settings, check_task_policies
from tests.engine import policy_tasks

MODULE = "tests.engine.policy_tasks"


def found(check: Callable[[], list[CheckMessage]]) -> list[tuple[str, str]]:
    return [(message.id, message.msg) for message in check()]


def test_policies_naming_registered_tasks_pass() -> None:
    entries = {
        policy_tasks.plain.module_path: {"unique": {"key": f"{MODULE}.first_argument_key"}},
        f"{MODULE}.plain_*": {"queue": "reports", "concurrency": 2},
    }
    with override_settings(LATER={"TASK_POLICIES": entries}):
        assert found(check_later_settings) == []
        assert found(check_task_policies) == []


def test_a_bad_value_is_an_error_naming_the_key_and_the_rule() -> None:
    entries = {f"{MODULE}.plain": {"priority": 500}, "wagtail.*": {"rate": "5/1s"}}
    with override_settings(LATER={"TASK_POLICIES": entries}):
        assert found(check_later_settings) == [
            (
                "later_django.E019",
                f"LATER['TASK_POLICIES']['{MODULE}.plain']['priority'] must be from -100 to "
                "100, got 500.",
            ),
            (
                "later_django.E019",
                "LATER['TASK_POLICIES']['wagtail.*'] sets ['rate'] without 'queue': limits "
                "are a queue's, so the entry must name the queue its tasks go to.",
            ),
        ]
        assert found(check_task_policies) == []  # the settings' own check says why


def test_a_unique_key_function_that_is_no_function_is_an_error() -> None:
    entries = {
        f"{MODULE}.plain": {"unique": {"key": f"{MODULE}.NOT_A_FUNCTION"}},
        f"{MODULE}.plain_fails": {"unique": {"key": f"{MODULE}.missing_key"}},
    }
    with override_settings(LATER={"TASK_POLICIES": entries}):
        messages = found(check_task_policies)
    assert [check_id for check_id, _ in messages] == ["later_django.E019"] * 2
    assert messages[0][1] == (
        f"LATER['TASK_POLICIES']['{MODULE}.plain']['unique']['key'] "
        f"'{MODULE}.NOT_A_FUNCTION' is not callable (it is of type int)."
    )
    assert messages[1][1].startswith(
        f"LATER['TASK_POLICIES']['{MODULE}.plain_fails']['unique']['key'] "
        f"'{MODULE}.missing_key' cannot be imported:"
    )


def test_a_key_naming_no_task_and_a_pattern_matching_none_are_warnings() -> None:
    entries = {
        f"{MODULE}.missing": {"queue": "reports"},
        f"{MODULE}.first_argument_key": {"queue": "reports"},
        "nowhere.tasks.*": {"queue": "reports"},
    }
    with override_settings(LATER={"TASK_POLICIES": entries}):
        messages = found(check_task_policies)
    assert [check_id for check_id, _ in messages] == ["later_django.W003"] * 3
    assert messages[0][1].startswith(
        f"LATER['TASK_POLICIES']['{MODULE}.missing'] names no task: could not import task"
    )
    assert messages[1][1].startswith(
        f"LATER['TASK_POLICIES']['{MODULE}.first_argument_key'] names no task: task path "
        f"'{MODULE}.first_argument_key' names a function, not a registered"
    )
    assert messages[2][1].startswith(
        "LATER['TASK_POLICIES']['nowhere.tasks.*'] matches none of the "
    )
    assert "tasks imported after each installed app's 'tasks' module" in messages[2][1]


def test_manage_py_check_reports_them() -> None:
    entries = {"nowhere.tasks.*": {"queue": "reports"}}
    with override_settings(LATER={"TASK_POLICIES": entries}):
        out = StringIO()
        call_command("check", stdout=out, stderr=out)
        assert "later_django.W003" in out.getvalue()
    bad = override_settings(LATER={"TASK_POLICIES": {"a.b": {"timeout": -1}}})
    with bad, pytest.raises(SystemCheckError, match=r"later_django\.E019"):
        call_command("check", stdout=StringIO(), stderr=StringIO())
