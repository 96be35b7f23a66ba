"""PostgreSQL's wake-up channel: ``LISTEN`` and the probe, on connections of their own.

A committed publish notifies ``WAKE_CHANNEL`` with its namespace as payload
(:mod:`later_django.storage.queue`). A waiting worker subscribes on a new
autocommit psycopg connection (Django's connection is left alone: a
``LISTEN`` must outlive every transaction the worker makes) and may notify a
probe payload from a second, short-lived connection to learn whether its
subscription receives anything at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import connections
from psycopg import sql

from later_django.storage.queries.queue import WAKE_CHANNEL

LISTEN = sql.SQL("LISTEN {}").format(sql.Identifier(WAKE_CHANNEL))
NOTIFY = "SELECT pg_notify(%(channel)s, %(payload)s)"


def own_connection(using: str, **overrides: Any) -> psycopg.Connection[Any]:
    """A new autocommit psycopg connection to the database of ``using`` (its own
    session: Django's connection is left alone); ``overrides`` replace connection
    parameters (e.g. ``dbname``)."""
    params = dict(connections[using].get_connection_params())
    # Django's cursor class and adapters context belong to its own connection.
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.connect(**{**params, **overrides}, autocommit=True)


def listening_connection(using: str) -> psycopg.Connection[Any]:
    """:func:`own_connection`, already in ``LISTEN`` on ``WAKE_CHANNEL``."""
    connection = own_connection(using)
    connection.execute(LISTEN)
    return connection


class PostgresSubscription:
    """The payloads arriving on one listening connection."""

    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self._connection = connection

    def payloads(self, timeout: float) -> Iterator[str]:
        for notification in self._connection.notifies(timeout=timeout):
            yield notification.payload


class PostgresWakeChannel:
    """:class:`~later_django.storage.driver.WakeChannel` of the alias ``using``."""

    def __init__(self, using: str) -> None:
        self.using = using

    @contextmanager
    def subscribe(self) -> Iterator[PostgresSubscription]:
        with listening_connection(self.using) as connection:
            yield PostgresSubscription(connection)

    def send_probe(self, payload: str) -> None:
        with own_connection(self.using) as sender:
            sender.execute(NOTIFY, {"channel": WAKE_CHANNEL, "payload": payload})
