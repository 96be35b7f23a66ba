"""Tasks whose failures the failure-log and no-retry tests watch.

Each appends a line to the file at ``path`` every time it runs, so a test can
count the attempts that really called it.
"""

from __future__ import annotations

from later_django.compat.tasks import task
from tests.engine.tasks import append_line, read_lines


@task(retry={"max_retries": 0})
def fail_with_value_error(path: str, message: str) -> None:
    append_line(path, "ran")
    raise ValueError(message)


@task(retry={"max_retries": 2, "backoff": "fixed", "initial": 0.2})
def fail_twice_then_fail(path: str, message: str) -> None:
    """Fails every attempt: two retries, 0.2 s apart, then the job fails."""
    append_line(path, "ran")
    raise ValueError(message)


@task(retry={"max_retries": 1, "backoff": "immediate"})
def fail_once_then_succeed(path: str) -> str:
    """The first attempt fails and is retried at once; the second succeeds."""
    append_line(path, "ran")
    if len(read_lines(path)) == 1:
        raise ValueError("first attempt")
    return "done"


@task(retry={"max_retries": 3, "backoff": "immediate"})
def return_a_set(path: str) -> set[int]:
    """Returns what JSON cannot hold, with retries that must not be used."""
    append_line(path, "ran")
    return {1, 2}


@task(retry={"max_retries": 3, "backoff": "immediate"})
def return_nan(path: str) -> dict[str, float]:
    """Returns NaN nested in a dict, with retries that must not be used."""
    append_line(path, "ran")
    return {"ratio": float("nan")}
