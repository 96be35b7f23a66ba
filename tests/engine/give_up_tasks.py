"""Tasks whose retry policies name exceptions (``give_up_on``, ``retry_on``).

Each appends a line to the file at ``path`` every time it runs, so a test counts the
attempts that really called it, then raises the exception ``kind`` names (see
:data:`RAISED`), with three immediate retries left after a first failure.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import ObjectDoesNotExist

from later_django.compat.tasks import task
from tests.engine.tasks import Boom, append_line

#: What each ``kind`` raises: a class named in a policy, a model's ``DoesNotExist``
#: (a subclass of ``ObjectDoesNotExist``, as ``Page.DoesNotExist`` is), and others.
RAISED: dict[str, type[Exception]] = {
    "missing": ObjectDoesNotExist,
    "model": User.DoesNotExist,
    "boom": Boom,
    "reset": ConnectionResetError,
    "key": KeyError,
    "index": IndexError,
}
IMMEDIATE = {"max_retries": 3, "backoff": "immediate"}


def _raise(path: str, kind: str) -> None:
    append_line(path, kind)
    raise RAISED[kind](f"{kind} on purpose")


@task(retry={**IMMEDIATE, "give_up_on": ["django.core.exceptions.ObjectDoesNotExist"]})
def give_up_on_missing(path: str, kind: str) -> None:
    _raise(path, kind)


@task(retry={**IMMEDIATE, "retry_on": ["builtins.ConnectionError"]})
def retry_on_connection(path: str, kind: str) -> None:
    _raise(path, kind)


@task(
    retry={**IMMEDIATE, "retry_on": ["builtins.LookupError"], "give_up_on": ["builtins.KeyError"]}
)
def retry_lookups_but_keys(path: str, kind: str) -> None:
    """``KeyError`` is a ``LookupError``: in both lists, ``give_up_on`` wins."""
    _raise(path, kind)


@task
def raise_with_server_policy(path: str, kind: str) -> None:
    """No policy of its own: ``LATER["RETRY"]`` decides."""
    _raise(path, kind)
