"""``later_worker`` that loses its database between its first claim and that claim's start.

Run as ``python -m tests.worker.cut_off_worker [later_worker options]`` with the
environment of :class:`tests.worker.test_worker_process.Workers`. Right after
the first claim, before its start is written, the worker's database becomes
unreachable for ``LATER_CUT_OFF_SECONDS`` (default 2), for real:

- PostgreSQL: the database stops accepting connections (``ALLOW_CONNECTIONS
  false``) and the worker's own backend is terminated;
- SQLite: another connection holds the write lock (``BEGIN EXCLUSIVE``) longer
  than the worker's busy timeout (the test passes a short one);
- MySQL/MariaDB: the worker reaches the server through a TCP relay of this process's
  own (:class:`Relay`), which drops every connection and refuses new ones: the
  outage a network partition makes, without touching the shared server.

So the plan fails (it reads the records) and so does the immediate hand-back; what the worker does
with the claimed messages afterwards is what the test watches. With
``LATER_CUT_OFF_AT=start_write`` the database goes away later: once the batch is
planned (PostgreSQL: and its jobs launched), just before its start write.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import sqlite3
import sys
import threading
import time

import django


class Relay:
    """A TCP relay on 127.0.0.1 to ``(host, port)``; :meth:`cut` drops every connection
    through it and refuses new ones (accepted and closed at once) for a while."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.refusing_until = 0.0
        self.lock = threading.Lock()
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self, seconds: float) -> None:
        with self.lock:
            self.refusing_until = time.monotonic() + seconds
            for sock in self.open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self.open.clear()

    def _accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            if time.monotonic() < self.refusing_until:
                client.close()
                continue
            server = socket.create_connection(self.upstream)
            with self.lock:
                self.open += [client, server]
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def through_relay() -> Relay | None:
    """On MySQL, points the worker's database settings at a :class:`Relay` to the
    server (before Django reads them)."""
    database = json.loads(os.environ["LATER_WORKER_DATABASE"])
    if "mysql" not in database["ENGINE"]:
        return None
    relay = Relay(database.get("HOST") or "127.0.0.1", int(database.get("PORT") or 3306))
    database.update(HOST="127.0.0.1", PORT=str(relay.port))
    os.environ["LATER_WORKER_DATABASE"] = json.dumps(database)
    return relay


def cut_off_postgres(using: str, seconds: float) -> None:
    from django.db import connections

    from later_django.storage.postgres.listener import own_connection

    connection = connections[using]
    database = connection.settings_dict["NAME"]
    backend_pid = connection.connection.info.backend_pid
    admin = own_connection(using, dbname="postgres")
    admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
    admin.execute("SELECT pg_terminate_backend(%s)", [backend_pid])

    def restore() -> None:
        time.sleep(seconds)
        admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
        admin.close()

    threading.Thread(target=restore).start()


def cut_off_sqlite(using: str, seconds: float) -> None:
    from django.db import connections

    locker = sqlite3.connect(
        connections[using].settings_dict["NAME"], isolation_level=None, check_same_thread=False
    )
    locker.execute("BEGIN EXCLUSIVE")

    def release() -> None:
        time.sleep(seconds)
        locker.execute("ROLLBACK")
        locker.close()

    threading.Thread(target=release).start()


def main() -> None:
    relay = through_relay()
    django.setup()
    from django.core.management import call_command
    from django.db import connections

    from later_django.engine.execution import start as execution_start
    from later_django.worker import loop

    seconds = float(os.environ.get("LATER_CUT_OFF_SECONDS", "2"))
    starts = 0

    def cut(using: str, what: str) -> None:
        nonlocal starts
        starts += 1
        if starts == 1:
            vendor = connections[using].vendor
            if relay is not None:
                relay.cut(seconds)
            elif vendor == "postgresql":
                cut_off_postgres(using, seconds)
            else:
                cut_off_sqlite(using, seconds)
            print(f"cut off the database for {seconds}s {what}", flush=True)

    if os.environ.get("LATER_CUT_OFF_AT") == "start_write":
        # Later: the batch is planned (its records read), its start not yet written.
        real_commit = execution_start.BatchStart.commit

        def commit(start):  # type: ignore[no-untyped-def]
            cut(start.worker.stores.using, f"before the start write of {len(start.started)}")
            real_commit(start)

        execution_start.BatchStart.commit = commit  # type: ignore[method-assign]
    else:
        real_plan_batch = loop.plan_batch

        def plan_batch(messages, **options):  # type: ignore[no-untyped-def]
            cut(options["stores"].using, f"after claiming {len(messages)}")
            # Without the claim's record hints (PostgreSQL) the plan reads the
            # records, so it meets the outage on both databases.
            unhinted = [dataclasses.replace(message, record=None) for message in messages]
            return real_plan_batch(unhinted, **options)

        loop.plan_batch = plan_batch
    call_command("later_worker", *sys.argv[1:])


if __name__ == "__main__":
    main()
