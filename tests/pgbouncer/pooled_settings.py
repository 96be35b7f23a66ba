"""Settings of the processes the PgBouncer tests start (web side and workers).

:mod:`tests.worker.worker_settings` (its ``default`` is the test database from
``LATER_WORKER_DATABASE``), with the keys of ``LATER_PGBOUNCER_ROUTE`` (JSON:
``HOST``, ``PORT``, ``OPTIONS``…) laid over ``default``, so that it reaches the
same database through a pgbouncer of the tests.
"""

import json
import os

from tests.worker.worker_settings import *  # noqa: F403
from tests.worker.worker_settings import DATABASES

DATABASES = {"default": {**DATABASES["default"], **json.loads(os.environ["LATER_PGBOUNCER_ROUTE"])}}
