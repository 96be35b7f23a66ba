"""A workflow declared up front (``later_django.workflow.Workflow``): checked whole, then
enqueued in one transaction; every step runs after the steps it names, on both
databases."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.db import transaction

from later_django.compat.tasks import FRAMEWORK, InvalidTask, TaskResultStatus
from later_django.workflow import Workflow
from tests.engine import tasks
from tests.engine.support import no_rows, result, row_counts, run_until_finished
from tests.task_backends import LATER_BACKEND, tasks_setting

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

HOUSES = ("north", "south", "east")


def order_pipeline(lines: str) -> Workflow:
    """charge -> reserve in three warehouses at once -> ship when all three succeeded ->
    mail; each step writes its name to ``lines``."""
    flow = Workflow()
    flow.add("charge", tasks.record, lines, "charge")
    for house in HOUSES:
        flow.add(f"reserve-{house}", tasks.record, lines, f"reserve-{house}", after=["charge"])
    flow.add("ship", tasks.record, lines, "ship", after=[f"reserve-{h}" for h in HOUSES])
    flow.add("mail", tasks.record, lines, "mail", after=["ship"])
    return flow


def test_the_order_pipeline_runs_each_step_after_the_ones_it_names(
    engine_db: str, tmp_path: Path
) -> None:
    lines = str(tmp_path / "lines")
    jobs = order_pipeline(lines).enqueue()

    assert list(jobs) == ["charge", *(f"reserve-{h}" for h in HOUSES), "ship", "mail"]
    run_until_finished([job.id for job in jobs.values()])
    ran = tasks.read_lines(lines)
    assert sorted(ran) == sorted(jobs)
    position = {name: ran.index(name) for name in ran}
    for house in HOUSES:
        assert position["charge"] < position[f"reserve-{house}"] < position["ship"]
    assert position["ship"] < position["mail"]
    assert all(result(job.id).status == TaskResultStatus.SUCCESSFUL for job in jobs.values())


def test_a_failed_step_fails_what_waits_for_its_success(engine_db: str, tmp_path: Path) -> None:
    lines = str(tmp_path / "lines")
    flow = Workflow()
    flow.add("charge", tasks.fail_once_without_retry, "card declined")
    flow.add("ship", tasks.record, lines, "ship", after=["charge"])
    flow.add("release", tasks.record, lines, "release", after=["charge"], on="finish")
    jobs = flow.enqueue()

    run_until_finished([job.id for job in jobs.values()])
    assert tasks.read_lines(lines) == ["release"]
    shipped = result(jobs["ship"].id)
    assert shipped.status == TaskResultStatus.FAILED
    assert result(jobs["release"].id).status == TaskResultStatus.SUCCESSFUL


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda f: f.add("a", tasks.add, 1, 1).add("b", tasks.add, 2, 2, after=["a", "z"]),
            "step 'b' waits for 'z', which no step of the workflow is called",
        ),
        (
            lambda f: (
                f.add("a", tasks.add, 1, 1, after=["c"])
                .add("b", tasks.add, 2, 2, after=["a"])
                .add("c", tasks.add, 3, 3, after=["b"])
            ),
            "the workflow's steps wait for each other: ",
        ),
        (lambda f: f, "the workflow has no step"),
    ],
    ids=["unknown-step", "circle", "empty"],
)
def test_a_workflow_that_cannot_run_is_refused_before_anything_is_written(
    engine_db: str, build, message: str
) -> None:
    flow = build(Workflow())
    with pytest.raises(ValueError, match=message):
        flow.enqueue()
    assert row_counts(engine_db) == no_rows()


def test_the_circle_is_named_step_by_step(engine_db: str) -> None:
    flow = Workflow().add("a", tasks.add, 1, 1, after=["b"]).add("b", tasks.add, 2, 2, after=["a"])
    with pytest.raises(ValueError) as refused:
        flow.enqueue()
    circle = str(refused.value).split(": ", 1)[1]
    assert circle in ("'a' -> 'b' -> 'a'", "'b' -> 'a' -> 'b'")


def test_a_bad_step_is_refused_when_added() -> None:
    flow = Workflow().add("a", tasks.add, 1, 1)
    with pytest.raises(ValueError, match="step 'a' is added twice"):
        flow.add("a", tasks.add, 2, 2)
    with pytest.raises(ValueError, match="a step name must be a string of 1 to 200"):
        flow.add("", tasks.add, 2, 2)
    with pytest.raises(ValueError, match=r"step 'b': on must be one of"):
        flow.add("b", tasks.add, 2, 2, after=["a"], on="sometimes")
    with pytest.raises(TypeError, match="step 'b': after must be a list of step names"):
        flow.add("b", tasks.add, 2, 2, after="a")


def test_a_step_of_another_backend_is_refused_before_anything_is_written(engine_db: str) -> None:
    elsewhere = {
        "default": {"BACKEND": LATER_BACKEND, "QUEUES": []},
        "elsewhere": {"BACKEND": f"{FRAMEWORK}.backends.dummy.DummyBackend"},
    }
    with tasks_setting(elsewhere):
        other = tasks.add.using(backend="elsewhere")
        flow = Workflow().add("a", tasks.add, 1, 1).add("b", other, 2, 2, after=["a"])
        refused = re.escape("step 'b': task tests.engine.tasks.add uses backend 'elsewhere'")
        with pytest.raises(InvalidTask, match=refused):
            flow.enqueue()
    assert row_counts(engine_db) == no_rows()


def test_a_bad_argument_in_the_last_step_writes_no_step(engine_db: str) -> None:
    flow = Workflow().add("a", tasks.add, 1, 1).add("b", tasks.add, object(), 2, after=["a"])
    with pytest.raises(TypeError):
        flow.enqueue()
    assert row_counts(engine_db) == no_rows()


def test_a_workflow_joins_the_callers_transaction(engine_db: str, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), transaction.atomic(using=engine_db):
        order_pipeline(str(tmp_path / "lines")).enqueue()
        raise RuntimeError("the view failed after the enqueue")
    assert row_counts(engine_db) == no_rows()
