"""The parsers of ``later_django/inputs.py``: each refuses with the field, the value
(cut) and the rule, and accepts what its rule allows."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from later_django import inputs
from later_django.inputs import InputError


@pytest.mark.parametrize(
    "value",
    ["9223372036854775808", "²", "\u0661", "1_000", "1e3", " 1", "", "-1", "0x10", "\x001"],
)
def test_integer_refuses_what_no_bigint_column_holds_or_is_not_ascii(value: str) -> None:
    with pytest.raises(InputError) as refused:
        inputs.integer("?cursor", value, low=0)
    assert "?cursor" in str(refused.value)


def test_integer_accepts_the_bounds() -> None:
    assert inputs.integer("--n", "9223372036854775807") == inputs.BIGINT_MAX
    assert inputs.integer("--n", "+0") == 0
    with pytest.raises(InputError, match="between 1 and 10"):
        inputs.integer("--n", "11", low=1, high=10)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e309", "1e-9", "0", "-1", "", "1s"])
def test_seconds_refuses_non_finite_and_below_a_millisecond(value: str) -> None:
    with pytest.raises(InputError, match="--lease-seconds"):
        inputs.seconds("--lease-seconds", value)


def test_seconds_takes_a_lower_bound() -> None:
    assert inputs.seconds("--lease-seconds", "1.5", low=1) == 1.5
    with pytest.raises(InputError, match="between 1 and"):
        inputs.seconds("--lease-seconds", "0.5", low=1)


@pytest.mark.parametrize(
    "value", ["2026-13-01T00:00", "2026-01-01T25:00", "2026-01-01T00:00+99:00", "x"]
)
def test_moment_refuses_impossible_dates_without_a_traceback(value: str) -> None:
    with pytest.raises(InputError, match="ISO 8601"):
        inputs.moment("--since", value)


def test_moment_reads_no_offset_as_utc() -> None:
    assert inputs.moment("--since", "2026-12-01T08:00").utcoffset().total_seconds() == 0


def test_long_text_is_refused_without_being_echoed_whole() -> None:
    with pytest.raises(InputError) as refused:
        inputs.text("?q", "x" * 100_000)
    message = str(refused.value)
    assert "100,000 characters" in message
    assert len(message) < 300


@pytest.mark.parametrize("parse", [inputs.text, inputs.name, inputs.task_path, inputs.namespace])
def test_nul_is_refused_by_every_text_parser(parse) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match="NUL"):
        parse("field", "a\x00b")


@pytest.mark.parametrize("value", [" default ", "default\n", "x" * 201])
def test_name_refuses_padding_and_length(value: str) -> None:
    with pytest.raises(InputError):
        inputs.name("queue", value)


def test_job_id_and_task_path_and_namespace_rules() -> None:
    assert inputs.job_id("id", "01JE0000000000000000000000") == "01JE0000000000000000000000"
    for bad in ["01je0000000000000000000000", "01JE000000000000000000000U", "1"]:
        with pytest.raises(InputError, match="not a job id"):
            inputs.job_id("id", bad)
    assert inputs.task_path("--task", "app.tasks.send") == "app.tasks.send"
    with pytest.raises(InputError, match="dotted task path"):
        inputs.task_path("--task", "send")
    with pytest.raises(InputError, match="namespace"):
        inputs.namespace("--namespace", "a-b")


def test_a_repeated_parameter_is_refused_and_confirm_is_exactly_one_yes() -> None:
    assert inputs.one("queue", ["default"]) == "default"
    assert inputs.one("queue", []) is None
    with pytest.raises(InputError, match="given 2 times"):
        inputs.one("queue", ["default", "other"])
    assert inputs.confirmed(["yes"])
    assert not inputs.confirmed(["no", "yes"])
    assert not inputs.confirmed(["yes", "yes"])
    assert not inputs.confirmed([])


@given(st.text(max_size=60))
def test_integer_answers_a_number_in_range_or_an_input_error(value: str) -> None:
    try:
        number = inputs.integer("n", value, low=0, high=inputs.INT_MAX)
    except InputError as error:
        assert error.field == "n"
    else:
        assert 0 <= number <= inputs.INT_MAX


@given(st.text(max_size=60))
def test_seconds_answers_a_finite_duration_or_an_input_error(value: str) -> None:
    try:
        number = inputs.seconds("s", value)
    except InputError:
        return
    assert math.isfinite(number) and number >= 0.001


@given(st.text(max_size=60))
def test_moment_answers_an_aware_datetime_or_an_input_error(value: str) -> None:
    try:
        parsed = inputs.moment("m", value)
    except InputError:
        return
    assert parsed.tzinfo is not None
