"""The demo's tasks: each shows one feature of later_django.

They only compute small values and sleep briefly, so a demo worker shows jobs
moving through their stages without doing any real work.
"""

from __future__ import annotations

import time

from later_django.api import check_cancelled
from later_django.compat.tasks import TaskContext, task

#: Seconds each chain step and order job pretends to work, so stages are visible.
STEP_SECONDS = 0.5
#: The long report's steps and the seconds each takes: about a minute of running, long
#: enough to open the job in the admin and press Cancel… while it runs.
REPORT_STEPS = 60
REPORT_STEP_SECONDS = 1.0


class DemoFailure(RuntimeError):
    """Raised on purpose by the demo's failing tasks."""


@task
def greet(name: str) -> str:
    """One plain job: returns a greeting."""
    return f"Hello, {name}!"


@task
def chain_step(step: int, total: int) -> str:
    """One link of a continuation chain; each waits for the one before it."""
    time.sleep(STEP_SECONDS)
    return f"step {step} of {total} done"


@task(takes_context=True, retry={"max_retries": 3, "backoff": "fixed", "initial": 2.0})
def flaky(context: TaskContext, label: str) -> str:
    """Fails on its first attempt and succeeds on the retry two seconds later."""
    if context.attempt == 1:
        raise DemoFailure(f"{label}: the first attempt fails on purpose")
    return f"{label}: succeeded on attempt {context.attempt}"


@task(retry={"max_retries": 0})
def always_fails(label: str) -> None:
    """Fails at once and is never retried (the seed uses it for failed jobs)."""
    raise DemoFailure(f"{label}: fails on purpose, without retries")


@task
def tick(number: int) -> int:
    """A no-op job of the 1,000-job burst."""
    return number


@task
def process_order(order_id: int, customer: str) -> str:
    """An order job: the orders of one customer run one after another."""
    time.sleep(STEP_SECONDS / 5)
    return f"order {order_id} of {customer} processed"


@task
def heartbeat() -> str:
    """The recurring job (``LATER["RECURRING"]["demo-heartbeat"]``, every minute)."""
    return "alive"


@task
def long_report(steps: int = REPORT_STEPS, step_seconds: float = REPORT_STEP_SECONDS) -> str:
    """A report of ``steps`` steps of ``step_seconds`` each that checks for a cancel
    before every step: ``check_cancelled()`` raises ``JobCancelled`` once Cancel… was
    pressed on the running job, and the job ends ``cancelled`` within about a step."""
    for _ in range(steps):
        check_cancelled()
        time.sleep(step_seconds)
    return f"report of {steps} steps done"
