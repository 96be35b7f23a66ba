"""The web side of the PgBouncer tests: a process of its own whose only database,
``default``, reaches the test database through a pgbouncer in transaction pooling
(settings :mod:`tests.pgbouncer.pooled_settings`).

``python -m tests.pgbouncer.web_side SCENARIO ARGUMENTS_JSON`` runs one scenario
and prints its outcome as one JSON line; the test asserts on it and on what the
database holds. Jobs are tasks of :mod:`tests.worker.tasks`.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import time
from datetime import timedelta
from typing import Any


class RolledBack(Exception):
    """Raised inside ``transaction.atomic()`` to roll an enqueue back."""


def backend_pid() -> int:
    """The PostgreSQL backend serving this statement (pgbouncer picks one per transaction)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def pin_last_server() -> Any:
    """A second client of the pool that opens a transaction and keeps it: it takes
    the server connection the web side used last (pgbouncer reuses the most
    recently released one first), so the web side's next transaction runs on a
    different server connection."""
    import psycopg
    from django.db import connection

    params = connection.get_connection_params()
    for own in ("cursor_factory", "context"):  # Django's, of its own connection
        params.pop(own)
    holder = psycopg.connect(**params)
    holder.execute("SELECT 1")
    return holder


def enqueue(path: str, rounds: int, per_round: int, many: int) -> dict[str, Any]:
    """One rolled-back enqueue; then ``rounds`` rounds of ``per_round`` single enqueues
    (one transaction each), every round on another server connection; then
    ``enqueue_many`` of ``many`` jobs in one ``transaction.atomic()`` and a job delayed
    by an hour. A database error stops the scenario and is reported."""
    from django.db import DatabaseError, transaction
    from django.utils import timezone

    from later_django.api import enqueue_many
    from tests.worker.tasks import record

    outcome: dict[str, Any] = {"jobs": [], "backends": [], "error": None}
    with contextlib.suppress(RolledBack), transaction.atomic():
        outcome["rolled_back"] = record.enqueue(path, "rolled back").id
        raise RolledBack
    holders = []
    try:
        for number in range(rounds):
            if number:
                holders.append(pin_last_server())
            for index in range(per_round):
                outcome["jobs"].append(record.enqueue(path, f"single {number}.{index}").id)
            outcome["backends"].append(backend_pid())
        with transaction.atomic():
            batch = enqueue_many(record, [((path, f"many {n}"), {}) for n in range(many)])
        outcome["many"] = [result.id for result in batch]
        later = timezone.now() + timedelta(hours=1)
        outcome["delayed"] = record.using(run_after=later).enqueue(path, "delayed").id
    except DatabaseError as error:
        outcome["error"] = f"{type(error).__name__}: {error}"
    finally:
        for holder in holders:
            holder.close()
    return outcome


def paced_enqueue(path: str, labels: list[str], pause: float) -> dict[str, float]:
    """Enqueues one job per label, ``pause`` seconds apart; returns when each
    enqueue had committed (``time.time()``), by label."""
    from tests.worker.tasks import record

    committed = {}
    for label in labels:
        time.sleep(pause)
        record.enqueue(path, label)
        committed[label] = time.time()
    return committed


def results(ids: list[str]) -> dict[str, Any]:
    """``get_result`` of each job: its status and (once successful) return value, by id."""
    from later_django.compat.tasks import TaskResultStatus
    from tests.worker.tasks import record

    found = {job_id: record.get_result(job_id) for job_id in ids}
    return {
        job_id: {
            "status": result.status.name,
            "return_value": (
                result.return_value if result.status == TaskResultStatus.SUCCESSFUL else None
            ),
        }
        for job_id, result in found.items()
    }


def admin(delayed: str) -> dict[str, Any]:
    """A staff user with ``later_django.manage_jobs`` opens the admin index, the
    dashboard, every stage's list and the delayed job's page, then presses *Run now*
    on it with the CSRF token of that page's form (a client that enforces CSRF)."""
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.urls import reverse

    from later_django.overview.figures import STAGES
    from tests.admin.conftest import _user

    setup_test_environment()  # the test client's host, "testserver", is allowed
    client = Client(enforce_csrf_checks=True)
    client.force_login(_user("pgbouncer-manager", staff=True, manage=True))
    pages = [
        reverse("admin:index"),
        reverse("later_django:dashboard"),
        *(reverse("later_django:job_list", args=[stage]) for stage in STAGES),
        reverse("later_django:job_detail", args=[delayed]),
    ]
    responses = {page: client.get(page) for page in pages}
    detail = responses[pages[-1]].content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', detail).group(1)
    run_now = reverse("later_django:job_run_now", args=[delayed])
    refused = client.post(run_now).status_code  # no token: CSRF refuses it
    pressed = client.post(run_now, {"csrfmiddlewaretoken": token})
    return {
        "pages": {page: response.status_code for page, response in responses.items()},
        "dashboard": responses[pages[1]].content.decode(),
        "without_token": refused,
        "run_now": pressed.status_code,
    }


SCENARIOS = {"enqueue": enqueue, "paced_enqueue": paced_enqueue, "results": results, "admin": admin}


def main() -> None:
    import django

    django.setup()
    scenario, arguments = sys.argv[1], json.loads(sys.argv[2])
    outcome = SCENARIOS[scenario](**arguments)
    print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    main()
