"""Retry policies: the delay before each retry, and the validation of ``LATER["RETRY"]``.

Pure computations and settings checks: no database is involved, so these run once.
"""

from __future__ import annotations

import random

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from later_django.checks import check_later_settings
from later_django.compat.tasks import InvalidTask, task
from later_django.conf import later_settings
from later_django.core.retry import RetryPolicy
from tests.engine import tasks


@pytest.mark.parametrize("retry_number", [1, 2, 5, 50])
def test_immediate_backoff_retries_at_once(retry_number: int) -> None:
    assert RetryPolicy(backoff="immediate", initial=5.0).delay_seconds(retry_number) == 0.0


@pytest.mark.parametrize("retry_number", [1, 2, 5, 50])
def test_fixed_backoff_waits_initial_seconds_every_time(retry_number: int) -> None:
    assert RetryPolicy(backoff="fixed", initial=2.5).delay_seconds(retry_number) == 2.5


def test_fixed_backoff_never_exceeds_max() -> None:
    assert RetryPolicy(backoff="fixed", initial=30.0, max=10.0).delay_seconds(1) == 10.0


def test_exponential_backoff_doubles_per_retry_up_to_max() -> None:
    policy = RetryPolicy(backoff="exponential", initial=1.0, max=10.0, jitter=False)
    delays = [policy.delay_seconds(number) for number in range(1, 8)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]


def test_exponential_backoff_with_jitter_stays_in_the_upper_half_of_the_delay() -> None:
    policy = RetryPolicy(backoff="exponential", initial=1.0, max=10.0, jitter=True)
    rng = random.Random(1234)
    for number, full in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (30, 10.0)]:
        draws = [policy.delay_seconds(number, rng) for _ in range(500)]
        assert all(full / 2 <= delay <= full for delay in draws), (number, min(draws), max(draws))
        # The draws spread over the half, not one value.
        assert max(draws) - min(draws) > full / 4


def test_retry_policy_from_mapping_fills_in_defaults_and_converts_seconds_to_float() -> None:
    policy = RetryPolicy.from_mapping({"max_retries": 1, "initial": 2}, "here")
    assert policy == RetryPolicy(max_retries=1, backoff="exponential", initial=2.0, max=600.0)
    assert isinstance(policy.initial, float)


@pytest.mark.parametrize(
    ("retry", "named"),
    [
        ("three times", "LATER['RETRY'] must be a dict of retry options"),
        ({"max_retries": -1}, "LATER['RETRY']['max_retries'] must be a whole number >= 0"),
        ({"max_retries": 1.5}, "LATER['RETRY']['max_retries'] must be a whole number >= 0"),
        ({"max_retries": True}, "LATER['RETRY']['max_retries'] must be a whole number >= 0"),
        ({"backoff": "linear"}, "LATER['RETRY']['backoff'] must be one of immediate, fixed"),
        ({"initial": "1s"}, "LATER['RETRY']['initial'] must be a number of seconds >= 0"),
        ({"max": -5}, "LATER['RETRY']['max'] must be a number of seconds >= 0"),
        ({"jitter": "yes"}, "LATER['RETRY']['jitter'] must be True or False"),
        ({"tries": 3}, "LATER['RETRY'] has unknown keys ['tries']"),
        (
            {"give_up_on": "django.core.exceptions.ObjectDoesNotExist"},
            "LATER['RETRY']['give_up_on'] must be a list of exception class paths",
        ),
        (
            {"give_up_on": ["KeyError"]},
            "LATER['RETRY']['give_up_on'][0] must be an exception class path, dotted as "
            "module.QualName (such as 'builtins.KeyError'), got 'KeyError'",
        ),
        (
            {"give_up_on": ["builtins.KeyError", ""]},
            "LATER['RETRY']['give_up_on'][1] must be an exception class path",
        ),
        (
            {"give_up_on": [KeyError]},
            "LATER['RETRY']['give_up_on'][0] must be an exception class path",
        ),
        (
            {"retry_on": ["builtins.Connection Error"]},
            "LATER['RETRY']['retry_on'][0] must be an exception class path",
        ),
        (
            {"retry_on": []},
            "LATER['RETRY']['retry_on'] must name at least one exception class, got []",
        ),
    ],
)
def test_an_invalid_retry_setting_is_reported_as_e006_naming_the_key(retry, named) -> None:
    with override_settings(LATER={"RETRY": retry}):
        found = [(message.id, message.msg) for message in check_later_settings()]
        assert [check_id for check_id, _ in found] == ["later_django.E006"], found
        assert named in found[0][1]
        with pytest.raises(ImproperlyConfigured) as raised:
            later_settings()
        assert named in str(raised.value)


def test_a_valid_retry_setting_becomes_the_default_policy() -> None:
    with override_settings(LATER={"RETRY": {"max_retries": 7, "backoff": "fixed"}}):
        assert check_later_settings() == []
        assert later_settings().retry == RetryPolicy(max_retries=7, backoff="fixed")


def test_an_invalid_task_retry_option_is_refused_when_the_task_is_declared() -> None:
    with pytest.raises(InvalidTask, match=r"the retry option of task .*\['backoff'\]"):
        task(retry={"backoff": "linear"})(tasks.add.func)


def test_an_invalid_give_up_on_in_a_task_retry_option_is_refused_naming_the_task() -> None:
    with pytest.raises(
        InvalidTask, match=r"the retry option of task .*\['give_up_on'\]\[0\] must be an exception"
    ):
        task(retry={"give_up_on": ["ObjectDoesNotExist"]})(tasks.add.func)
