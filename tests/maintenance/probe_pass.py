"""A test-only maintenance pass that records when each run started and ended.

Each run appends one JSON line ``{"pid", "start", "end"}`` (wall-clock seconds)
to the file named by ``LATER_MAINTENANCE_PROBE_FILE``, written before the run
returns (so before its lease is let go), with one ``O_APPEND`` write.
"""

from __future__ import annotations

import json
import os
import time

from later_django.maintenance import MaintenancePass, PassContext, register_pass

PROBE_FILE_ENV = "LATER_MAINTENANCE_PROBE_FILE"
RUN_SECONDS = 0.3


def probe(context: PassContext) -> int:
    start = time.time()
    time.sleep(RUN_SECONDS)
    line = json.dumps({"pid": os.getpid(), "start": start, "end": time.time()}) + "\n"
    descriptor = os.open(os.environ[PROBE_FILE_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(descriptor, line.encode())
    finally:
        os.close(descriptor)
    return 1


register_pass(MaintenancePass("overlap_probe", 0.2, probe, max_run_seconds=5.0))
