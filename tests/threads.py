"""Running one call on several threads at once, each with its own Django connection."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connections


def at_once[T](call: Callable[[int], T], threads: int, timeout: float = 60.0) -> list[T]:
    """Starts ``threads`` threads that each wait at one barrier, then call
    ``call(number)``; returns their results (in finishing order). Every thread
    closes its connections; an error on any thread fails the test with all of them."""
    barrier = threading.Barrier(threads)
    results: list[T] = []
    errors: list[BaseException] = []

    def run(number: int) -> None:
        try:
            barrier.wait(timeout=timeout / 2)
            results.append(call(number))
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    started = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join(timeout=timeout)
    assert not errors, errors
    assert len(results) == threads, f"{threads - len(results)} thread(s) did not finish"
    return results


def in_thread(alias: str, call: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Starts ``call`` on a thread of its own (its own connection to ``alias``, closed
    at the end); the list gets its result or its error once the thread ends."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as error:
            outcome.append(error)
        finally:
            connections[alias].close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome
