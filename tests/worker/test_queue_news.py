"""A worker claims from the delivery queue only when it may hold something new
(:mod:`later_django.worker.queue_news`): after a claim that came back short, not
again until a notification, a hand-back, other queue names or the periodic look."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections

from later_django.worker.queue_news import QueueNews
from later_django.worker.runner import Worker, WorkerOptions
from tests.engine import tasks
from tests.engine.support import result

CLAIM = "later_claim_with_records"


class Count:
    def __init__(self) -> None:
        self.value = 0

    def __call__(self) -> int:
        return self.value


def test_a_short_claim_is_not_repeated_until_something_is_heard() -> None:
    heard = Count()
    news = QueueNews(heard, look_seconds=60)
    news.claimed(("default",), news.heard(), short=True)
    assert not news.worth_claiming(("default",))
    heard.value += 1
    assert news.worth_claiming(("default",))


def test_a_notification_during_the_claim_counts_as_news() -> None:
    heard = Count()
    news = QueueNews(heard, look_seconds=60)
    before = news.heard()
    heard.value += 1  # arrives while the claim runs
    news.claimed(("default",), before, short=True)
    assert news.worth_claiming(("default",))


def test_a_full_claim_other_queue_names_and_a_hand_back_each_mean_claim_again() -> None:
    news = QueueNews(Count(), look_seconds=60)
    news.claimed(("default",), news.heard(), short=False)
    assert news.worth_claiming(("default",))
    news.claimed(("default",), news.heard(), short=True)
    assert news.worth_claiming(("default", "emails"))
    assert news.worth_claiming(None)
    news.forget()
    assert news.worth_claiming(("default",))


def test_the_periodic_look_claims_without_news() -> None:
    news = QueueNews(Count(), look_seconds=0.05)
    news.claimed(None, news.heard(), short=True)
    assert not news.worth_claiming(None)
    time.sleep(0.06)
    assert news.worth_claiming(None)


def test_without_notifications_every_claim_is_made() -> None:
    news = QueueNews(None, look_seconds=60)
    news.claimed(("default",), news.heard(), short=True)
    assert news.worth_claiming(("default",))


class ClaimCount:
    """An ``execute_wrapper`` counting the worker's delivery-queue claims."""

    def __init__(self) -> None:
        self.claims = 0

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        if CLAIM in sql:
            self.claims += 1
        return execute(sql, params, many, context)


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_jobs_arriving_one_at_a_time_cost_one_claim_each(postgres_alias: str, settings) -> None:
    """Jobs enqueued one at a time, each after the one before finished: the worker
    claims once per job (woken by the job's notification), not again after the start
    and after the finish. Before: three claims per job, two of them empty."""
    settings.LATER = {"NAMESPACE": "default", "DATABASE": postgres_alias}
    jobs, ids = 8, []

    def enqueue_one_at_a_time() -> None:
        try:
            time.sleep(0.3)  # the worker is listening and idle
            for number in range(jobs):
                ids.append(tasks.add.enqueue(number, 1).id)
                deadline = time.monotonic() + 10
                while not result(ids[-1]).is_finished and time.monotonic() < deadline:
                    time.sleep(0.01)
        finally:
            connections.close_all()

    enqueuer = threading.Thread(target=enqueue_one_at_a_time)
    count = ClaimCount()
    with connections[postgres_alias].execute_wrapper(count):
        enqueuer.start()
        code = Worker(WorkerOptions(queues=["default"], concurrency=4, max_jobs=jobs)).run()
    enqueuer.join(timeout=15)
    assert code == 0
    assert [result(job_id).return_value for job_id in ids] == [n + 1 for n in range(jobs)]
    # One per job, plus the first look and at most one look per idle second.
    assert count.claims <= jobs + 4, count.claims
