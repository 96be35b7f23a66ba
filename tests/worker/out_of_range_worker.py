"""``later_worker`` whose options carry a value no column holds, past the parser.

Run as ``python -m tests.worker.out_of_range_worker [later_worker options]`` with
the environment of :class:`tests.worker.test_worker_process.Workers`; the
process's ``--concurrency`` becomes ``LATER_FORCED_CONCURRENCY`` (default 2**63)
after the command's parser accepted the one given. The worker row's write then
meets an error that retrying cannot cure: PostgreSQL's ``integer out of range``
(``DataError``), sqlite3's ``OverflowError``. What the worker does then is what the
test watches (the command line itself refuses such a value: rows 10 and 11 of
issue 38).
"""

from __future__ import annotations

import dataclasses
import os
import sys

import django


def main() -> None:
    django.setup()
    from django.core.management import call_command

    from later_django.management.commands import later_worker

    concurrency = int(os.environ.get("LATER_FORCED_CONCURRENCY", str(2**63)))
    real_options_of = later_worker.worker_options_of

    def worker_options_of(options):  # type: ignore[no-untyped-def]
        return dataclasses.replace(real_options_of(options), concurrency=concurrency)

    later_worker.worker_options_of = worker_options_of
    call_command("later_worker", *sys.argv[1:])


if __name__ == "__main__":
    main()
