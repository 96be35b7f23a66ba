"""The dashboard's charts, partitions, units and workers as rendered pages, on SQLite and
PostgreSQL: the range parameter (honoured, validated), the throughput chart after a
burst of jobs, later_django's internal topics hidden unless asked, waits and ages in
human units, each worker once."""

from __future__ import annotations

import re

import pytest
from django.test import Client, RequestFactory
from django.urls import reverse

from later_django.admin import panels
from later_django.admin.chart import TOP, value_ticks
from later_django.core.clock import now_ms
from later_django.core.topics import RECURRING_TOPIC, RECURRING_TOPIC_PARTITIONS
from later_django.engine import metrics
from later_django.engine.topics import register_topic
from later_django.overview.snapshot import read_overview
from later_django.storage.stores import stores_for
from later_django.storage.types import WorkerRow
from tests.engine import tasks
from tests.engine.support import run_burst

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

BURST = 50
FAILURES = 3


def panel(html: str, name: str) -> str:
    return html.split(f'id="later-panel-{name}"', 1)[1].split("</section>", 1)[0]


def dashboard(client: Client, **query: str) -> str:
    response = client.get(reverse("later_django:dashboard"), query)
    assert response.status_code == 200
    return response.content.decode()


def polylines(svg: str, css_class: str) -> list[list[tuple[float, float]]]:
    """The points of every polyline of ``css_class`` in ``svg``."""
    return [
        [(float(x), float(y)) for x, y in (pair.split(",") for pair in points.split())]
        for points in re.findall(
            rf'<polyline class="later-chart-line {css_class}" fill="none" points="([^"]*)"', svg
        )
    ]


def y_labels(svg: str) -> list[str]:
    axis = svg.split('class="later-chart-axis later-chart-y-axis"', 1)[1].split("</g>", 1)[0]
    return re.findall(r">([^<]+)</text>", axis)


def run_a_burst() -> None:
    """``BURST`` jobs that succeed and ``FAILURES`` that fail, enqueued and run at once
    (within a minute or two), their transitions flushed."""
    for n in range(BURST):
        tasks.add.enqueue(n, 1)
    for n in range(FAILURES):
        tasks.fail_once_without_retry.enqueue(f"broken {n}")
    run_burst()
    metrics.flush()


# --- the range parameter ---


@pytest.mark.parametrize(
    ("range_name", "unit", "points"),
    [("hour", "jobs / min", 60), ("day", "jobs / 10 min", 144), ("week", "jobs / hour", 168)],
)
def test_the_range_parameter_sets_both_charts(
    manager_client: Client, later_db: str, range_name: str, unit: str, points: int
) -> None:
    html = dashboard(manager_client, range=range_name)
    for name in ("history", "throughput-chart"):
        chart = panel(html, name)
        assert f'aria-current="true" class="current">{range_name}</a>' in chart, name
        assert chart.count('class="current"') == 1
        assert f", last {range_name}</title>" in chart
    throughput = panel(html, "throughput-chart")
    assert f"{points} points" in throughput
    assert f">{unit}</text>" in throughput
    (line,) = polylines(throughput, "later-chart-success")
    assert len(line) == points, "one point per slot, zero included"


@pytest.mark.parametrize("asked", ["year", "", "HOUR", "<script>alert(1)</script>", "day "])
def test_an_unknown_range_falls_back_to_the_hour(
    manager_client: Client, later_db: str, asked: str
) -> None:
    html = dashboard(manager_client, range=asked)
    for name in ("history", "throughput-chart"):
        chart = panel(html, name)
        assert 'aria-current="true" class="current">hour</a>' in chart
        assert ", last hour</title>" in chart
    assert "<script>alert" not in html


def test_the_range_links_keep_the_internal_choice(manager_client: Client, later_db: str) -> None:
    plain = panel(dashboard(manager_client), "history")
    assert 'href="?range=day"' in plain and 'href="?range=week"' in plain
    internal = panel(dashboard(manager_client, internal="1", range="week"), "history")
    assert 'href="?range=day&amp;internal=1"' in internal
    assert 'href="?internal=1"' in internal, "hour, the default, is left out of the query"


def test_the_admin_tools_index_honours_the_range_too(manager_client: Client, later_db: str) -> None:
    html = manager_client.get(reverse("admin:index"), {"range": "week"}).content.decode()
    for name in ("history", "throughput-chart"):
        assert ", last week</title>" in panel(html, name), name
    bogus = manager_client.get(reverse("admin:index"), {"range": "fortnight"})
    assert bogus.status_code == 200
    assert ", last hour</title>" in panel(bogus.content.decode(), "throughput-chart")


# --- the throughput chart ---


@pytest.mark.parametrize("range_name", ["hour", "day", "week"])
def test_a_burst_of_jobs_shows_as_a_spike_of_the_throughput_chart(
    manager_client: Client, later_db: str, range_name: str
) -> None:
    before = panel(dashboard(manager_client, range=range_name), "throughput-chart")
    (flat,) = polylines(before, "later-chart-success")
    assert {y for _, y in flat} == {flat[0][1]}, "nothing finished yet: a flat line"
    assert y_labels(before) == ["0", "1"]

    run_a_burst()
    chart = panel(dashboard(manager_client, range=range_name), "throughput-chart")
    (success,) = polylines(chart, "later-chart-success")
    (failed,) = polylines(chart, "later-chart-failed")
    floor = max(y for _, y in success)
    raised = [index for index, (_, y) in enumerate(success) if y < floor]
    # The 50 jobs finished within a minute or two: one slot, two at a minute's turn.
    assert 1 <= len(raised) <= 2, raised
    assert raised[-1] >= len(success) - 2, "the spike is at the right end: now"
    assert min(y for _, y in success) == TOP, "the spike reaches the top tick"
    labels = y_labels(chart)
    assert labels[0] == "0" and int(labels[-1]) >= BURST // 2
    assert [int(label) for label in labels] == value_ticks(int(labels[-1]))
    assert min(y for _, y in failed) < floor, "the failures show too"
    totals = dict(
        re.findall(r"(succeeded|failed): <strong class=\"later-total\">(\d+)</strong>", chart)
    )
    assert totals == {"succeeded": str(BURST), "failed": str(FAILURES)}
    busiest = re.search(r"succeeded: .*?\(busiest minute (\d+)\)", chart)
    assert busiest and BURST // 2 <= int(busiest.group(1)) <= BURST


def test_the_throughput_chart_reads_no_job_table(manager_client: Client, later_db: str) -> None:
    """The charts add three bounded reads (queue samples, two stages' buckets) to the
    overview's; none of them reads the index or the queue."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    run_a_burst()
    with CaptureQueriesContext(connections[later_db]) as captured:
        dashboard(manager_client, range="week")
    metric_reads = [q["sql"] for q in captured if "later_job_transition_metrics" in q["sql"]]
    assert len(metric_reads) == 3, metric_reads  # the last-minute sums, then success, failed
    assert not any("later_jobs_index" in q["sql"] and "COUNT" in q["sql"] for q in captured)


# --- internal partitions ---


def hold_internal_partitions(alias: str, owner: str = "vm:11553:YRACdZ") -> None:
    """The recurring topic registered with every partition leased by a worker, as a
    running worker leaves it in a project without recurring jobs."""
    stores = stores_for(alias)
    register_topic(stores, "default", RECURRING_TOPIC, RECURRING_TOPIC_PARTITIONS)
    now = now_ms()
    slots = [(RECURRING_TOPIC, p) for p in range(RECURRING_TOPIC_PARTITIONS)]
    stores.partitions.leases.take(("default",), owner, slots, until_ms=now + 30_000, now_ms=now)


def test_internal_topics_are_hidden_by_default_in_one_line(
    manager_client: Client, later_db: str
) -> None:
    hold_internal_partitions(later_db)
    assert RECURRING_TOPIC in {t.topic for t in read_overview().topics}, "the overview has it"
    partitions = panel(dashboard(manager_client), "partitions")
    assert "<tr" not in partitions and "<table" not in partitions
    assert f"{RECURRING_TOPIC} <span" not in partitions
    lines = [line for line in partitions.split("</h2>", 1)[1].splitlines() if line.strip()]
    assert len(lines) == 1, lines  # one line under the heading
    assert lines[0].startswith('<p class="later-none">None configured.')
    assert f"1 internal topic of later_django hidden ({RECURRING_TOPIC}, backlog 0)" in lines[0]
    assert 'class="later-internal" href="?internal=1">show internal</a>' in lines[0]


def test_internal_topics_are_listed_when_asked(manager_client: Client, later_db: str) -> None:
    hold_internal_partitions(later_db)
    partitions = panel(dashboard(manager_client, internal="1"), "partitions")
    assert f"{RECURRING_TOPIC} <span" in partitions and "later_django's own" in partitions
    assert len(re.findall(r"<tr>", partitions)) == 1 + RECURRING_TOPIC_PARTITIONS
    assert "vm:11553:YRACdZ" in partitions
    assert 'href="?">hide internal</a>' in partitions
    for value in ("0", "yes", "true"):
        hidden = panel(dashboard(manager_client, internal=value), "partitions")
        assert f"{RECURRING_TOPIC} <span" not in hidden, value


def test_a_project_topic_is_listed_and_the_internal_one_named_below(
    manager_client: Client, later_db: str
) -> None:
    hold_internal_partitions(later_db)
    register_topic(stores_for(later_db), "default", "orders", 4)
    stores_for(later_db).partitions.leases.take(
        ("default",), "w2", [("orders", 1)], until_ms=now_ms() + 30_000, now_ms=now_ms()
    )
    partitions = panel(dashboard(manager_client), "partitions")
    assert "orders <span" in partitions and "None configured." not in partitions
    assert f"{RECURRING_TOPIC} <span" not in partitions
    assert len(re.findall(r"<tr>", partitions)) == 2  # the header and partition 1
    assert "1 internal topic of later_django hidden" in partitions


# --- units ---


def test_waits_and_ages_are_shown_in_human_units(manager_client: Client, later_db: str) -> None:
    run_a_burst()
    tasks.add.enqueue(1, 2)  # one ready message: its queue has an oldest age
    now = now_ms()
    stores_for(later_db).executions.worker_heartbeat(
        "default",
        WorkerRow("w1", "host-a", 4242, 4, ["default"], 1, now - 3 * 3_600_000, now - 12_000),
    )
    html = dashboard(manager_client)
    unit = r"\d+(?:\.\d)? (?:ms|s|min|h|d)"
    waits = panel(html, "throughput").split("<h3>Queue wait</h3>", 1)[1].split("</table>", 1)[0]
    cell = rf'<td class="num" title="(\d+) ms">({unit})</td>'
    regular = re.search(rf'<tr><td>regular</td><td class="num">(\d+)</td>{cell}{cell}', waits)
    assert regular, waits
    assert int(regular.group(1)) == BURST + FAILURES
    assert "Avg ms" not in waits and "Max ms" not in waits
    queues = panel(html, "throughput").split("<h3>Queues</h3>", 1)[1]
    assert re.search(rf'<td>default</td><td class="num">1</td><td class="num">{unit}</td>', queues)
    workers = panel(html, "workers")
    assert re.search(r"\((?:12|13) s ago\)", workers), workers
    assert "<td>3 h</td>" in workers


# --- workers ---


def test_the_workers_panel_shows_each_worker_and_queue_once(
    manager_client: Client, later_db: str
) -> None:
    now = now_ms()
    executions = stores_for(later_db).executions
    for worker_id in ("vm:11553:YRACdZ", "vm:11554:QPkLmN"):
        executions.worker_heartbeat(
            "default",
            WorkerRow(worker_id, "vm", 11553, 4, ["default", "default", "emails"], 0, now, now),
        )
    workers = panel(dashboard(manager_client), "workers")
    assert workers.count("vm:11553:YRACdZ") == 1 and workers.count("vm:11554:QPkLmN") == 1
    assert workers.count("<td>default, emails</td>") == 2


def test_worker_rows_are_distinct_by_worker_id(later_db: str) -> None:
    """The rows come from the worker table (one row per id); the panel keeps one per id
    even if a read returned the same worker twice."""
    now = now_ms()
    row = WorkerRow("vm:11553:YRACdZ", "vm", 11553, 4, ["a", "b", "a"], 0, now, now)
    overview = read_overview()
    overview.workers = [row, row]
    request = RequestFactory().get("/")
    rows = panels._worker_rows(overview)
    assert [r["worker_id"] for r in rows] == ["vm:11553:YRACdZ"]
    assert rows[0]["queues"] == "a, b"
    assert panels.distinct(["x", "y", "x", "z", "y"]) == ["x", "y", "z"]
    assert panels.history_range(request) == "hour"
