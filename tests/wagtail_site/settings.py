"""A Wagtail site set up as docs/integrations/wagtail.md says: Wagtail's own tasks run by
later_worker, with the guide's per-task policy, and later_django in Wagtail's admin.

The database comes from ``WAGTAIL_SITE_DATABASE_URL`` (a SQLite file or a PostgreSQL
database); tests/test_wagtail_site.py runs ``django-admin`` and ``later_worker`` of this
module in subprocesses.
"""

from __future__ import annotations

import os

import dj_database_url

SECRET_KEY = "wagtail-site-test-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = "tests.wagtail_site.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

DATABASES = {"default": dj_database_url.parse(os.environ["WAGTAIL_SITE_DATABASE_URL"])}
ON_POSTGRES = DATABASES["default"]["ENGINE"].endswith("postgresql")
if not ON_POSTGRES:
    # later_django's writers take the write lock when their transaction begins (W001).
    DATABASES["default"]["OPTIONS"] = {"transaction_mode": "IMMEDIATE", "timeout": 30}

# Wagtail's apps that pages, search and the admin's home page need (`wagtail start`
# adds forms, redirects and snippets: more migrations, nothing this site uses).
INSTALLED_APPS = [
    "tests.wagtail_site.home",
    "later_django",
    "later_django.contrib.wagtail",
    "wagtail.sites",
    "wagtail.users",
    "wagtail.documents",
    "wagtail.images",
    "wagtail.search",
    "wagtail.admin",
    "wagtail",
    "modelcluster",
    "taggit",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
]
if ON_POSTGRES:
    # Wagtail's database search backend uses PostgreSQL's full-text search through it.
    INSTALLED_APPS.append("django.contrib.postgres")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
STATIC_URL = "/static/"
WAGTAIL_SITE_NAME = "later_django's Wagtail test site"
WAGTAILADMIN_BASE_URL = "http://127.0.0.1"
WAGTAILSEARCH_BACKENDS = {"default": {"BACKEND": "wagtail.search.backends.database"}}

# Wagtail's tasks go to later_django: the guide's settings, as a team would write them.
TASKS = {
    "default": {
        "BACKEND": "later_django.backend.LaterBackend",
        "QUEUES": ["default", "wagtail"],
    }
}
PENDING_PER_ARGUMENTS = {"key": "arguments", "while": ["delayed", "enqueued", "requeued"]}
LATER = {
    "TASK_POLICIES": {
        # Every Wagtail and search-index task: their own queue, two at a time, and no
        # retries for an object deleted before its job ran.
        "wagtail.*": {
            "queue": "wagtail",
            "concurrency": 2,
            "retry": {
                "max_retries": 3,
                "give_up_on": ["django.core.exceptions.ObjectDoesNotExist"],
            },
        },
        "modelsearch.*": {
            "queue": "wagtail",
            "retry": {
                "max_retries": 3,
                "give_up_on": ["django.core.exceptions.ObjectDoesNotExist"],
            },
        },
        # One pending index update per object: a page saved five times before the
        # worker gets to it is indexed once. Not while it runs: an edit made then is
        # indexed again by a new job (the running one may have read the object already).
        "wagtail.tasks.update_reference_index_task": {"unique": PENDING_PER_ARGUMENTS},
        "modelsearch.tasks.insert_or_update_object_task": {"unique": PENDING_PER_ARGUMENTS},
    }
}
