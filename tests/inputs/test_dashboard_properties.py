"""Property tests of the dashboard's inputs (issue 38, item 4): for any value of any URL
parameter, path segment or POST action field, the answer is a 2xx, 3xx or 4xx (the
test client raises a view's exception: a 500 fails the test), a refusal (4xx)
changes nothing, and SQLite and PostgreSQL (in the MariaDB lane: MariaDB) give the
same status (tests/inputs/conftest.py).

Each example sends the same request to both databases in turn (``LATER["DATABASE"]``
switched), so the comparison is direct. The examples are bounded
(:data:`EXAMPLES` per test) to keep the file near ten seconds per database.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote

import pytest
from django.test import Client, override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from later_django import api
from later_django.engine import metrics
from later_django.storage.stores import stores_for
from tests.admin.conftest import _user
from tests.admin.support import Seeded, seed_jobs
from tests.inputs.conftest import compared_with_sqlite

pytestmark = [pytest.mark.django_db(transaction=True, databases="__all__"), compared_with_sqlite]

PREFIX = "/admin/later_django"
#: Examples per property (each one sends a request to each database).
EXAMPLES = 60
BIGINT = 2**63

#: Values that broke the dashboard once (issue 38's table), and their neighbours.
KNOWN_BAD = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "²",
    "\u0661",
    "\u200fdefault",
    " default ",
    "DEFAULT",
    "nan",
    "inf",
    "-inf",
    "1e309",
    "1_000",
    "%",
    "_",
    "*",
    "'; DROP TABLE later_storage; --",
    "i",
    "i:",
    "q:",
    f"i:{BIGINT}:X",
    f"i:{10**30}:X",
    f"q:{BIGINT}",
    "q:²",
    "q:\u0661",
    "2026-13-01T00:00",
    "2026-12-01T25:00",
    "2026-12-01T00:00+99:00",
    "0001-01-01T00:00+23:59",
    "x" * 100_000,
]
#: Values an action may legitimately take (so that some examples act).
GOOD = [
    "default",
    "emails",
    "yes",
    "retry",
    "cancel",
    "delete",
    "run_now",
    "matching",
    "selected",
    "1h",
    "i",
    "0",
]

numbers = st.integers(min_value=-(2**70), max_value=2**70)
known_bad = st.sampled_from(KNOWN_BAD)
# The known bad values weigh three branches of seven: each property meets most of them.
values = st.one_of(
    known_bad,
    known_bad,
    known_bad,
    st.sampled_from(GOOD),
    st.text(max_size=40),
    numbers.map(str),
    numbers.map(lambda n: f"i:{n}:X"),
    numbers.map(lambda n: f"q:{n}"),
    st.integers(min_value=0, max_value=3_000).map(lambda n: "x" * n),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=10).map(lambda t: f"a\x00{t}"),
)
#: A parameter given once, twice (refused where one is expected) or with two values.
given_values = st.one_of(values, st.lists(values, min_size=2, max_size=3))
BOUNDED = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@dataclass
class Both:
    """The two databases, each seeded alike, and a manager's client."""

    aliases: tuple[str, str]
    seeded: dict[str, Seeded]
    client: Client

    def answer(
        self, method: str, url: str, data: dict[str, object], *, acts: bool = True
    ) -> dict[str, int]:
        """Sends the request to each database; its status there, after checking that a
        refusal (or any answer, when it cannot ``acts``) changed nothing."""
        statuses = {}
        for alias in self.aliases:
            with on(alias):
                before = state(alias)
                response = getattr(self.client, method)(url, data)
                statuses[alias] = response.status_code
                assert response.status_code < 500, (alias, url, data)
                if response.status_code >= 400 or not acts:
                    assert state(alias) == before, (alias, url, data, response.status_code)
        return statuses


def on(alias: str):  # type: ignore[no-untyped-def]
    return override_settings(LATER={"NAMESPACE": "default", "DATABASE": alias})


def state(alias: str) -> tuple[object, ...]:
    """What an action changes: the jobs per stage and the paused queues."""
    counts = stores_for(alias).index.job_index_stage_counts("default")
    return tuple(sorted(counts.items())), tuple(q.name for q in api.paused_queues())


@pytest.fixture
def both(reference: str, compared: str) -> Iterator[Both]:
    seeded = {}
    for alias in (reference, compared):
        metrics.accumulator.take()
        with on(alias):
            seeded[alias] = seed_jobs()
            metrics.accumulator.take()
    client = Client()
    client.force_login(_user("manager", staff=True, manage=True))
    yield Both((reference, compared), seeded, client)
    metrics.accumulator.take()


def assert_alike(statuses: dict[str, int]) -> None:
    assert len(set(statuses.values())) == 1, statuses


LIST_PARAMETERS = ["q", "task", "queue", "since", "until", "error", "cursor", "bulk"]


@BOUNDED
@given(
    stage=st.sampled_from(["failed", "enqueued", "success", "delayed"]),
    parameter=st.sampled_from(LIST_PARAMETERS),
    value=given_values,
    others=st.dictionaries(st.sampled_from(LIST_PARAMETERS), values, max_size=2),
)
def test_any_job_list_parameter(
    both: Both, stage: str, parameter: str, value: object, others: dict[str, object]
) -> None:
    query = {**others, parameter: value}
    assert_alike(both.answer("get", f"{PREFIX}/jobs/{stage}/", query))


BULK_FIELDS = [
    "action",
    "scope",
    "task",
    "queue",
    "since",
    "until",
    "error",
    "cursor",
    "job_id",
    "page_job_id",
    "confirm",
]


@BOUNDED
@given(
    stage=st.sampled_from(["failed", "enqueued", "delayed"]),
    method=st.sampled_from(["get", "post"]),
    field=st.sampled_from(BULK_FIELDS),
    value=given_values,
    others=st.dictionaries(st.sampled_from(BULK_FIELDS), values, max_size=2),
)
def test_any_bulk_field(
    both: Both, stage: str, method: str, field: str, value: object, others: dict[str, object]
) -> None:
    action = "cancel" if stage == "enqueued" else "retry"
    data = {"action": action, "scope": "matching", **others, field: value}
    statuses = both.answer(method, f"{PREFIX}/jobs/{stage}/bulk/", data)
    assert_alike(statuses)


@BOUNDED
@given(
    action=st.sampled_from(
        ["queues/pause/", "queues/resume/"]
        + [f"recurring/{name}/" for name in ("disable", "enable", "run-now")]
    ),
    value=given_values,
)
def test_any_queue_or_recurring_action_field(both: Both, action: str, value: object) -> None:
    field = "queue" if action.startswith("queues") else "recurring_id"
    # Only a known queue is paused or resumed; the seeded data knows no other.
    acts = not action.startswith("queues") or value in ("default", "emails")
    assert_alike(both.answer("post", f"{PREFIX}/{action}", {field: value}, acts=acts))


def segment(value: str) -> str:
    """``value`` as one path segment (an empty one stands for the empty string)."""
    return quote(value, safe="") or "%20"


@BOUNDED
@given(
    page=st.sampled_from(
        [
            "job/{}/",
            "job/{}/retry/",
            "job/{}/run-now/",
            "job/{}/cancel/",
            "job/{}/delete/",
            "tasks/{}/",
            "partitions/{}/0/",
            "partitions/orders/{}/",
            "jobs/{}/",
        ]
    ),
    value=values,
    confirm=st.one_of(st.just([]), st.lists(st.sampled_from(["yes", "no", ""]), max_size=2)),
    cursor=st.one_of(st.just(""), values),
)
def test_any_path_segment(
    both: Both, page: str, value: str, confirm: list[str], cursor: str
) -> None:
    url = f"{PREFIX}/{page.format(segment(value))}"
    is_action = page.count("/") == 3 and not page.startswith(("tasks", "partitions", "jobs"))
    if is_action:
        statuses = both.answer("post", url, {"confirm": confirm})
    else:
        statuses = both.answer("get", url, {"cursor": cursor} if cursor else {})
    assert_alike(statuses)


@BOUNDED
@given(
    job=st.sampled_from(["failed", "delayed", "queued"]),
    action=st.sampled_from(["retry/", "run-now/", "cancel/", "delete/"]),
    confirm=st.lists(st.sampled_from(["yes", "no", "YES", " yes", ""]), max_size=3),
)
def test_a_job_action_acts_only_when_valid(
    both: Both, job: str, action: str, confirm: list[str]
) -> None:
    """A real job's buttons with any ``confirm``: a delete needs exactly one ``yes``."""
    statuses = {}
    for alias in both.aliases:
        seeded = both.seeded[alias]
        job_id = seeded.queued[0] if job == "queued" else getattr(seeded, job)
        with on(alias):
            before = state(alias)
            response = both.client.post(f"{PREFIX}/job/{job_id}/{action}", {"confirm": confirm})
            statuses[alias] = response.status_code
            if action == "delete/" and confirm != ["yes"]:
                # 400: shown the confirmation again; 404: an earlier example deleted it.
                assert response.status_code in (400, 404)
                assert state(alias) == before
    assert_alike(statuses)


@settings(BOUNDED, max_examples=EXAMPLES // 2)
@given(
    page=st.sampled_from(["", "tasks/", "failures/", "queues/", "workers/", "recurring/"]),
    query=st.dictionaries(st.sampled_from(["range", "internal"]), given_values, max_size=2),
)
def test_any_page_parameter(both: Both, page: str, query: dict[str, object]) -> None:
    """The read-only pages' ``range`` and ``internal``: an unknown value is the default."""
    statuses = both.answer("get", f"{PREFIX}/{page}", query, acts=False)
    assert_alike(statuses)
    assert set(statuses.values()) == {200}
