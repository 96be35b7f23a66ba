"""One answer about which queues a namespace has: the admin's queues page,
``later_queue list`` (text and ``--json``), ``later_status --json`` and the metrics
view list the same queues, the configured ones (idle ones with zeroes) and those
the data shows (messages, a pause, running jobs)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client, override_settings

from later_django import api
from later_django.core.clock import now_ms
from later_django.models import StageCount
from later_django.overview.queues import configured_queues
from later_django.storage.stores import stores_for
from later_django.storage.types import JobIndexMetricsBatch, TaskMinuteSample, WorkerRow
from tests.engine import tasks
from tests.metrics.scrape import samples_of, value

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

#: tests.settings' TASKS names default, emails and reports; QUEUE_LIMITS adds slow.
CONFIGURED = ["default", "emails", "reports", "slow"]


@pytest.fixture
def configured_db(later_db: str) -> Iterator[str]:
    """``later_db`` whose ``LATER["QUEUE_LIMITS"]`` names one more queue."""
    with override_settings(
        LATER={
            "NAMESPACE": "default",
            "DATABASE": later_db,
            "QUEUE_LIMITS": {"slow": {"concurrency": 1}},
        }
    ):
        yield later_db


def command(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def admin_page_queues(client: Client) -> list[str]:
    html = client.get("/admin/later_django/queues/").content.decode()
    return re.findall(r'<td class="later-queue-name"><code>([^<]*)</code>', html)


def queue_list_text_queues() -> list[str]:
    lines = command("later_queue", "list").splitlines()
    assert lines[0].split()[0] == "queue", lines
    return [line.split()[0] for line in lines[1:]]


def queue_list_json() -> dict[str, dict]:
    document = json.loads(command("later_queue", "list", "--json"))
    return {queue["queue"]: queue for queue in document["queues"]}


def status_json() -> dict[str, dict]:
    document = json.loads(command("later_status", "--json"))
    return {queue["queue_name"]: queue for queue in document["queues"]}


def metrics_ready(client: Client) -> dict[str, float]:
    response = client.get("/later/metrics")
    assert response.status_code == 200
    samples = samples_of(response.content.decode())
    return {
        dict(labels)["queue"]: sample
        for (name, labels), sample in samples.items()
        if name == "later_queue_ready_jobs" and dict(labels)["namespace"] == "default"
    }


def every_answer(client: Client) -> dict[str, list[str]]:
    """The queue names each of the four surfaces lists."""
    return {
        "admin page": admin_page_queues(client),
        "later_queue list": queue_list_text_queues(),
        "later_queue list --json": sorted(queue_list_json()),
        "later_status --json": sorted(status_json()),
        "metrics": sorted(metrics_ready(client)),
    }


@pytest.fixture
def staff(configured_db: str) -> Client:
    client = Client()
    client.force_login(User.objects.create_user("ops", password="x", is_staff=True))
    return client


def test_configured_queues_are_the_backends_queues_and_the_limited_ones(
    configured_db: str,
) -> None:
    assert sorted(configured_queues()) == CONFIGURED


def test_a_fresh_namespace_lists_its_configured_queues_idle_in_all_four(
    staff: Client, configured_db: str
) -> None:
    assert every_answer(staff) == dict.fromkeys(every_answer(staff), CONFIGURED)
    assert all(queue["ready"] == 0 for queue in queue_list_json().values())
    assert all(
        (queue["ready"], queue["running"], queue["paused_at_ms"]) == (0, 0, None)
        for queue in status_json().values()
    )
    assert set(metrics_ready(staff).values()) == {0}
    samples = samples_of(staff.get("/later/metrics").content.decode())
    for name in CONFIGURED:
        labels = {"namespace": "default", "queue": name}
        assert value(samples, "later_queue_running_jobs", **labels) == 0
        assert value(samples, "later_queue_paused", **labels) == 0


def test_queues_seen_in_the_data_join_the_configured_ones_in_all_four(
    staff: Client, configured_db: str
) -> None:
    tasks.add_on_emails.enqueue(1, 2)
    api.pause_queue("held", by="ops")
    now = now_ms()
    stores_for(configured_db).executions.worker_heartbeat(
        "default",
        WorkerRow("vm:1:A", "vm", 1, 4, ["busy"], 1, now - 1_000, now, busy_queues={"busy": 1}),
    )
    # Attempts of the last hour alone do not make a queue: no surface lists "gone".
    stores_for(configured_db).metrics.record_batch(
        "default",
        JobIndexMetricsBatch(
            task_minutes=[TaskMinuteSample("t", "succeeded", "", now, 3, 2, 1, 1, "", "gone")]
        ),
    )
    expected = sorted([*CONFIGURED, "busy", "held"])
    assert every_answer(staff) == dict.fromkeys(every_answer(staff), expected)
    listed = status_json()
    assert listed["emails"]["ready"] == 1
    assert listed["busy"]["running"] == 1
    assert listed["held"]["paused_at_ms"] is not None
    assert metrics_ready(staff)["emails"] == 1


def test_another_namespace_lists_only_what_its_data_shows(configured_db: str) -> None:
    """The configured queues are LATER["NAMESPACE"]'s; these settings do not configure
    another namespace read with them."""
    # A namespace later_status reports has data (a typo is refused): a counter row.
    StageCount.objects.using(configured_db).create(namespace="elsewhere", stage="success")
    document = json.loads(command("later_status", "--json", "--namespace", "elsewhere"))
    assert document["queues"] == []
