"""``LaterTask``: django.tasks' ``Task`` with later_django's own options ``retry``,
``unique`` and ``timeout``.

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

``timeout`` (seconds) bounds how long one attempt may run (``LATER["TIMEOUT"]`` is the
default): past it the attempt is recorded failed by ``TaskTimeout`` and retried by the
policy, and the worker process is replaced (a thread cannot be stopped)::

    @task(timeout=30)
    def render(report_id): ...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from later_django.compat.tasks import InvalidTask, Task
from later_django.conf import timeout_problem
from later_django.core.retry import RetryPolicy
from later_django.core.unique import UniqueOption


@dataclass(frozen=True, slots=True, kw_only=True)
class LaterTask(Task):
    retry: dict[str, Any] | None = None
    unique: dict[str, Any] | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        problem = timeout_problem(self.timeout, f"the timeout option of task {self.module_path}")
        if problem is not None:
            raise InvalidTask(problem)
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
