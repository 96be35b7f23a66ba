"""Several processes' passes at once still enqueue each tick exactly once."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connections

from later_django.api import schedule_recurring
from later_django.core.clock import now_ms
from later_django.engine.recurring_pass import run_recurring_pass
from later_django.storage.stores import stores_for
from tests.recurring import tasks
from tests.recurring.support import NAMESPACE, job_records, move_next_run

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

DEFINITIONS = 8
ROUNDS = 4
THREADS = 3


def test_concurrent_passes_enqueue_one_occurrence_per_tick(recur_db: str) -> None:
    first = (now_ms() // 1000 - ROUNDS - 1) * 1000  # every round's tick is already past
    for number in range(DEFINITIONS):
        schedule_recurring(f"r{number}", "* * * * * *", tasks.plain, number)
        move_next_run(recur_db, f"r{number}", first)
    done: list[int] = []
    errors: list[BaseException] = []

    def run_rounds(barrier: threading.Barrier) -> None:
        try:
            for round_number in range(ROUNDS):
                barrier.wait(timeout=30)
                done.append(
                    run_recurring_pass(stores_for(recur_db), NAMESPACE, first + 1000 * round_number)
                )
        except BaseException as error:  # reported by the test thread
            errors.append(error)
        finally:
            connections[recur_db].close()

    barrier = threading.Barrier(THREADS)
    threads = [threading.Thread(target=run_rounds, args=(barrier,)) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert not any(thread.is_alive() for thread in threads)

    records = job_records(recur_db)
    per_tick = Counter((record.recurring_id, record.run_after_ms) for record in records)
    expected = {
        (f"r{number}", first + 1000 * round_number)
        for number in range(DEFINITIONS)
        for round_number in range(ROUNDS)
    }
    assert set(per_tick) == expected
    assert max(per_tick.values()) == 1
    assert sum(done) == DEFINITIONS * ROUNDS
