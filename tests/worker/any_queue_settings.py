"""Worker settings (:mod:`tests.worker.worker_settings`) with ``QUEUES: []``: any queue name."""

from tests.worker.worker_settings import *  # noqa: F403

TASKS = {"default": {"BACKEND": "later_django.backend.LaterBackend", "QUEUES": []}}
