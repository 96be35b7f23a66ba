"""The fault suite's attribution of duplicates (chaos/counting.py): pure, no database.

Found by CI: a job started 1.3 ms after another thread of its process wrote the
``exit`` line of ``os._exit``; it died with the process and ran again, which the
rule then counted as unexplained.
"""

from __future__ import annotations

from chaos.counting import EXIT_GRACE_SECONDS, Faults, tally
from chaos.ledger import Execution

PID, EXIT_AT = 4242, 1_000.0


def twice(first_start: float, *, pid: int = PID) -> dict[str, list[Execution]]:
    """A job run first in ``pid`` (never done), then again elsewhere (done)."""
    first = Execution("job", "n1", pid, 1, first_start)
    again = Execution("job", "n2", 9999, 2, EXIT_AT + 3.0, done=EXIT_AT + 3.1)
    return {"job": [first, again]}


def explained(by_job: dict[str, list[Execution]], faults: Faults) -> bool:
    counted = tally({"job": 0.0}, by_job, {"job": {"status": "SUCCESSFUL"}}, faults)
    assert counted.duplicated == 1
    return counted.explained == 1 and not counted.unexplained


def test_a_job_started_just_after_its_processs_exit_line_died_with_it() -> None:
    faults = Faults(exits=[(PID, EXIT_AT)])
    assert explained(twice(EXIT_AT + 0.0013), faults)
    assert explained(twice(EXIT_AT - 5.0), faults)


def test_an_exit_line_explains_nothing_in_another_process_or_long_after() -> None:
    faults = Faults(exits=[(PID, EXIT_AT)])
    assert not explained(twice(EXIT_AT + 0.0013, pid=PID + 1), faults)
    assert not explained(twice(EXIT_AT + EXIT_GRACE_SECONDS + 0.1), faults)


def test_a_sigkill_explains_only_what_started_before_it() -> None:
    faults = Faults(kills=[(PID, EXIT_AT)])
    assert explained(twice(EXIT_AT - 1.0), faults)
    assert not explained(twice(EXIT_AT + 0.01), faults)
