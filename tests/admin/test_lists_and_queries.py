"""Job lists walk every job once by cursor; the index page reads a bounded number of
small queries and never counts the big tables."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connections
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from later_django.admin.jobs import PAGE_SIZE
from later_django.api import enqueue_many
from later_django.core.clock import now_ms
from later_django.storage.stores import stores_for
from later_django.storage.types import JobIndexRow
from tests.admin.support import seed_jobs
from tests.engine import tasks

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

JOB_LINK = re.compile(r'<a href="/admin/later_django/job/(\w+)/"><code>')
NEXT_LINK = re.compile(r'<a class="later-next" href="\?cursor=([^"]+)">')
COUNT_CALL = re.compile(r"\bCOUNT\s*\(", re.IGNORECASE)
BIG_TABLE = re.compile(r"\blater_(jobs_index|delivery_queue)\b", re.IGNORECASE)


def walk(client: Client, url: str) -> tuple[list[str], int]:
    """Every job id listed from ``url`` on, following the next-page links; and the
    number of pages."""
    from urllib.parse import unquote

    ids: list[str] = []
    pages = 0
    cursor = None
    while True:
        response = client.get(url, {"cursor": cursor} if cursor else {})
        assert response.status_code == 200
        html = response.content.decode()
        table = html.split('class="later-table later-jobs"', 1)[-1]
        ids += JOB_LINK.findall(table.split("</table>", 1)[0])
        pages += 1
        found = NEXT_LINK.search(html)
        if found is None:
            return ids, pages
        cursor = unquote(found.group(1))


def partitioned_rows(count: int, stage: str, topic: str = "orders") -> list[JobIndexRow]:
    now = now_ms()
    return [
        JobIndexRow(
            job_id=f"01PART{stage[:3].upper()}{n:012d}",
            payload_type="tests.engine.tasks.add",
            stage=stage,
            stage_date_ms=now - n,
            revision=1,
            created_at_ms=now - n,
            topic=topic,
            partition_id=0,
            sequence=n,
        )
        for n in range(count)
    ]


def test_the_enqueued_list_walks_the_queue_then_the_partitioned_jobs_once_each(
    manager_client: Client, later_db: str
) -> None:
    queued = enqueue_many(tasks.add, [((n, 0), {}) for n in range(2 * PAGE_SIZE + 7)])
    partitioned = partitioned_rows(PAGE_SIZE + 3, "enqueued")
    stores_for(later_db).index.job_index_upsert("default", partitioned)
    ids, pages = walk(manager_client, reverse("later_django:job_list", args=["enqueued"]))
    assert len(ids) == len(set(ids))
    expected = [result.id for result in reversed(queued)] + [row.job_id for row in partitioned]
    assert ids == expected
    assert pages == 4


def test_the_delayed_list_walks_newest_first_without_duplicates(
    manager_client: Client, later_db: str
) -> None:
    later = tasks.add.using(run_after=timezone.now() + timedelta(hours=1))
    delayed = []
    for start in range(0, 3 * PAGE_SIZE, 40):
        delayed += enqueue_many(later, [((n, 0), {}) for n in range(start, start + 40)])
    ids, pages = walk(manager_client, reverse("later_django:job_list", args=["delayed"]))
    assert len(ids) == len(set(ids)) == len(delayed)
    assert set(ids) == {result.id for result in delayed}
    assert pages == 4


def test_the_partition_list_walks_highest_sequence_first(
    manager_client: Client, later_db: str
) -> None:
    rows = partitioned_rows(2 * PAGE_SIZE + 1, "success")
    stores_for(later_db).index.job_index_upsert("default", rows)
    ids, pages = walk(manager_client, reverse("later_django:partition_list", args=["orders", 0]))
    assert ids == [row.job_id for row in reversed(rows)]
    assert pages == 3
    detail = manager_client.get(reverse("later_django:job_detail", args=[rows[5].job_id]))
    html = detail.content.decode()
    assert reverse("later_django:job_detail", args=[rows[4].job_id]) in html
    assert reverse("later_django:job_detail", args=[rows[6].job_id]) in html


def test_a_malformed_cursor_is_a_400(manager_client: Client, later_db: str) -> None:
    url = reverse("later_django:job_list", args=["failed"])
    answer = manager_client.get(url, {"cursor": "i:notanumber:x"})
    assert answer.status_code == 400
    assert "cursor &#x27;i:notanumber:x&#x27; is not a job-list cursor" in answer.content.decode()


@pytest.mark.parametrize("page", ["admin:index", "later_django:dashboard"])
def test_the_index_issues_few_queries_and_never_counts_a_big_table(
    manager_client: Client, later_db: str, page: str
) -> None:
    seed_jobs()
    manager_client.get(reverse(page))  # first render saves admin-tools preferences
    aliases = {"default", later_db}
    contexts = [CaptureQueriesContext(connections[alias]) for alias in sorted(aliases)]
    for context in contexts:
        context.__enter__()
    try:
        response = manager_client.get(reverse(page))
    finally:
        for context in contexts:
            context.__exit__(None, None, None)
    assert response.status_code == 200
    statements = [query["sql"] for context in contexts for query in context.captured_queries]
    assert len(statements) <= 30, statements
    # No COUNT( at all in a statement that reads a big table, not even over a LIMITed
    # subquery: every stage count, finished ones too, is a counter read.
    counting = [sql for sql in statements if COUNT_CALL.search(sql) and BIG_TABLE.search(sql)]
    assert counting == []
    # Whatever reads a big table (the oldest ready message) stops after a few rows.
    touching = [sql for sql in statements if BIG_TABLE.search(sql)]
    assert all("LIMIT" in sql.upper() for sql in touching), touching
