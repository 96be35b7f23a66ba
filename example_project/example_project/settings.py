"""Settings of the later_django example project.

SQLite by default (a file beside this project, WAL mode, IMMEDIATE
transactions so several worker processes can share it). Set ``DATABASE_URL``
(dj-database-url form) for another database, e.g.
``postgres://root@127.0.0.1:5432/test``, ``mysql://root@127.0.0.1:3306/example``
(MariaDB/MySQL: READ COMMITTED and utf8mb4 are set below) or
``sqlite:////abs/path.sqlite3``.

The demo app (``demo/``) serves the page at ``/``; the admin is at ``/admin/``.
"""

import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "later-django-example-not-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "later_django",  # first: it provides django.utils.itercompat again for admin-tools
    "admin_tools",  # the admin index becomes later_django's dashboard (docs/dashboard.md)
    "admin_tools.theming",
    "admin_tools.menu",
    "admin_tools.dashboard",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "demo",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
ROOT_URLCONF = "example_project.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": False,  # admin-tools needs its loader listed explicitly
        "OPTIONS": {
            "loaders": [
                "admin_tools.template_loaders.Loader",
                "django.template.loaders.filesystem.Loader",
                "django.template.loaders.app_directories.Loader",
            ],
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]
WSGI_APPLICATION = "example_project.wsgi.application"
ADMIN_TOOLS_INDEX_DASHBOARD = "later_django.admin.dashboard.LaterIndexDashboard"

SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
}
if os.environ.get("DATABASE_URL"):
    DATABASES = {"default": dj_database_url.parse(os.environ["DATABASE_URL"])}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(BASE_DIR / "db.sqlite3"),
        }
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].setdefault("OPTIONS", {}).update(SQLITE_OPTIONS)
# MariaDB/MySQL: later_django's statements are written for READ COMMITTED (check E022
# refuses another level) and its text columns for utf8mb4. Django's defaults today, set
# here so that a copy of these settings keeps them whatever else it adds to OPTIONS.
MYSQL_OPTIONS = {"isolation_level": "read committed", "charset": "utf8mb4"}
if DATABASES["default"]["ENGINE"] == "django.db.backends.mysql":
    DATABASES["default"].setdefault("OPTIONS", {}).update(MYSQL_OPTIONS)
    # Django warns that MySQL "may not allow" a unique CharField over 255 characters;
    # later_django's keys are 500 (2,000 bytes in utf8mb4), within InnoDB's 3,072-byte
    # limit for the DYNAMIC rows its schema creates (docs/storage.md).
    SILENCED_SYSTEM_CHECKS = ["mysql.W003"]

TASKS = {
    "default": {
        "BACKEND": "later_django.backend.LaterBackend",
        "QUEUES": ["default"],
    }
}
LATER = {
    "NAMESPACE": "example",
    # The demo's partitioned order jobs: a customer's orders run one after another.
    "TOPICS": {"orders": {"partitions": 8}},
    # Synced by the worker when it starts; the demo page lists it.
    "RECURRING": {"demo-heartbeat": {"cron": "* * * * *", "task": "demo.tasks.heartbeat"}},
    # /later/metrics: staff users, or this bearer token (at least 24 characters) if set.
    "METRICS": {"TOKEN": os.environ.get("LATER_METRICS_TOKEN") or None},
}

# With DEBUG, Django logs a line per task state change; a 1,000-job burst would flood the
# demo's terminal, so django.tasks says only warnings. The worker logs via "later_django".
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "loggers": {"django.tasks": {"level": "WARNING"}},
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
