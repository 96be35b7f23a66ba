"""What each button of the demo page enqueues.

Every action writes its jobs and the matching :class:`DemoJob` rows in one
``transaction.atomic()``: the jobs exist exactly when the rows do. Each returns
a sentence for the page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.db import transaction

from demo import tasks
from demo.models import DemoJob
from later_django.api import continue_with, enqueue_many, enqueue_to_partition
from later_django.compat.tasks import TaskResult
from later_django.conf import later_settings

BURST_SIZE = 1_000
CHAIN_LENGTH = 3
ORDER_COUNT = 24
#: The topic of the order jobs; ``LATER["TOPICS"]["orders"]`` gives it 8 partitions.
ORDERS_TOPIC = "orders"
CUSTOMERS = ("ada", "grace", "linus", "margaret", "ken", "barbara")


def _remember(label: str, results: Sequence[TaskResult]) -> None:
    DemoJob.objects.using(later_settings().database).bulk_create(
        [DemoJob(job_id=result.id, label=label) for result in results]
    )


def enqueue_one() -> str:
    """One ``greet`` job."""
    with transaction.atomic(using=later_settings().database):
        result = tasks.greet.enqueue("demo")
        _remember("single job", [result])
    return f"Enqueued one job: {result.id}."


def enqueue_chain() -> str:
    """Three ``chain_step`` jobs, each a continuation of the one before."""
    with transaction.atomic(using=later_settings().database):
        results = [tasks.chain_step.enqueue(1, CHAIN_LENGTH)]
        for step in range(2, CHAIN_LENGTH + 1):
            results.append(continue_with(results[-1], tasks.chain_step, step, CHAIN_LENGTH))
        _remember("chain", results)
    return f"Enqueued a chain of {CHAIN_LENGTH} jobs; each waits for the one before."


def enqueue_flaky() -> str:
    """A ``flaky`` job: fails once, is retried two seconds later, then succeeds."""
    with transaction.atomic(using=later_settings().database):
        result = tasks.flaky.enqueue("flaky")
        _remember("fails once", [result])
    return f"Enqueued a job that fails once, then succeeds on its retry: {result.id}."


def enqueue_burst() -> str:
    """1,000 ``tick`` jobs through ``enqueue_many`` (one statement per table)."""
    with transaction.atomic(using=later_settings().database):
        results = enqueue_many(tasks.tick, [((number,), {}) for number in range(BURST_SIZE)])
        _remember("burst", results)
    return f"Enqueued a burst of {len(results):,} jobs in one transaction."


def enqueue_orders() -> str:
    """Order jobs on topic "orders", keyed by customer: one customer's run in order."""
    with transaction.atomic(using=later_settings().database):
        results = [
            enqueue_to_partition(ORDERS_TOPIC, customer, tasks.process_order, order_id, customer)
            for order_id, customer in orders(ORDER_COUNT)
        ]
        _remember("order", results)
    return f"Enqueued {len(results)} order jobs on topic '{ORDERS_TOPIC}', keyed by customer."


def enqueue_report() -> str:
    """A ``long_report`` job: about a minute of running, to cancel from its admin page."""
    with transaction.atomic(using=later_settings().database):
        result = tasks.long_report.enqueue()
        _remember("long report", [result])
    return (
        f"Enqueued a report of {tasks.REPORT_STEPS} one-second steps: {result.id}. "
        "Open it under Recent jobs and press Cancel… while it runs."
    )


def orders(count: int) -> list[tuple[int, str]]:
    """``count`` orders ``(number, customer)``, the customers taken in turn."""
    return [(number, CUSTOMERS[number % len(CUSTOMERS)]) for number in range(1, count + 1)]


ACTIONS: dict[str, Callable[[], str]] = {
    "one": enqueue_one,
    "chain": enqueue_chain,
    "flaky": enqueue_flaky,
    "burst": enqueue_burst,
    "orders": enqueue_orders,
    "report": enqueue_report,
}
