"""``LaterTask``: django.tasks' ``Task`` with later_django's own options ``retry`` and
``unique``.

``LaterBackend.task_class`` is this class, so ``@task(retry={...})`` works for
tasks whose backend is a ``LaterBackend``::

    @task(retry={"max_retries": 5, "backoff": "exponential", "initial": 2.0})
    def charge(order_id): ...

``retry`` takes the keys of ``LATER["RETRY"]`` (missing keys take the
``RetryPolicy`` defaults); without it the server default applies.

``unique`` makes a second enqueue a no-op while the first job is live
(``core.unique``: ``key``, ``for_seconds``, ``while``)::

    @task(unique={"key": lambda user_id: f"user-{user_id}", "for_seconds": 300})
    def sync_user(user_id): ...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from later_django.compat.tasks import InvalidTask, Task
from later_django.core.retry import RetryPolicy
from later_django.core.unique import UniqueOption


@dataclass(frozen=True, slots=True, kw_only=True)
class LaterTask(Task):
    retry: dict[str, Any] | None = None
    unique: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        try:
            if self.retry is not None:
                RetryPolicy.from_mapping(self.retry, f"the retry option of task {self.module_path}")
            if self.unique is not None:
                UniqueOption.from_mapping(
                    self.unique, f"the unique option of task {self.module_path}"
                )
        except ValueError as error:
            raise InvalidTask(str(error)) from None
        Task.__post_init__(self)


def unique_option(task: Task) -> UniqueOption | None:
    """The checked ``unique`` option of ``task``, or ``None`` (no option, or not a
    :class:`LaterTask`)."""
    option = getattr(task, "unique", None)
    if option is None:
        return None
    return UniqueOption.from_mapping(option, f"the unique option of task {task.module_path}")
