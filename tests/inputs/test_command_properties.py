"""Property tests of the commands' options (issue 38, item 4): for any value of any
option, ``later_worker``, ``later_jobs``, ``later_status`` and ``later_maintenance``
either work or refuse with a ``CommandError`` naming the option, never another
exception, and answer alike on SQLite and PostgreSQL (in the MariaDB lane: MariaDB;
tests/inputs/conftest.py), each example running on both.

In process (``call_command``, the option given as ``--option=value`` so a value that
starts with ``-`` stays a value): ``later_worker`` with ``--burst`` and
``later_maintenance`` with ``--once`` so an accepted value ends; ``later_jobs`` with
``--dry-run``. The options whose accepted values reach outside the test (``--processes``
forks, ``--metrics-port`` serves, ``--health-file`` writes a file) go through the
command's parser only.
"""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO

import pytest
from django.core.management import CommandError, call_command, load_command_class
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from later_django.engine import metrics
from tests.inputs.conftest import COMPARED, REFERENCE, compared_with_sqlite

pytestmark = [pytest.mark.django_db(transaction=True, databases="__all__"), compared_with_sqlite]

#: The two databases each example runs on (``COMPARED`` is the alias of its name).
ALIASES = (REFERENCE, COMPARED)
#: What each command runs with, so that an accepted value ends and changes no job.
FIXED = {
    "later_worker": ["--burst"],
    "later_jobs": ["retry", "--dry-run"],
    "later_status": [],
    "later_maintenance": ["--once", "--pass=promote"],
}
#: The options whose accepted values act outside the test: parsed only.
PARSED_ONLY = {"--processes", "--metrics-port", "--health-file"}
DJANGO_OWN = {"--settings", "--pythonpath", "--verbosity", "--traceback", "--help"}
EXAMPLES = 100

#: Values an operator or an attacker might type: the edges first, then anything.
EDGES = st.sampled_from(
    [
        "",
        " ",
        "\x00",
        "nan",
        "inf",
        "-inf",
        "1e309",
        "1e-9",
        "0",
        "-1",
        "1",
        "30",
        str(2**31),
        str(2**63),
        "²",
        "\u0661",
        "1_000",
        "%",
        "a-b",
        "default",
        "postgres",
        "promote",
        "failed",
        "delayed",
        "2026-13-01T00:00",
        "2026-12-01T08:00",
        "2026-12-01T08:00+99:00",
        "tests.engine.tasks.add",
        "x" * 100_000,
        "' OR 1=1 --",
    ]
)
VALUES = st.one_of(
    EDGES,
    st.text(max_size=30),
    st.integers().map(str),
    st.floats().map(str),
)
#: Values each option accepts, drawn half the time: both answers are exercised.
ACCEPTED = {
    "--concurrency": ["1", "4", "10000"],
    "--max-jobs": ["1", str(2**63 - 1)],
    "--shutdown-timeout": ["0.001", "30", "86400"],
    "--burst-patience": ["0.001", "60", "86400"],
    "--lease-seconds": ["1", "2.5", "86400"],
    "--queue": ["default", "emails"],
    "--metrics-host": ["127.0.0.1"],
    "--processes": ["1", "1000"],
    "--metrics-port": ["1", "65535"],
    "--health-file": ["/tmp/later-health"],
    "--stage": ["failed"],
    "--task": ["tests.engine.tasks.add"],
    "--since": ["2026-12-01T08:00", "2000-01-01T00:00+01:00"],
    "--batch-size": ["1", "10000"],
    "--max-oldest-ready-age": ["0", "300", "31536000"],
    "--min-workers": ["0", "1000000"],
    "--database": list(ALIASES),
    "--namespace": ["default"],
    "--pass": ["promote", "sweep"],
}


def option_and_value(options: list[str]) -> st.SearchStrategy[tuple[str, str]]:
    """An option of ``options`` and a value for it: one it accepts, or any."""
    return st.sampled_from(options).flatmap(
        lambda option: st.tuples(
            st.just(option), st.one_of(st.sampled_from(ACCEPTED[option]), VALUES)
        )
    )


def valued_options(command: str) -> list[str]:
    """The options of ``command`` that take a value (not flags, not Django's own)."""
    parser = load_command_class("later_django", command).create_parser("manage.py", command)
    return [
        action.option_strings[0]
        for action in parser._actions
        if action.option_strings
        and action.nargs != 0
        and not set(action.option_strings) & DJANGO_OWN
    ]


def outcome(command: str, option: str, value: str) -> tuple[str, str]:
    """What ``command`` does with ``option=value``: ("done", "") or ("refused",
    message); any other exception is the test's failure."""
    arguments = [*FIXED[command], f"{option}={value}"]
    try:
        if option in PARSED_ONLY:
            load_command_class("later_django", command).create_parser(
                "manage.py", command
            ).parse_args(arguments)
        else:
            call_command(command, *arguments, stdout=StringIO(), stderr=StringIO())
    except CommandError as refused:
        return "refused", str(refused)
    return "done", ""


@pytest.fixture
def both(reference: str, compared: str) -> Iterator[None]:
    """Both databases reachable (skipped when the compared one is not); the engine's
    in-memory figures of the examples dropped at the end."""
    yield
    metrics.accumulator.take()


@pytest.mark.parametrize("command", sorted(FIXED))
def test_any_value_of_any_option_works_or_is_refused_alike_on_both_databases(
    both: None, command: str
) -> None:
    options = valued_options(command)
    kinds: set[str] = set()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(drawn=option_and_value(options))
    def check(drawn: tuple[str, str]) -> None:
        option, value = drawn
        answers = []
        for alias in ALIASES:
            with override_settings(LATER={"NAMESPACE": "default", "DATABASE": alias}):
                kind, message = outcome(command, option, value)
            # The one difference allowed: the database a message names.
            answers.append((kind, message.replace(f"database {alias!r}", "database <alias>")))
        kind, message = answers[0]
        kinds.add(kind)
        assert answers[1] == answers[0], (option, value, answers)
        if kind == "refused":
            assert option in message or f"/{option}" in message, (option, message)
            assert "Traceback" not in message
            assert len(message) < 1_000, "a long value is cut, not echoed whole"

    check()
    assert kinds == {"done", "refused"}, "both answers were exercised"
