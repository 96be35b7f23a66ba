"""Settings of the ``later_maintenance`` / ``later_worker`` subprocesses of these tests.

As :mod:`tests.worker.worker_settings`: everything from :mod:`tests.settings`
except the databases, which come as JSON in ``LATER_WORKER_DATABASE`` (the test
database under test becomes ``default``). ``LATER["MAINTENANCE_MODULES"]``
adds the test-only pass of :mod:`tests.maintenance.probe_pass`.
"""

import json
import os

from tests.settings import *  # noqa: F403

DATABASES = {"default": json.loads(os.environ["LATER_WORKER_DATABASE"])}

LATER = {
    "NAMESPACE": "default",
    "DATABASE": "default",
    "MAINTENANCE_MODULES": ["tests.maintenance.probe_pass"],
}
