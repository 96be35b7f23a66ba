"""Settings of the project ``bench/bench.py`` runs: one system, one throw-away database.

Read from the environment (``bench.py`` sets them for its drivers and workers):

* ``BENCH_SYSTEM``: ``later_django`` (``LaterBackend``, app ``later_django``),
  ``django-tasks-db`` (``django_tasks_db.DatabaseBackend``, app ``django_tasks_db``)
  or ``procrastinate`` (app ``procrastinate.contrib.django``, PostgreSQL only). The
  first two are the ``default`` task backend, so ``bench_project.tasks`` serves both;
  Procrastinate has its own task API: its tasks are ``bench_project.procrastinate_tasks``
  (``PROCRASTINATE_IMPORT_PATHS``, so its worker imports them), deferred through its
  Django connector (Django's own connection: a ``defer()`` inside
  ``transaction.atomic()`` is part of that transaction).
* ``BENCH_DATABASE_URL``: ``sqlite:////abs/path.sqlite3``,
  ``postgres://root@127.0.0.1:5432/bench_later`` or
  ``mysql://root@127.0.0.1:3306/bench_later`` (dj-database-url form).
* ``BENCH_WORKER_POLL_INTERVAL`` (optional, seconds): ``LATER["WORKER_POLL_INTERVAL"]``,
  how often an idle later_django worker looks at the queue where the database has no
  notifications (MariaDB/MySQL); unset, later_django's default.
* ``BENCH_TOPICS``, ``BENCH_QUEUE_LIMITS``, ``BENCH_RETENTION`` (optional, JSON):
  ``LATER["TOPICS"]`` for ``partition_drain``, ``LATER["QUEUE_LIMITS"]`` for
  ``drain_limited``, ``LATER["RETENTION"]`` for ``bloat.py`` (finished records
  kept briefly, so the sweep deletes them during the run).
* ``BENCH_QUEUES`` (optional, JSON list): the ``LaterBackend``'s ``QUEUES`` (default
  ``["default"]``), for ``drain_other_queue``'s queues beside ``default``
  (``bench/backlog.py``); ``BENCH_WORKER_QUEUES`` is read by ``bench.py`` itself
  (``later_worker --queue`` for each).

PostgreSQL connections prepare a statement on the server at its fifth run
(``OPTIONS["prepare_threshold"] = 5``, what docs/operations.md recommends for a
direct connection), for every system alike. SQLite gets the options later_django
recommends and its tests use (WAL, ``transaction_mode="IMMEDIATE"``,
``synchronous=NORMAL``, a 20 s busy timeout). MariaDB/MySQL connections run at READ
COMMITTED with the ``utf8mb4`` character set (what later_django requires and its tests
use; Django's defaults too, spelled out here), for every system alike.
All systems keep their Django connections (``CONN_MAX_AGE``): django-tasks-db's worker
calls ``close_old_connections()`` around every task, which with Django's default
of 0 would reconnect for every task.
"""

import os

import dj_database_url

SYSTEM = os.environ.get("BENCH_SYSTEM", "later_django")
SYSTEMS = ("later_django", "django-tasks-db", "procrastinate")
if SYSTEM not in SYSTEMS:
    raise ValueError(f"BENCH_SYSTEM must be one of {SYSTEMS}, got {SYSTEM!r}")

SECRET_KEY = "later-django-bench-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("BENCH_DATABASE_URL", "postgres://root@127.0.0.1:5432/bench_later"),
        conn_max_age=600,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Server-side prepared statements at a statement's fifth run (psycopg's own
    # default; Django's is never), as a deployment with a direct connection sets
    # them: the same for every Django-based system of the bench.
    DATABASES["default"]["OPTIONS"] = {"prepare_threshold": 5}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.mysql":
    DATABASES["default"]["OPTIONS"] = {"isolation_level": "read committed", "charset": "utf8mb4"}
    # Django's warning that MariaDB "may not allow" a unique CharField over 255 characters
    # (later_django's 500-character keys: 2,000 bytes in utf8mb4, within InnoDB's 3,072
    # under its default DYNAMIC rows; the migration creates them). Printed by every
    # command, it would count as a problem line in every worker log.
    SILENCED_SYSTEM_CHECKS = ["mysql.W003"]

if SYSTEM == "later_django":
    INSTALLED_APPS = ["later_django"]
    TASKS = {"default": {"BACKEND": "later_django.backend.LaterBackend", "QUEUES": ["default"]}}
    if os.environ.get("BENCH_QUEUES"):  # backlog scenarios: the backend's queues, as JSON
        import json

        TASKS["default"]["QUEUES"] = json.loads(os.environ["BENCH_QUEUES"])
    LATER = {"NAMESPACE": "bench"}
    if os.environ.get("BENCH_TOPICS"):  # partition_drain: the topics, as JSON
        import json

        LATER["TOPICS"] = json.loads(os.environ["BENCH_TOPICS"])
    if os.environ.get("BENCH_QUEUE_LIMITS"):  # drain_limited: the limits, as JSON
        import json

        LATER["QUEUE_LIMITS"] = json.loads(os.environ["BENCH_QUEUE_LIMITS"])
    if os.environ.get("BENCH_WORKER_POLL_INTERVAL"):  # MariaDB latency at another poll
        LATER["WORKER_POLL_INTERVAL"] = float(os.environ["BENCH_WORKER_POLL_INTERVAL"])
    if os.environ.get("BENCH_RETENTION"):  # bloat: finished records kept briefly, as JSON
        import json

        LATER["RETENTION"] = json.loads(os.environ["BENCH_RETENTION"])
elif SYSTEM == "django-tasks-db":
    INSTALLED_APPS = ["django_tasks_db"]
    TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}
else:
    if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        raise ValueError("procrastinate has no SQLite connector: PostgreSQL only")
    # Its documented Django set-up: the app (its migrations run with ``migrate``; its
    # default connector is Django's connection) and the module of the tasks.
    INSTALLED_APPS = ["procrastinate.contrib.django"]
    PROCRASTINATE_IMPORT_PATHS = ["bench.bench_project.procrastinate_tasks"]
