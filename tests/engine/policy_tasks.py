"""Tasks declared without later_django's options, as in a package you did not write:
``LATER["TASK_POLICIES"]`` gives them theirs (``tests/engine/test_task_policies.py``)."""

from __future__ import annotations

from later_django.compat.tasks import task
from tests.engine.tasks import Boom


@task
def plain(value: int) -> int:
    return value


@task
def plain_fails(message: str) -> None:
    raise Boom(message)


@task(queue_name="reports", priority=5, retry={"max_retries": 1, "backoff": "immediate"})
def with_own_options(message: str) -> None:
    raise Boom(message)


@task(unique={"key": "one-at-a-time"})
def with_own_unique(value: int) -> int:
    return value


def first_argument_key(value: int, *args: object, **kwargs: object) -> str:
    """A unique key function named by its dotted path in the settings."""
    return f"value-{value}"


NOT_A_FUNCTION = 42
