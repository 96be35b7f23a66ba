"""The benchmark's tasks for Procrastinate (``BENCH_SYSTEM=procrastinate``), on the app
of ``procrastinate.contrib.django``; the settings list this module in
``PROCRASTINATE_IMPORT_PATHS`` so that its worker knows them.

Procrastinate stores no return values, so ``stamp`` writes its start time to
``STAMP_TABLE`` (job id, ``time.time()``), a table ``bench.py``'s latency scenario
creates; the time is taken before that insert, so the insert is not in the latency.
"""

import time

from django.db import connection
from procrastinate.contrib.django import app

STAMP_TABLE = "bench_procrastinate_stamp"


@app.task
def noop() -> None:
    """Does nothing: the drain measures the job path alone."""


@app.task(pass_context=True)
def stamp(context, enqueued_at: float) -> None:  # type: ignore[no-untyped-def]
    """Writes (job id, the wall-clock time at which it started) to ``STAMP_TABLE``."""
    started = time.time()
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {STAMP_TABLE} (job_id, started_at) VALUES (%s, %s)",
            [context.job.id, started],
        )
