"""Settings for the test suite: a real SQLite file and, when reachable, a real PostgreSQL.

``default`` is a SQLite file in WAL mode with ``transaction_mode="IMMEDIATE"``.
``postgres`` comes from ``LATER_TEST_DATABASE_URL`` (default
``postgres://root@127.0.0.1:5432/test``). It is left out, and its tests are
skipped, only when no server answers and ``LATER_REQUIRE_POSTGRES`` is unset;
with the variable set (as ``.ci/run`` does) an unreachable server is an error.
``mariadb`` comes from ``LATER_TEST_MARIADB_URL`` (default
``mysql://root@127.0.0.1:3306/test``) the same way (``LATER_REQUIRE_MARIADB``): the
modules with their own MariaDB cases use it in the main lane, and the MariaDB lane
(``LATER_TEST_LANE=mariadb``) makes it the one ``db_alias`` (tests/conftest.py).
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import dj_database_url

from tests.pg_reachable import mariadb_problem, postgres_problem

SECRET_KEY = "later-django-tests"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = "tests.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "later_django",
    # The dashboard tests (tests/admin) render the admin-tools index dashboard.
    "admin_tools",
    "admin_tools.theming",
    "admin_tools.menu",
    "admin_tools.dashboard",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "OPTIONS": {
            "loaders": [
                "admin_tools.template_loaders.Loader",
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

STATIC_URL = "/static/"
# The default hasher (PBKDF2, a million rounds) takes about 0.3 s per password: every
# dashboard test makes one to three users. No test is about password strength.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
ADMIN_TOOLS_INDEX_DASHBOARD = "later_django.admin.dashboard.LaterIndexDashboard"

SQLITE_DIRECTORY_IS_TEMPORARY = not os.environ.get("LATER_TEST_SQLITE_DIR")
SQLITE_DIRECTORY = Path(
    os.environ.get("LATER_TEST_SQLITE_DIR") or tempfile.mkdtemp(prefix="later-")
)


def _remove_own_directory(directory: Path, creator: int) -> None:
    """At exit, the temporary directory this process made: every process that loads
    these settings without ``LATER_TEST_SQLITE_DIR`` (the suite's worker subprocesses)
    makes one. Not from a forked child, which shares the module but not the directory."""
    if os.getpid() == creator:
        shutil.rmtree(directory, ignore_errors=True)


if SQLITE_DIRECTORY_IS_TEMPORARY:
    atexit.register(_remove_own_directory, SQLITE_DIRECTORY, os.getpid())

SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
}
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(SQLITE_DIRECTORY / "later.sqlite3"),
        "OPTIONS": SQLITE_OPTIONS,
        "TEST": {"NAME": str(SQLITE_DIRECTORY / "test_later.sqlite3")},
    }
}

POSTGRES_URL = os.environ.get("LATER_TEST_DATABASE_URL", "postgres://root@127.0.0.1:5432/test")
POSTGRES_PROBLEM = postgres_problem(POSTGRES_URL)
if POSTGRES_PROBLEM is None:
    DATABASES["postgres"] = dj_database_url.parse(POSTGRES_URL)
    # Overridable so that two test runs on one server do not drop each other's database.
    DATABASES["postgres"]["TEST"] = {
        "NAME": os.environ.get("LATER_TEST_PG_NAME", "test_later_django")
    }
elif os.environ.get("LATER_REQUIRE_POSTGRES"):
    raise RuntimeError(
        f"LATER_REQUIRE_POSTGRES is set but PostgreSQL at {POSTGRES_URL} is unreachable: "
        f"{POSTGRES_PROBLEM}"
    )

# The server's ``test`` database (it exists on this machine and CI's, as PostgreSQL's):
# a command run in a subprocess with these settings runs Django's database checks,
# which connect to it.
MARIADB_URL = os.environ.get("LATER_TEST_MARIADB_URL", "mysql://root@127.0.0.1:3306/test")
MARIADB_PROBLEM = mariadb_problem(MARIADB_URL)
if MARIADB_PROBLEM is None:
    DATABASES["mariadb"] = dj_database_url.parse(MARIADB_URL)
    # READ COMMITTED: the isolation the driver requires (check E022).
    DATABASES["mariadb"]["OPTIONS"] = {"isolation_level": "read committed", "charset": "utf8mb4"}
    DATABASES["mariadb"]["TEST"] = {
        "NAME": os.environ.get("LATER_TEST_MARIADB_NAME", "test_later_django"),
        "CHARSET": "utf8mb4",
    }
elif os.environ.get("LATER_REQUIRE_MARIADB"):
    raise RuntimeError(
        f"LATER_REQUIRE_MARIADB is set but MariaDB at {MARIADB_URL} is unreachable: "
        f"{MARIADB_PROBLEM}"
    )

LATER = {"NAMESPACE": "default"}

TASKS = {
    "default": {
        "BACKEND": "later_django.backend.LaterBackend",
        "QUEUES": ["default", "emails", "reports"],
    }
}
