"""Whether later_django's tables exist: asked only on an error path or at a process's start.

A database that was never migrated answers every statement with "no such table"
(SQLite's ``OperationalError``, PostgreSQL's ``ProgrammingError``). The
surfaces (enqueue, ``later_status``, the admin) catch those errors and ask
:func:`raise_if_tables_missing`, which reads the catalog through Django's
``connection.introspection`` and raises :class:`~later_django.exceptions.TablesMissing`
("run manage.py migrate") when later_django's tables are absent; long-running
commands ask :func:`missing_tables` once at start. No statement of the job path
pays for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.apps import apps
from django.db import DatabaseError, OperationalError, ProgrammingError, connections

from later_django.exceptions import TablesMissing


def later_tables() -> list[str]:
    """The names of later_django's tables (one model per table), sorted."""
    models = apps.get_app_config("later_django").get_models()
    return sorted(model._meta.db_table for model in models)


def missing_tables(using: str) -> list[str]:
    """later_django's tables that the database ``using`` lacks (one catalog read).

    Inside a transaction the database will not answer any more (PostgreSQL after
    an error; Django's broken ``atomic`` block), it asks on a new connection of its
    own, closed at once. Raises ``DatabaseError`` when neither can answer."""
    try:
        present = set(connections[using].introspection.table_names())
    except DatabaseError:
        fresh = connections.create_connection(using)
        try:
            present = set(fresh.introspection.table_names())
        finally:
            fresh.close()
    return [table for table in later_tables() if table not in present]


def raise_if_tables_missing(using: str, error: BaseException) -> None:
    """Raises ``TablesMissing`` (chained to ``error``) when ``error`` is the kind a
    missing table raises and later_django's tables are absent from ``using``;
    otherwise returns, and the caller re-raises ``error``. Never raises anything
    else: a database that cannot say is left to the original error."""
    if not isinstance(error, OperationalError | ProgrammingError):
        return
    try:
        missing = missing_tables(using)
    except DatabaseError:
        return
    if missing:
        raise TablesMissing(using, missing) from error


@contextmanager
def naming_missing_tables(using: str) -> Iterator[None]:
    """Turns the "no such table" error of an unmigrated database ``using`` inside the
    block into ``TablesMissing``; every other error passes unchanged."""
    try:
        yield
    except DatabaseError as error:
        raise_if_tables_missing(using, error)
        raise
