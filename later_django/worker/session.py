"""The worker's own connection commits asynchronously, once per (re)connection.

Everything the main thread's connection writes is bookkeeping that delivery
repairs: a claim, a start, an outcome, a promotion. A server crash can lose
only the last fraction of a second of such commits (never a job: enqueues are
made on other connections and stay synchronous), and what is lost is
delivered again: a claim lapses, a job runs again - the at-least-once
contract every handler already honours. In exchange the job path does not
wait for a WAL flush three times per batch. The setting is the driver's
(:meth:`~later_django.storage.driver.Driver.relax_commit_durability`; nothing
where the database has none). ``LATER["WORKER_SYNCHRONOUS_COMMIT"] = True``
keeps every commit synchronous.
"""

from __future__ import annotations

from later_django.worker.options import WorkerContext


class SessionSetup:
    """Relaxes commit durability on each new connection of the calling thread."""

    def __init__(self, context: WorkerContext) -> None:
        self.driver = context.driver
        self.enabled = not context.settings.worker_synchronous_commit
        self._prepared_for: object = None

    def prepare(self) -> None:
        """Connects if need be; a connection not seen before gets the setting
        (one statement), one already set costs nothing."""
        if not self.enabled:
            return
        connection = self.driver.connection
        connection.ensure_connection()
        if connection.connection is self._prepared_for:
            return
        self.driver.relax_commit_durability()
        self._prepared_for = connection.connection
