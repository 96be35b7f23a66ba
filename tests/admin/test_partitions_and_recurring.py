"""The partitions and recurring panels with real topic partitions and recurring jobs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from later_django.api import enqueue_to_partition, schedule_recurring
from later_django.core.topics import partition_for_key
from later_django.engine.topics import register_topic
from later_django.overview.snapshot import read_overview
from later_django.storage.stores import stores_for
from tests.engine import tasks

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

TOPIC = "orders"
PARTITIONS = 4


@pytest.fixture
def topic_db(later_db: str) -> Iterator[str]:
    later = {"NAMESPACE": "default", "DATABASE": later_db, "TOPICS": {TOPIC: {"partitions": 4}}}
    with override_settings(LATER=later):
        register_topic(stores_for(later_db), "default", TOPIC, PARTITIONS)
        yield later_db


def panel(html: str, name: str) -> str:
    return html.split(f'id="later-panel-{name}"', 1)[1].split("</section>", 1)[0]


def test_the_partitions_panel_shows_heads_backlog_and_blocked_partitions(
    manager_client: Client, topic_db: str
) -> None:
    queued = [enqueue_to_partition(TOPIC, "alice", tasks.add, n, 1) for n in range(3)]
    later = tasks.add.using(run_after=timezone.now() + timedelta(hours=1))
    blocked_key = next(
        key
        for key in ("bob", "carol", "dave", "erin", "frank")
        if partition_for_key(key, PARTITIONS) != partition_for_key("alice", PARTITIONS)
    )
    delayed = enqueue_to_partition(TOPIC, blocked_key, later, 5, 5)
    html = manager_client.get(reverse("later_django:dashboard")).content.decode()
    partitions = panel(html, "partitions")
    assert f"{TOPIC} <span" in partitions and "(4 partitions)" in partitions
    rows = re.findall(r"<tr( class=\"later-blocked\")?>(.*?)</tr>", partitions, re.S)
    by_head = {}
    for blocked, row in rows:
        head = re.search(r"/job/(\w+)/", row)
        if head:
            by_head[head.group(1)] = (bool(blocked), row)
    assert set(by_head) == {queued[0].id, delayed.id}
    assert by_head[delayed.id][0] is True
    assert "yes (delayed head)" in by_head[delayed.id][1]
    assert by_head[queued[0].id][0] is False
    assert '<td class="num">3</td>' in by_head[queued[0].id][1]  # backlog
    figures = {t.topic: t for t in read_overview().topics}[TOPIC]
    assert sorted(p.backlog for p in figures.shown) == [1, 3]


def test_a_partitioned_job_page_links_its_neighbours_and_refuses_actions(
    manager_client: Client, topic_db: str
) -> None:
    jobs = [enqueue_to_partition(TOPIC, "alice", tasks.add, n, 1) for n in range(3)]
    page = manager_client.get(reverse("later_django:job_detail", args=[jobs[1].id]))
    html = page.content.decode()
    assert reverse("later_django:job_detail", args=[jobs[0].id]) in html
    assert reverse("later_django:job_detail", args=[jobs[2].id]) in html
    partition = partition_for_key("alice", PARTITIONS)
    listed = manager_client.get(reverse("later_django:partition_list", args=[TOPIC, partition]))
    table = listed.content.decode().split('class="later-table later-jobs"', 1)[1]
    assert [m for m in re.findall(r"/job/(\w+)/\"><code>", table)] == [j.id for j in reversed(jobs)]
    refused = manager_client.post(
        reverse("later_django:job_delete", args=[jobs[1].id]), {"confirm": "yes"}, follow=True
    )
    assert f"topic &#x27;{TOPIC}&#x27;" in refused.content.decode()
    assert "not offered for partitioned jobs" in refused.content.decode()


def test_the_recurring_panel_and_later_status_list_recurring_jobs(
    manager_client: Client, later_db: str
) -> None:
    schedule_recurring("nightly-report", "0 3 * * *", tasks.add, 1, 2, sequential=True)
    html = manager_client.get(reverse("later_django:dashboard")).content.decode()
    recurring = panel(html, "recurring")
    assert "nightly-report" in recurring
    assert "<code>0 3 * * *</code>" in recurring
    assert "tests.engine.tasks.add" in recurring
    assert "<td>yes</td>" in recurring
    assert re.search(r"<td>\d{4}-\d\d-\d\d 03:00:00</td>", recurring)
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("later_status", stdout=out)
    assert "nightly-report" in out.getvalue()
