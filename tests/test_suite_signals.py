"""The processes the suite starts can be stopped with SIGINT, however the suite was started.

A run started as a background job of a non-interactive shell (``make test &``, a CI
runner's ``cmd &``) inherits SIGINT ignored; without ``tests/conftest.py``'s
``pytest_configure`` every child would too, and the dev server of the browser
tests, stopped with SIGINT, would never exit (seen: three sites killed after 60 s).
"""

from __future__ import annotations

import signal
import subprocess
import sys


def ignored_signals_of_a_child() -> int:
    code = (
        "import re\n"
        "text = open('/proc/self/status').read()\n"
        "print(int(re.search(r'SigIgn:\\s*([0-9a-f]+)', text).group(1), 16))\n"
    )
    return int(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )


def test_a_child_of_the_suite_does_not_ignore_sigint() -> None:
    assert not ignored_signals_of_a_child() & (1 << (signal.SIGINT - 1))
