"""The supervisor's starts against its stop signal (``supervisor_start_probe``, real
forks in a process of its own).

The storm test (``test_faults``) caught this once in CI: two children exited
together, the supervisor started their replacements, and its SIGTERM came while
the first was being forked. The signal was held until that fork was done, then
forwarded to the children it knew; the second replacement was forked after that
and never heard of the stop, so the supervisor waited for it for ever.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.worker import supervisor_start_probe

REPOSITORY = Path(__file__).resolve().parents[2]


def test_no_child_is_started_after_a_stop_signal_that_came_during_a_start() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "tests.worker.supervisor_start_probe"],
        cwd=REPOSITORY,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout.strip().splitlines()[-1])

    assert report["signals_seen"] == 1
    # One child was started, and the stop reached it: killed by SIGTERM at once,
    # not asleep to the end of its UNSTOPPED_SECONDS.
    assert report["children_known"] == 1
    [(code, seconds)] = report["ends"]
    assert code == -15
    assert seconds < supervisor_start_probe.UNSTOPPED_SECONDS / 2
    # And no slot is due again: the supervisor is stopping.
    assert report["due_again"] is None
