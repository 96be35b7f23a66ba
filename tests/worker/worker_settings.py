"""Settings of the ``later_worker`` subprocesses the worker tests start.

Everything comes from :mod:`tests.settings`, except the databases: the test
passes the connection settings of the database under test (the test database
pytest-django created, SQLite file or PostgreSQL) as JSON in
``LATER_WORKER_DATABASE``, and it becomes the only alias, ``default``, which
``LATER["DATABASE"]`` names. ``LATER_WORKER_LATER`` (JSON) adds ``LATER`` keys,
e.g. ``RETRY``.
"""

import faulthandler
import json
import os
import signal

from tests.settings import *  # noqa: F403

DATABASES = {"default": json.loads(os.environ["LATER_WORKER_DATABASE"])}

LATER = {
    "NAMESPACE": "default",
    **json.loads(os.environ.get("LATER_WORKER_LATER") or "{}"),
    "DATABASE": "default",
}

# A test whose worker does not exit in time sends SIGUSR1 before it fails
# (``WorkerProcess.dump_stacks``): every thread's stack lands in the worker's log.
faulthandler.register(signal.SIGUSR1, all_threads=True)
