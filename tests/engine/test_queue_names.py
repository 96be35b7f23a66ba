"""Queue names at enqueue: ``QUEUES: []`` allows any name; ``__later…`` names are refused.

Django's settings reference: an empty ``QUEUES`` list allows every queue name.
Names starting with ``RESERVED_PREFIX`` belong to later_django, whatever
``QUEUES`` says, so the library's queries need no internal-queue filter.
"""

from __future__ import annotations

import pytest

from later_django.compat.tasks import InvalidTask, TaskResultStatus
from later_django.core.keys import RESERVED_PREFIX, job_key
from later_django.core.records import decode_record
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import NAMESPACE, no_rows, result, row_counts, run_until_finished
from tests.task_backends import LATER_BACKEND, any_queue_backends, tasks_setting

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def stored_queue(alias: str, job_id: str) -> str:
    raw = stores_for(alias).kv.get(job_key(NAMESPACE, job_id))
    assert raw is not None, f"job {job_id} has no record"
    return decode_record(raw).queue_name


def test_with_an_empty_queues_list_any_queue_name_is_enqueued_and_runs(engine_db: str) -> None:
    with tasks_setting(any_queue_backends("default")):
        enqueued = tasks.add.using(queue_name="made-up-just-now").enqueue(2, 2)

        assert result(enqueued.id).status == TaskResultStatus.READY
        assert stored_queue(engine_db, enqueued.id) == "made-up-just-now"
        [done] = run_until_finished([enqueued.id], queues=["made-up-just-now"])
    assert done.return_value == 4


@pytest.mark.parametrize(
    "queues", [[], ["default", f"{RESERVED_PREFIX}_mine"]], ids=["any", "listed"]
)
def test_a_queue_name_with_the_reserved_prefix_is_refused_naming_it_and_the_rule(
    engine_db: str, queues: list[str]
) -> None:
    name = f"{RESERVED_PREFIX}_mine"
    with tasks_setting({"default": {"BACKEND": LATER_BACKEND, "QUEUES": queues}}):
        with pytest.raises(InvalidTask) as raised:
            tasks.add.using(queue_name=name)
        with pytest.raises(InvalidTask):
            # Also at enqueue, for a task whose queue skipped Task.__post_init__.
            sneaky = tasks.add.using()
            object.__setattr__(sneaky, "queue_name", name)
            sneaky.enqueue(1, 2)

    assert str(raised.value) == (
        f"Queue '{name}' is not valid: queue names starting with '__later' are reserved "
        "for later_django's own use."
    )
    assert row_counts(engine_db) == no_rows()


def test_a_queue_name_that_only_contains_the_prefix_is_fine(engine_db: str) -> None:
    with tasks_setting(any_queue_backends("default")):
        enqueued = tasks.add.using(queue_name="my__later_queue").enqueue(1, 2)
    assert stored_queue(engine_db, enqueued.id) == "my__later_queue"
