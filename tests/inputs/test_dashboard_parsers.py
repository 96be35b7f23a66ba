"""The dashboard's parsers of ``later_django/inputs.py`` (its "Dashboard parsers"
block): a job list's cursor, a partition list's cursor and a list filter."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from later_django import inputs
from later_django.inputs import InputError
from later_django.storage.job_filters import parse_stage_cursor

BIG = str(2**63)


@pytest.mark.parametrize(
    "cursor", ["i", "i:0:", "i:1733000000000:01JAAAAAAAAAAAAAAAAAAAAAAA", f"q:{2**63 - 1}", "q:0"]
)
def test_a_job_list_cursor_as_the_lists_write_it_is_taken(cursor: str) -> None:
    assert inputs.job_list_cursor("cursor", cursor) == cursor


@pytest.mark.parametrize(
    "cursor",
    [
        f"i:{BIG}:X",
        f"i:{10**30}:X",
        "i:²:X",
        "i:-1:X",
        "i:5",
        "i:",
        "q:",
        f"q:{BIG}",
        "q:²",
        "q:\u0661",
        "q:1 ",
        "Q:1",
        "x",
        "i:1:a\x00b",
        "i:1:" + "x" * 201,
    ],
)
def test_a_job_list_cursor_it_cannot_read_is_refused(cursor: str) -> None:
    with pytest.raises(InputError, match=r"^cursor "):
        inputs.job_list_cursor("cursor", cursor)


def test_an_empty_cursor_is_the_start() -> None:
    assert inputs.job_list_cursor("cursor", "") is None
    assert inputs.sequence_cursor("cursor", "") is None


@given(st.text(max_size=60))
def test_every_index_cursor_taken_is_one_the_storage_reads(cursor: str) -> None:
    """What the parser takes, the storage's own reader reads (no 500 behind a 200)."""
    try:
        taken = inputs.job_list_cursor("cursor", cursor)
    except InputError:
        return
    if taken is not None and taken.startswith("i"):
        parsed = parse_stage_cursor(taken)
        assert parsed is None or 0 <= parsed[0] <= inputs.BIGINT_MAX


@pytest.mark.parametrize("cursor", [BIG, "-1", "²", "1.5", "\x00"])
def test_a_sequence_cursor_beyond_a_bigint_is_refused(cursor: str) -> None:
    with pytest.raises(InputError, match=r"^cursor "):
        inputs.sequence_cursor("cursor", cursor)


def test_a_filter_is_trimmed_and_an_empty_one_is_no_filter() -> None:
    assert inputs.filter_value("task", "  app.tasks.send  ") == "app.tasks.send"
    assert inputs.filter_value("task", "") == ""
    assert inputs.filter_value("task", "   ") == ""


@pytest.mark.parametrize(
    ("value", "rule"),
    [("a\x00", "contains a NUL character"), ("x" * 201, "is longer than 200 characters")],
)
def test_a_filter_with_a_nul_or_over_its_length_is_refused(value: str, rule: str) -> None:
    with pytest.raises(InputError, match=rule) as refused:
        inputs.filter_value("queue", value)
    assert len(str(refused.value)) < 200
