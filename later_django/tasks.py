"""``LaterTask``: django.tasks' ``Task`` with later_django's own option ``retry``.

``LaterBackend.task_class`` is this class, so ``@task(retry={...})`` works for
tasks whose backend is a ``LaterBackend``::

    @task(retry={"max_retries": 5, "backoff": "exponential", "initial": 2.0})
    def charge(order_id): ...

``retry`` takes the keys of ``LATER["RETRY"]`` (missing keys take the
``RetryPolicy`` defaults); without it the server default applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from later_django.compat.tasks import InvalidTask, Task
from later_django.core.retry import RetryPolicy


@dataclass(frozen=True, slots=True, kw_only=True)
class LaterTask(Task):
    retry: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.retry is not None:
            try:
                RetryPolicy.from_mapping(self.retry, f"the retry option of task {self.module_path}")
            except ValueError as error:
                raise InvalidTask(str(error)) from None
        Task.__post_init__(self)
