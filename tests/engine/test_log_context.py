"""Logs with the job's context: every record written while a job runs, or while its
``task_finished`` signal is sent, carries the job's fields through
:class:`~later_django.core.log_context.JobContextFilter` (the task's own lines and
Django's), and the documented ``LOGGING`` example writes them as JSON."""

from __future__ import annotations

import io
import json
import logging
import logging.config
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from later_django.compat.tasks import TASKS_LOGGER_NAME, TaskResultStatus
from later_django.core.log_context import FIELDS, JobContextFilter, current_job, job_context
from tests.engine import failure_tasks, tasks
from tests.engine.support import run_until_finished

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

OBSERVABILITY = Path(__file__).resolve().parents[2] / "docs" / "observability.md"


class Collect(logging.Handler):
    """Keeps every record it handles, after its filters ran."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def collected() -> Iterator[Collect]:
    """A handler with the filter on the root logger, at DEBUG, for the test."""
    handler = Collect()
    handler.addFilter(JobContextFilter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in FIELDS}


def test_the_tasks_own_log_line_carries_the_job_fields(engine_db: str, collected: Collect) -> None:
    enqueued = tasks.log_a_line.enqueue("hello from the task")

    [done] = run_until_finished([enqueued.id])

    assert done.status == TaskResultStatus.SUCCESSFUL
    [line] = [r for r in collected.records if r.name == "tests.engine.tasks"]
    assert line.getMessage() == "hello from the task"
    assert fields_of(line) == {
        "job_id": enqueued.id,
        "task_path": tasks.log_a_line.module_path,
        "queue_name": "default",
        "attempt": 1,
        "duration": None,
    }
    # Out of the job, the thread has no current job again.
    assert current_job() is None


def test_djangos_finished_line_carries_the_job_fields_and_its_duration(
    engine_db: str, collected: Collect, tmp_path: Path
) -> None:
    enqueued = failure_tasks.fail_with_value_error.enqueue(str(tmp_path / "runs"), "boom")

    [failed] = run_until_finished([enqueued.id])

    assert failed.status == TaskResultStatus.FAILED
    [line] = [
        r
        for r in collected.records
        if r.name == TASKS_LOGGER_NAME and "state=FAILED" in r.msg % r.args
    ]
    assert line.levelno == logging.ERROR and line.exc_info is not None
    fields = fields_of(line)
    assert fields["job_id"] == enqueued.id
    assert fields["task_path"] == failure_tasks.fail_with_value_error.module_path
    assert fields["attempt"] == 1
    assert isinstance(fields["duration"], float) and fields["duration"] > 0


def test_a_record_outside_any_job_gets_the_fields_as_none(collected: Collect) -> None:
    logging.getLogger("tests.elsewhere").warning("not about a job")

    [line] = [r for r in collected.records if r.name == "tests.elsewhere"]
    assert fields_of(line) == dict.fromkeys(FIELDS)


def test_a_records_own_extra_wins_over_the_current_job(collected: Collect) -> None:
    with job_context({"job_id": "outer", "task_path": "t", "queue_name": "q", "attempt": 1}):
        logging.getLogger("tests.elsewhere").info("mine", extra={"job_id": "own"})

    [line] = [r for r in collected.records if r.name == "tests.elsewhere"]
    assert line.job_id == "own"  # type: ignore[attr-defined]
    assert line.task_path == "t"  # type: ignore[attr-defined]


def documented_logging() -> dict[str, Any]:
    """The ``LOGGING = {...}`` example of docs/observability.md, executed."""
    text = OBSERVABILITY.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(LOGGING = \{.*?)\n```", text, re.DOTALL)
    assert len(blocks) == 1, "docs/observability.md must have one LOGGING example"
    namespace: dict[str, Any] = {}
    exec(blocks[0], namespace)  # the project's own documentation
    return namespace["LOGGING"]


@pytest.fixture
def documented_json_logs() -> Iterator[io.StringIO]:
    """The documented ``LOGGING`` in force (its console writing to a buffer); the
    loggers it touches are put back afterwards."""
    config = documented_logging()
    names = ["", *config.get("loggers", {})]
    saved = {
        name: (logging.getLogger(name).handlers[:], logging.getLogger(name).level) for name in names
    }
    logging.config.dictConfig(config)
    stream = io.StringIO()
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(stream)
    try:
        yield stream
    finally:
        for name, (handlers, level) in saved.items():
            logger = logging.getLogger(name)
            logger.handlers[:] = handlers
            logger.setLevel(level)


def test_the_documented_logging_example_writes_json_lines_with_the_job_fields(
    engine_db: str, documented_json_logs: io.StringIO, tmp_path: Path
) -> None:
    enqueued = failure_tasks.fail_once_then_succeed.enqueue(str(tmp_path / "runs"))

    [done] = run_until_finished([enqueued.id])

    assert done.status == TaskResultStatus.SUCCESSFUL
    lines = [json.loads(line) for line in documented_json_logs.getvalue().splitlines()]
    about_the_job = [line for line in lines if line.get("job_id") == enqueued.id]
    retry = [line for line in about_the_job if "failed with" in line["message"]]
    assert len(retry) == 1
    assert retry[0]["levelname"] == "WARNING"
    assert retry[0]["attempt"] == 1 and retry[0]["duration"] > 0
    assert "ValueError: first attempt" in retry[0]["exc_info"]
    finished = [line for line in about_the_job if "state=SUCCESSFUL" in line["message"]]
    assert len(finished) == 1
    assert finished[0]["task_path"] == failure_tasks.fail_once_then_succeed.module_path
    assert finished[0]["queue_name"] == "default" and finished[0]["attempt"] == 2
