"""Issue 38, rows 8 to 15 (the commands): a value an option refuses is named with its
rule, without a traceback, before anything is read or written, on both databases.

In-process (``call_command``, options given as arguments so the parser's types
apply): a ``CommandError`` whose message names the option, the value and the rule,
and the jobs untouched. On the command line (``python -m django``): exit status 2
(argparse's) or 1 (``CommandError``), the message on stderr, no traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command, load_command_class
from django.test import override_settings

from later_django import api
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import NAMESPACE, run_burst
from tests.maintenance.test_processes import REPOSITORY, database_settings

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

COMMANDS = ("later_worker", "later_maintenance", "later_status", "later_jobs")
#: What each command needs before its options (``later_jobs`` its action).
LEADING = {"later_jobs": ["retry"]}
FAILED = 5


@pytest.fixture
def failed(engine_db: str) -> str:
    """``engine_db`` holding FAILED failed jobs (the data a refused command must leave)."""
    api.enqueue_many(tasks.fail_once_without_retry, [((f"boom {n}",), {}) for n in range(FAILED)])
    run_burst()
    assert counts(engine_db) == {"failed": FAILED}
    return engine_db


def counts(alias: str) -> dict[str, int]:
    return stores_for(alias).index.job_index_stage_counts(NAMESPACE)


def refusal(command: str, *arguments: str) -> str:
    """The message of the ``CommandError`` ``command arguments`` ends with."""
    with pytest.raises(CommandError) as refused:
        call_command(command, *arguments, stdout=StringIO(), stderr=StringIO())
    message = str(refused.value)
    assert "Traceback" not in message
    return message


def assert_names(message: str, option: str, value: str, rule: str) -> None:
    assert option in message, message
    assert repr(value) in message, message
    assert rule in message, message


def test_row_8_an_impossible_since_is_refused_and_nothing_retried(failed: str) -> None:
    for since in ("2026-13-01T00:00", "2026-01-01T25:00", "2026-01-01T00:00+99:00"):
        message = refusal("later_jobs", "retry", f"--since={since}")
        assert_names(message, "--since", since, "is not an ISO 8601 date and time")
    assert counts(failed) == {"failed": FAILED}


def test_row_8_a_since_without_offset_is_still_read_and_applied(failed: str) -> None:
    out = StringIO()
    call_command("later_jobs", "retry", "--since", "2000-01-01T00:00", "--dry-run", stdout=out)
    assert out.getvalue().startswith(f"would retry {FAILED} of {FAILED} failed job(s)")


def test_row_9_a_batch_size_no_transaction_takes_is_refused(failed: str) -> None:
    for size in (str(2**63), "0", "-1", "10001", "1e3", "²"):
        message = refusal("later_jobs", "retry", f"--batch-size={size}")
        assert_names(message, "--batch-size", size, "is not")
    assert counts(failed) == {"failed": FAILED}


def test_row_10_a_lease_under_a_second_or_not_finite_is_refused(db_alias: str) -> None:
    for lease in ("nan", "inf", "-inf"):
        message = refusal("later_worker", "--burst", f"--lease-seconds={lease}")
        assert_names(message, "--lease-seconds", lease, "is not a number of seconds")
    for lease in ("1e309", "1e-9", "0.5", "-1", "86401"):
        message = refusal("later_worker", "--burst", f"--lease-seconds={lease}")
        assert_names(message, "--lease-seconds", lease, "is not between 1 and 86400 seconds")


def test_row_11_a_concurrency_no_process_runs_is_refused(failed: str) -> None:
    for concurrency in (str(2**63), str(2**31), "10001", "0"):
        message = refusal("later_worker", "--burst", f"--concurrency={concurrency}")
        assert_names(message, "--concurrency", concurrency, "is not between 1 and 10,000")
    message = refusal("later_worker", "--burst", "--processes", "1001")
    assert_names(message, "--processes", "1001", "is not between 1 and 1,000")
    assert counts(failed) == {"failed": FAILED}


def test_row_12_nan_is_no_duration(db_alias: str) -> None:
    message = refusal("later_status", "--check", "--max-age", "nan")
    assert_names(message, "--max-oldest-ready-age", "nan", "is not a number of seconds")
    message = refusal("later_status", "--check", "--max-age=-1")
    assert_names(message, "--max-oldest-ready-age", "-1", "is not between 0 and 3.1536e+07")
    message = refusal("later_worker", "--burst", "--shutdown-timeout", "nan")
    assert_names(message, "--shutdown-timeout", "nan", "is not a number of seconds")
    message = refusal("later_worker", "--burst", "--shutdown-timeout", "0")
    assert_names(message, "--shutdown-timeout", "0", "is not between 0.001 and 86400 seconds")


def test_row_13_a_database_that_is_not_configured_is_refused(engine_db: str) -> None:
    message = refusal("later_status", "--database", "nosuch")
    assert "--database 'nosuch' is not a database of DATABASES" in message
    assert "default" in message, "the known aliases are listed"
    assert_names(refusal("later_status", "--database", ""), "--database", "", "is empty")


def test_row_14_a_namespace_neither_configured_nor_in_the_data_is_refused(
    engine_db: str,
) -> None:
    message = refusal("later_status", "--namespace", "nosuch")
    assert "--namespace 'nosuch' is neither configured nor seen in database" in message
    for name in ("a-b", "%", ""):
        assert_names(refusal("later_status", f"--namespace={name}"), "--namespace", name, "is")


def test_row_14_a_namespace_with_jobs_is_reported(engine_db: str) -> None:
    with override_settings(LATER={"NAMESPACE": "elsewhere", "DATABASE": engine_db}):
        tasks.add.enqueue(1, 2)
    out = StringIO()
    call_command("later_status", "--namespace", "elsewhere", "--json", stdout=out)
    assert json.loads(out.getvalue())["namespace"] == "elsewhere"
    call_command("later_status", "--namespace", NAMESPACE, stdout=StringIO())


def test_row_15_an_empty_task_is_refused_not_read_as_no_filter(failed: str) -> None:
    message = refusal("later_jobs", "retry", "--task", "")
    assert_names(message, "--task", "", "is empty")
    assert counts(failed) == {"failed": FAILED}


def valued_options(command: str) -> list[str]:
    """The options of ``command`` that take a value (not flags, not Django's own)."""
    parser = load_command_class("later_django", command).create_parser("manage.py", command)
    django_own = {"--settings", "--pythonpath", "--verbosity", "--traceback"}
    return [
        action.option_strings[0]
        for action in parser._actions
        if action.option_strings
        and action.nargs != 0
        and not set(action.option_strings) & django_own
        and action.option_strings[0] != "--help"
    ]


@pytest.mark.parametrize("command", COMMANDS)
def test_row_15_every_option_refuses_an_empty_value(failed: str, command: str) -> None:
    options = valued_options(command)
    assert options, command
    for option in options:
        message = refusal(command, *LEADING.get(command, []), f"{option}=")
        assert f"argument {option}" in message and "'' is empty" in message, (option, message)
    assert counts(failed) == {"failed": FAILED}


def run_command(alias: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    """``python -m django <arguments>`` on ``alias``'s test database."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.maintenance.maintenance_settings",
        "PYTHONPATH": str(REPOSITORY),
        "LATER_WORKER_DATABASE": json.dumps(database_settings(alias)),
    }
    return subprocess.run(
        [sys.executable, "-m", "django", *arguments],
        env=env,
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("arguments", "status", "said"),
    [
        (
            ["later_jobs", "retry", "--since", "2026-13-01T00:00"],
            2,
            "argument --since: '2026-13-01T00:00' is not an ISO 8601 date and time",
        ),
        (
            ["later_worker", "--burst", "--concurrency", str(2**63)],
            2,
            f"argument --concurrency: '{2**63}' is not between 1 and 10,000",
        ),
        (
            ["later_worker", "--lease-seconds", "1e-9"],
            2,
            "argument --lease-seconds: '1e-9' is not between 1 and 86400 seconds",
        ),
        (
            ["later_status", "--namespace", "nosuch"],
            1,
            "--namespace 'nosuch' is neither configured nor seen in database",
        ),
        (["later_jobs", "retry", "--task", ""], 2, "argument --task: '' is empty"),
    ],
    ids=["since", "concurrency", "lease", "namespace", "empty-task"],
)
def test_on_the_command_line_a_refusal_is_a_message_and_a_status(
    failed: str, arguments: list[str], status: int, said: str
) -> None:
    done = run_command(failed, *arguments)
    assert done.returncode == status, done.stderr
    assert said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert counts(failed) == {"failed": FAILED}
