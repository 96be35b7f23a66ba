"""``manage.py later_queue pause|resume|list``: stop and restart the claiming of queues.

``pause NAME [NAME ...]`` stops every worker of the namespace, on every host,
from claiming those queues' messages within half a second; jobs already running
finish and enqueues still succeed. ``resume NAME [NAME ...]`` lets them claim
again (and wakes idle workers). ``list`` shows each queue of the namespace, the
same set as the admin's queues page, ``later_status`` and the metrics view
(:mod:`later_django.overview.queues`: the configured queues, idle ones included,
and every queue with messages, a pause or running jobs): ready messages, the
oldest one's age, and since when and by whom it is paused (``--json``: the same
as one JSON object). The pause is stored in the
database: it survives restarts of workers and of the database. Exit status 1
for an invalid name, or a name that is not a known queue (configured, or seen in the
data: :func:`~later_django.overview.queues.known_queue`, the dashboard's rule too);
``--by`` is at most 200 characters and not empty.
"""

from __future__ import annotations

import getpass
import json
import socket
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from later_django import api, inputs
from later_django.conf import later_settings
from later_django.exceptions import TablesMissing
from later_django.management.common import (
    age_seconds,
    later_django_version,
    text_table,
    utc_time,
)
from later_django.overview.queues import known_queue, read_queues
from later_django.storage.tables import naming_missing_tables


class Command(BaseCommand):
    help = "Pause or resume the claiming of queues, or list the queues and their pauses."

    def get_version(self) -> str:
        return later_django_version()

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["pause", "resume", "list"])
        parser.add_argument(
            "queues",
            nargs="*",
            metavar="NAME",
            help="queue names: configured queues or queues seen in the data",
        )
        parser.add_argument(
            "--by",
            help="who pauses, 1 to 200 characters (shown by list; default: user@host of "
            "this command)",
        )
        parser.add_argument("--json", action="store_true", help="list as one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        action, names = options["action"], options["queues"]
        if action == "list" and names:
            raise CommandError("list takes no queue names")
        if action != "list" and not names:
            raise CommandError(f"{action} needs at least one queue name")
        by = options["by"]
        try:
            if by is not None:
                by = inputs.text("--by", by, max_length=inputs.NAME_LENGTH)
        except inputs.InputError as error:
            raise CommandError(str(error)) from error
        try:
            with naming_missing_tables(later_settings().database):
                self.stdout.write(self._run(action, names, by, options["json"]))
        except TablesMissing as error:
            raise CommandError(str(error)) from error
        except ValueError as error:  # an InputError too: a name that is not a known queue
            raise CommandError(str(error)) from error

    def _run(self, action: str, names: list[str], by: str | None, as_json: bool) -> str:
        if action == "list":
            return self._listing(as_json)
        # Every name is checked before any is paused: one unknown name changes nothing.
        for name in names:
            known_queue("NAME", name)
        lines = []
        for name in names:
            if action == "pause":
                changed = api.pause_queue(name, by=by or _who())
                lines.append(f"paused {name!r}" if changed else f"{name!r} was already paused")
            else:
                changed = api.resume_queue(name)
                lines.append(f"resumed {name!r}" if changed else f"{name!r} was not paused")
        return "\n".join(lines)

    def _listing(self, as_json: bool) -> str:
        namespace = later_settings().namespace
        figures, _ = read_queues(namespace=namespace)
        if as_json:
            queues = [
                {
                    "queue": queue.queue_name,
                    "ready": queue.ready,
                    "oldest_ready_age_ms": queue.oldest_ready_age_ms,
                    "paused": queue.paused_at_ms is not None,
                    "paused_at_ms": queue.paused_at_ms,
                    "paused_by": queue.paused_by,
                }
                for queue in figures
            ]
            return json.dumps({"namespace": namespace, "queues": queues}, sort_keys=True)
        if not figures:
            return (
                f"namespace {namespace!r} has no configured queue and no queue with "
                "messages, a pause or running jobs"
            )
        rows = [
            [
                queue.queue_name,
                queue.ready,
                age_seconds(queue.oldest_ready_age_ms),
                "paused" if queue.paused_at_ms is not None else "claiming",
                utc_time(queue.paused_at_ms),
                queue.paused_by or "-",
            ]
            for queue in figures
        ]
        headers = ["queue", "ready", "oldest ready (s)", "state", "paused since", "paused by"]
        return "\n".join(text_table(headers, rows))


def _who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"
