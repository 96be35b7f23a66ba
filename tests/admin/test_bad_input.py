"""Bad input on the dashboard (issue 38, rows 1-7) and ``later_queue`` (rows 4, 15):
every refusal names the field, the value (cut) and the rule, comes before any action,
and is the same on SQLite and PostgreSQL (each case runs on both via ``db_alias``)."""

from __future__ import annotations

import html
from urllib.parse import quote

import pytest
from django.core.management import CommandError, call_command
from django.test import Client, override_settings
from django.urls import reverse

from later_django import api
from later_django.core.keys import paused_queue_key
from later_django.storage.stores import stores_for
from tests.admin.support import seed_jobs
from tests.admin.test_bulk_actions import bulk_url, failed, list_url, stages_of

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

BIG = str(2**63)
HUGE = str(10**30)
LONG = "x" * 100_000
NUL = "a\x00b"
PREFIX = "/admin/later_django"


def said(response) -> str:
    """The page's text with HTML entities read back (``'`` and ``"`` are escaped)."""
    return html.unescape(response.content.decode())


def assert_refused(response, status: int, *parts: str) -> None:
    """``response`` is the refusal page with ``status`` naming every one of ``parts``."""
    assert response.status_code == status, said(response)[:2000]
    text = said(response)
    assert "Nothing was done" in text
    for part in parts:
        assert part in text, (part, text[:3000])


# Row 1: cursors holding numbers beyond a bigint.

BAD_INDEX_CURSORS = [f"i:{BIG}:X", f"i:{HUGE}:X", "i:²:X", "i:-1:X", "i:5", "q", "x:1"]


@pytest.mark.parametrize("cursor", BAD_INDEX_CURSORS)
def test_the_job_list_refuses_a_cursor_it_cannot_read(
    manager_client: Client, later_db: str, cursor: str
) -> None:
    answer = manager_client.get(list_url("failed"), {"cursor": cursor})
    assert_refused(answer, 400, f"cursor {cursor!r}")


@pytest.mark.parametrize("cursor", [f"i:{BIG}:X", f"i:{HUGE}:X", "q:1"])
@pytest.mark.parametrize("method", ["get", "post"])
def test_a_bulk_retry_refuses_an_unreadable_cursor_and_retries_nothing(
    manager_client: Client, later_db: str, cursor: str, method: str
) -> None:
    ids = failed(2)
    query = {"action": "retry", "scope": "matching", "cursor": cursor, "confirm": "yes"}
    answer = getattr(manager_client, method)(bulk_url("failed"), query)
    assert_refused(answer, 400, f"cursor {cursor!r}")
    assert stages_of(later_db, ids) == ["failed", "failed"]


def test_a_bulk_cursor_over_a_bigint_names_the_rule(manager_client: Client, later_db: str) -> None:
    query = {"action": "retry", "scope": "matching", "cursor": f"i:{BIG}:X"}
    answer = manager_client.get(bulk_url("failed"), query)
    assert_refused(answer, 400, "holds a number beyond 9,223,372,036,854,775,807")


@pytest.mark.parametrize("cursor", [BIG, HUGE, "-1", "²", "1.5"])
def test_the_partition_list_refuses_a_cursor_beyond_a_sequence(
    manager_client: Client, later_db: str, cursor: str
) -> None:
    answer = manager_client.get(f"{PREFIX}/partitions/orders/0/", {"cursor": cursor})
    assert_refused(answer, 400, f"cursor {cursor!r}")


@pytest.mark.parametrize("partition", [BIG, HUGE, str(2**31)])
def test_a_partition_id_beyond_the_column_is_not_found(
    manager_client: Client, later_db: str, partition: str
) -> None:
    answer = manager_client.get(f"{PREFIX}/partitions/orders/{partition}/")
    assert_refused(answer, 404, f"partition {partition!r}", "is not between 0 and 2,147,483,647")


# Row 2: queue cursors whose digits ``str.isdigit`` accepts but ``int`` does not read.


@pytest.mark.parametrize("cursor", [f"q:{BIG}", "q:²", "q:\u0661", "q:", "q:1x"])
def test_a_bulk_cancel_of_queued_jobs_refuses_a_bad_queue_cursor(
    manager_client: Client, later_db: str, cursor: str
) -> None:
    seeded = seed_jobs()
    query = {"action": "cancel", "scope": "matching", "cursor": cursor, "confirm": "yes"}
    answer = manager_client.post(bulk_url("enqueued"), query)
    assert_refused(answer, 400, f"cursor {cursor!r}")
    assert stages_of(later_db, seeded.queued) == ["enqueued", "enqueued"]
    listed = manager_client.get(list_url("enqueued"), {"cursor": cursor})
    assert_refused(listed, 400, f"cursor {cursor!r}")


# Row 3: a NUL byte, refused before any query (PostgreSQL's text cannot hold it).


@pytest.mark.parametrize("action", ["", "retry/", "run-now/", "cancel/", "delete/"])
def test_a_job_id_with_a_nul_is_not_found(
    manager_client: Client, later_db: str, action: str
) -> None:
    url = f"{PREFIX}/job/{quote(NUL)}/{action}"
    answer = manager_client.post(url, {"confirm": "yes"}) if action else manager_client.get(url)
    assert_refused(answer, 404, "job id 'a\\x00b' contains a NUL character")


@pytest.mark.parametrize(
    "url",
    [f"{PREFIX}/tasks/{quote(NUL)}/", f"{PREFIX}/partitions/{quote(NUL)}/0/"],
)
def test_a_task_or_topic_with_a_nul_is_not_found(
    manager_client: Client, later_db: str, url: str
) -> None:
    assert_refused(manager_client.get(url), 404, "contains a NUL character")


@pytest.mark.parametrize("field", ["q", "task", "queue", "since", "until", "error", "cursor"])
def test_a_list_parameter_with_a_nul_is_refused(
    manager_client: Client, later_db: str, field: str
) -> None:
    answer = manager_client.get(list_url("failed"), {field: NUL})
    assert_refused(answer, 400, f"{field} 'a\\x00b'")


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("later_django:recurring_disable", "recurring_id"),
        ("later_django:recurring_enable", "recurring_id"),
        ("later_django:recurring_run_now", "recurring_id"),
        ("later_django:queue_pause", "queue"),
        ("later_django:queue_resume", "queue"),
    ],
)
def test_an_action_field_with_a_nul_is_refused(
    manager_client: Client, later_db: str, name: str, field: str
) -> None:
    answer = manager_client.post(reverse(name), {field: NUL})
    assert_refused(answer, 400, f"{field} 'a\\x00b' contains a NUL character")
    assert api.paused_queues() == []


# Row 4: pause and resume only known queues; a repeated parameter is refused.

NOT_QUEUES = ["nosuch", " default ", "DEFAULT", "\u200fdefault", "q" * 200, "q" * 201]


@pytest.mark.parametrize("name", NOT_QUEUES)
def test_the_dashboard_pauses_no_queue_it_does_not_know(
    manager_client: Client, later_db: str, name: str
) -> None:
    for view in ("later_django:queue_pause", "later_django:queue_resume"):
        answer = manager_client.post(reverse(view), {"queue": name})
        assert_refused(answer, 400, "queue ")
        assert "is paused" not in said(answer)
    assert api.paused_queues() == []
    assert not stores_for(later_db).kv.exist(paused_queue_key("default", name[:200]))


def test_an_unknown_queue_is_refused_naming_the_known_ones(
    manager_client: Client, later_db: str
) -> None:
    answer = manager_client.post(reverse("later_django:queue_pause"), {"queue": "nosuch"})
    assert_refused(
        answer, 400, "queue 'nosuch' is not a queue of namespace", "known queues: default, emails"
    )


def test_a_repeated_queue_parameter_pauses_nothing(manager_client: Client, later_db: str) -> None:
    answer = manager_client.post(
        reverse("later_django:queue_pause"), {"queue": ["default", "emails"]}
    )
    assert_refused(answer, 400, "queue ['default', 'emails'] is given 2 times; give it once")
    assert api.paused_queues() == []


def test_a_queue_seen_only_in_the_data_can_be_resumed(
    manager_client: Client, later_db: str
) -> None:
    api.pause_queue("legacy", by="ops")  # a pause written before the rule, say
    answer = manager_client.post(reverse("later_django:queue_resume"), {"queue": "legacy"})
    assert answer.status_code == 302
    assert api.paused_queues() == []
    refused = manager_client.post(reverse("later_django:queue_pause"), {"queue": "legacy"})
    assert refused.status_code == 400  # resumed and holding nothing: no longer seen


@pytest.mark.parametrize("name", NOT_QUEUES)
def test_later_queue_pauses_no_queue_it_does_not_know(later_db: str, name: str) -> None:
    for action in ("pause", "resume"):
        with pytest.raises(CommandError, match=r"^NAME "):
            call_command("later_queue", action, "default", name)
    assert api.paused_queues() == []


def test_later_queue_names_the_known_queues(later_db: str) -> None:
    with pytest.raises(CommandError, match="known queues: default, emails, reports"):
        call_command("later_queue", "pause", "nosuch")


# Row 15 (part): ``--by`` is bounded and not empty.


@pytest.mark.parametrize(
    ("by", "rule"),
    [(LONG, "is longer than 200 characters"), ("", "is empty"), (NUL, "contains a NUL")],
)
def test_later_queue_refuses_a_by_it_would_store(later_db: str, by: str, rule: str) -> None:
    with pytest.raises(CommandError, match=rule) as raised:
        call_command("later_queue", "pause", "default", "--by", by)
    assert len(str(raised.value)) < 300
    assert api.paused_queues() == []


def test_later_queue_stores_a_by_within_the_bound(later_db: str) -> None:
    call_command("later_queue", "pause", "default", "--by", "b" * 200)
    assert [(q.name, q.by) for q in api.paused_queues()] == [("default", "b" * 200)]


# Row 5: ``confirm`` is exactly one ``yes``.


@pytest.mark.parametrize("confirm", [["no", "yes"], ["yes", "yes"], ["yes", "no"], ["YES"]])
def test_a_delete_needs_exactly_one_yes(
    manager_client: Client, later_db: str, confirm: list[str]
) -> None:
    ids = failed(1)
    answer = manager_client.post(f"{PREFIX}/job/{ids[0]}/delete/", {"confirm": confirm})
    assert answer.status_code == 400
    assert "Nothing was deleted" in said(answer)
    assert stages_of(later_db, ids) == ["failed"]


@pytest.mark.parametrize("confirm", [["no", "yes"], ["yes", "yes"]])
def test_a_bulk_action_needs_exactly_one_yes(
    manager_client: Client, later_db: str, confirm: list[str]
) -> None:
    ids = failed(1)
    query = {"action": "retry", "scope": "matching", "confirm": confirm}
    answer = manager_client.post(bulk_url("failed"), query)
    assert answer.status_code == 400
    assert "a bulk action needs the confirmation" in said(answer)
    assert stages_of(later_db, ids) == ["failed"]


# Row 6: over-long values are refused before acting, and never echoed whole.


def assert_cut(response) -> None:
    """The refusal names the value cut (the admin's own chrome may echo the address)."""
    refusal = said(response).split('class="errornote later-refusal">', 1)[1].split("</p>")[0]
    assert "(100,000 characters)" in refusal
    assert len(refusal) < 500


@pytest.mark.parametrize("field", ["q", "task", "queue", "since", "until", "error", "cursor"])
def test_a_long_list_parameter_is_refused_and_cut(
    manager_client: Client, later_db: str, field: str
) -> None:
    answer = manager_client.get(list_url("failed"), {field: LONG})
    assert_refused(answer, 400, f"{field} 'xxxx", "is longer than")
    assert_cut(answer)


@pytest.mark.parametrize("action", ["retry/", "run-now/", "cancel/", "delete/"])
def test_a_long_job_id_acts_on_nothing(manager_client: Client, later_db: str, action: str) -> None:
    answer = manager_client.post(f"{PREFIX}/job/{LONG}/{action}", {"confirm": "yes"})
    assert_refused(answer, 404, "job id 'xxxx", "is longer than 200 characters")
    assert_cut(answer)


@pytest.mark.parametrize("field", ["task", "since", "action", "scope", "job_id"])
def test_a_long_bulk_field_retries_nothing(
    manager_client: Client, later_db: str, field: str
) -> None:
    ids = failed(1)
    scope = "selected" if field == "job_id" else "matching"
    query = {"action": "retry", "scope": scope, "confirm": "yes", field: LONG}
    answer = manager_client.post(bulk_url("failed"), query)
    assert_refused(answer, 400, f"{field} 'xxxx", "is longer than")
    assert_cut(answer)
    assert stages_of(later_db, ids) == ["failed"]


@pytest.mark.parametrize("field", ["task", "since", "action", "cursor"])
def test_a_repeated_bulk_field_retries_nothing(
    manager_client: Client, later_db: str, field: str
) -> None:
    ids = failed(1)
    values = {"task": "a", "since": "1h", "action": "retry", "cursor": "i"}
    query = {"action": "retry", "scope": "matching", "confirm": "yes"}
    query[field] = [values[field], values[field]]  # type: ignore[assignment]
    answer = manager_client.post(bulk_url("failed"), query)
    assert_refused(answer, 400, "is given 2 times; give it once")
    assert stages_of(later_db, ids) == ["failed"]


# Row 7: an unknown topic or partition is a 404.


@pytest.fixture
def topic_db(later_db: str):
    later = {"NAMESPACE": "default", "DATABASE": later_db, "TOPICS": {"orders": {"partitions": 8}}}
    with override_settings(LATER=later):
        yield later_db


@pytest.mark.parametrize(
    ("topic", "partition", "rule"),
    [
        ("nosuch", "0", "topic 'nosuch' is not a topic of namespace 'default'"),
        ("orders", "8", "partition 8 of topic 'orders' does not exist: the topic has 8"),
        ("orders", str(2**31), "is not between 0 and 2,147,483,647"),
    ],
)
def test_an_unknown_topic_or_partition_is_not_found(
    manager_client: Client, topic_db: str, topic: str, partition: str, rule: str
) -> None:
    answer = manager_client.get(f"{PREFIX}/partitions/{topic}/{partition}/")
    assert_refused(answer, 404, rule)


def test_a_known_partition_without_jobs_is_an_empty_page(
    manager_client: Client, topic_db: str
) -> None:
    assert manager_client.get(f"{PREFIX}/partitions/orders/7/").status_code == 200


# Item 2: an empty filter means no filter on the dashboard (the commands refuse one).


def test_empty_filters_mean_no_filter(manager_client: Client, later_db: str) -> None:
    ids = failed(2)
    empty = {"task": "", "queue": "", "since": "", "until": "", "error": "", "cursor": "", "q": ""}
    listed = said(manager_client.get(list_url("failed"), empty))
    assert all(job_id in listed for job_id in ids)
    preview = manager_client.get(
        bulk_url("failed"), {"action": "retry", "scope": "matching", **empty}
    )
    assert "<th>Found now</th><td>2</td>" in said(preview)
