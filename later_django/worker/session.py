"""The worker's own connection is a session set up once per (re)connection.

**Durability.** Everything the main thread's connection writes is bookkeeping
that delivery repairs: a claim, a start, an outcome, a promotion. A server crash
can lose only the last fraction of a second of such commits (never a job:
enqueues are made on other connections and stay synchronous), and what is lost
is delivered again: a claim lapses, a job runs again - the at-least-once
contract every handler already honours. In exchange the job path does not wait
for a WAL flush three times per batch. The setting is the driver's
(:meth:`~later_django.storage.driver.Driver.relax_commit_durability`; nothing
where the database has none). ``LATER["WORKER_SYNCHRONOUS_COMMIT"] = True``
keeps every commit synchronous.

**Prepared statements.** The same few statements (claim, start, outcome) run
thousands of times on this connection, so it keeps them prepared on the server
(:meth:`~later_django.storage.driver.Driver.keep_statements_prepared`). A worker
needs a session of its own anyway (``LISTEN``, the durability setting above), so
this is safe wherever the worker is; ``LATER["WORKER_PREPARED_STATEMENTS"] = False``
turns it off.

**Lock waits.** Where a worker's statement can wait on a row lock another
transaction holds (MySQL/MariaDB: the server waits 50 s by default), the session
waits only briefly (:meth:`~later_django.storage.driver.Driver.bound_lock_waits`);
a turn that times out runs again (:mod:`later_django.worker.conflicts`).
"""

from __future__ import annotations

from later_django.worker.options import WorkerContext


class SessionSetup:
    """Sets up each new connection of the calling thread as the worker's session."""

    def __init__(self, context: WorkerContext) -> None:
        self.driver = context.driver
        self.relax_durability = not context.settings.worker_synchronous_commit
        self.keep_prepared = context.settings.worker_prepared_statements
        self._set_up_for: object = None

    def set_up(self) -> None:
        """Connects if need be; a connection not seen before gets the settings (at
        most one statement per setting the driver has), one already set up costs nothing."""
        connection = self.driver.connection
        connection.ensure_connection()
        if connection.connection is self._set_up_for:
            return
        if self.relax_durability:
            self.driver.relax_commit_durability()
        if self.keep_prepared:
            self.driver.keep_statements_prepared()
        self.driver.bound_lock_waits()
        self._set_up_for = connection.connection
