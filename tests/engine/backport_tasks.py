"""Tasks declared through the django-tasks backport's ``@task``, as Wagtail declares
its own even on Django 6 (imported only where the backport is installed)."""

from __future__ import annotations

import django_tasks
from django.core.exceptions import ObjectDoesNotExist

from tests.engine.tasks import append_line


@django_tasks.task
def double(number: int) -> int:
    return 2 * number


@django_tasks.task(
    retry={"max_retries": 3, "give_up_on": ["django.core.exceptions.ObjectDoesNotExist"]}
)
def index_deleted_object(path: str) -> None:
    """Like a search index update whose object was deleted before the job ran."""
    append_line(path, "ran")
    raise ObjectDoesNotExist("the object was deleted")
