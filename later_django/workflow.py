"""A workflow declared up front: named steps, each with the steps it waits for, checked
whole and then enqueued in one transaction.

::

    flow = Workflow()
    flow.add("charge", charge_card, order.id)
    for house in ("north", "south", "east"):
        flow.add(f"reserve-{house}", reserve_stock, house, order.id, after=["charge"])
    flow.add("ship", create_shipment, order.id, after=[f"reserve-{h}" for h in houses])
    flow.add("mail", mail_tracking, order.id, after=["ship"])
    jobs = flow.enqueue()          # {"charge": TaskResult, ...}

Nothing is written until :meth:`Workflow.enqueue`, and it writes nothing when a step
names a step that does not exist or the steps wait for each other in a circle: it
raises ``ValueError`` naming them first. A step with one parent is a ``continue_with``
child, with several an :func:`~later_django.api.after` child; the rules of both hold
(docs/workflows.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from typing import Any

from django.db import transaction

from later_django.api import after
from later_django.backend import LaterBackend
from later_django.compat.tasks import InvalidTask, Task, TaskResult
from later_django.conf import later_settings
from later_django.core.records import new_job_id
from later_django.engine import batch_scope, workflow_retry, workflows
from later_django.engine.enqueue import CONTINUE_ON
from later_django.engine.workflows import WorkflowState
from later_django.storage.stores import stores_for

#: The longest step name (names are a workflow's own; they are not stored).
NAME_LENGTH = 200


@dataclass(frozen=True)
class Step:
    """One step: its task and arguments, the steps it waits for, and on what."""

    name: str
    task: Task
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    after: tuple[str, ...]
    on: str


class Workflow:
    """Steps added with :meth:`add`, enqueued together with :meth:`enqueue`. ``name``
    (optional, at most 200 characters) is shown on its admin page; ``id`` is the
    workflow's id (its jobs carry it, :func:`get_workflow` and
    :func:`cancel_workflow` take it)."""

    def __init__(self, name: str = "") -> None:
        if not isinstance(name, str) or len(name) > NAME_LENGTH:
            raise ValueError(f"a workflow name is at most {NAME_LENGTH} characters, got {name!r}")
        self._steps: dict[str, Step] = {}
        self.name = name
        self.id = new_job_id()

    def add(
        self,
        name: str,
        task: Task,
        *args: Any,
        after: Iterable[str] = (),
        on: str = "success",
        **kwargs: Any,
    ) -> Workflow:
        """Adds the step ``name``: ``task(*args, **kwargs)``, run once the steps named
        in ``after`` have succeeded (``on="success"``) or finished (``on="finish"``);
        with no ``after`` it is enqueued ready. Returns the workflow. ``ValueError``
        for a name that is empty, too long or already used, or another ``on``;
        ``TypeError`` for ``after`` given as one string."""
        if not isinstance(name, str) or not name or len(name) > NAME_LENGTH:
            raise ValueError(
                f"a step name must be a string of 1 to {NAME_LENGTH} characters, got {name!r}"
            )
        if name in self._steps:
            raise ValueError(f"step {name!r} is added twice: step names are unique")
        if isinstance(after, str):
            raise TypeError(f"step {name!r}: after must be a list of step names, got {after!r}")
        if on not in CONTINUE_ON:
            raise ValueError(f"step {name!r}: on must be one of {CONTINUE_ON}, got {on!r}")
        self._steps[name] = Step(name, task, args, kwargs, tuple(dict.fromkeys(after)), on)
        return self

    def order(self) -> list[str]:
        """The step names, each after the steps it waits for. ``ValueError`` naming the
        step and the name when a step waits for an unknown step, and naming the circle
        when steps wait for each other; ``ValueError`` for a workflow with no step."""
        if not self._steps:
            raise ValueError("the workflow has no step: add one before enqueue()")
        for step in self._steps.values():
            missing = [name for name in step.after if name not in self._steps]
            if missing:
                raise ValueError(
                    f"step {step.name!r} waits for {', '.join(map(repr, missing))}, "
                    "which no step of the workflow is called"
                )
        graph = TopologicalSorter({step.name: step.after for step in self._steps.values()})
        try:
            return list(graph.static_order())
        except CycleError as error:
            circle = " -> ".join(map(repr, error.args[1]))
            raise ValueError(f"the workflow's steps wait for each other: {circle}") from None

    def enqueue(self) -> dict[str, TaskResult]:
        """Checks the whole workflow (:meth:`order`, and that every task is a
        ``LaterBackend`` task), then enqueues every step in one transaction on
        ``LATER["DATABASE"]`` (joining the caller's, if any): all of them or none.
        Returns each step's ``TaskResult`` by name. A step's arguments are checked by
        its enqueue, so a bad one rolls the whole workflow back. Its jobs carry its
        :attr:`id`, and its row is written in the same transaction; enqueued inside
        a batch, its jobs join the batch instead (:attr:`id` becomes the batch's)."""
        names = self.order()
        for step in self._steps.values():
            _check_backend(step)
        results: dict[str, TaskResult] = {}
        settings = later_settings()
        with (
            transaction.atomic(using=settings.database),
            batch_scope.joining(self.id) as joined,
        ):
            if joined == self.id:
                row = workflows.new_row(self.id, "workflow", self.name, {})
                workflows.write_row(stores_for(settings.database), settings.namespace, row)
            self.id = joined
            for name in names:
                step = self._steps[name]
                if step.after:
                    parents = [results[parent] for parent in step.after]
                    results[name] = after(parents, step.task, *step.args, on=step.on, **step.kwargs)
                else:
                    results[name] = step.task.enqueue(*step.args, **step.kwargs)
        return {name: results[name] for name in self._steps}


def _check_backend(step: Step) -> None:
    """``InvalidTask`` naming the step when its task does not use a ``LaterBackend``."""
    backend = step.task.get_backend()
    if not isinstance(backend, LaterBackend):
        raise InvalidTask(
            f"step {step.name!r}: task {step.task.module_path} uses backend "
            f"{step.task.backend!r} ({type(backend).__name__}), not a later_django LaterBackend"
        )


def get_workflow(workflow_id: str) -> WorkflowState | None:
    """The workflow or batch ``workflow_id`` as it is now: its row (kind, name, when,
    callbacks) and its jobs counted by stage, with its ``state`` (``running``,
    ``failed``, ``cancelled``, ``succeeded``); ``None`` when there is none. Two reads."""
    settings = later_settings()
    return workflows.read(stores_for(settings.database), settings.namespace, workflow_id)


def workflow_jobs(workflow_id: str) -> list[str]:
    """The ids of every job of the workflow or batch ``workflow_id``, in the order they
    joined it (parents before their children); empty for an unknown one. One read."""
    settings = later_settings()
    return workflows.job_ids(stores_for(settings.database), settings.namespace, workflow_id)


def cancel_workflow(workflow_id: str) -> dict[str, str]:
    """Cancels every job of the workflow or batch ``workflow_id`` that has not run: as
    ``later_django.api.cancel`` does for each (a running job gets the cancel request;
    its callbacks included). Returns what was done per job id. ``LookupError`` when
    no such workflow exists."""
    settings = later_settings()
    _require(workflow_id)
    return workflows.cancel(settings.database, settings.namespace, workflow_id)


def retry_workflow(workflow_id: str) -> list[str]:
    """Runs again the failed and cancelled jobs of the workflow or batch
    ``workflow_id`` and every job downstream of them (each waits again for the
    parents that run again), in one transaction; what succeeded upstream is kept.
    Returns the ids of the jobs that run again (empty: none failed or was
    cancelled). ``ActionRefused`` while a job of it is still live, or when a job to
    run again is on a topic partition; ``LookupError`` when there is no such
    workflow."""
    settings = later_settings()
    _require(workflow_id)
    return workflow_retry.retry(settings.database, settings.namespace, workflow_id)


def _require(workflow_id: str) -> None:
    """``LookupError`` when ``workflow_id`` has no row."""
    settings = later_settings()
    if not workflows.exists(stores_for(settings.database), settings.namespace, workflow_id):
        raise LookupError(f"no workflow or batch {workflow_id!r}")
