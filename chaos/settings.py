"""Django settings of every process the fault suite starts (workers and agents).

The database comes from ``CHAOS_DATABASE`` (JSON of one ``DATABASES`` entry,
built by :mod:`chaos.databases`); it is the only alias, ``default``. Jobs that
lost their worker are retried at once (``backoff: immediate``) and often
enough that no fault of a cell exhausts them.
"""

import json
import os

SECRET_KEY = "later-django-chaos"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = ["later_django"]

DATABASES = {"default": json.loads(os.environ["CHAOS_DATABASE"])}

#: Queues: ``exit`` and ``slow`` let the poison cell choose which worker runs what.
QUEUES = ["default", "exit", "slow"]
TASKS = {"default": {"BACKEND": "later_django.backend.LaterBackend", "QUEUES": QUEUES}}

LATER = {
    "NAMESPACE": "chaos",
    "DATABASE": "default",
    "RETRY": {"max_retries": 25, "backoff": "immediate"},
}
