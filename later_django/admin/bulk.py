"""Bulk actions of the job lists: which apply to a stage, the request that names the
jobs (the selected rows, or all that match the list's filters), and how one runs.

Every run goes through the engine's batched functions
(:mod:`later_django.engine.job_actions.bulk`): :data:`BATCH_SIZE` jobs per transaction,
and an "all matching" run looks at :data:`ROWS_PER_REQUEST` rows at most in one
request, then hands back the cursor to continue from (the confirmation page offers
it). The selected rows are at most a page (:data:`SELECTED_MAX`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from django.http import QueryDict

from later_django import inputs
from later_django.admin.job_filters import RELATIVE_TIMES, ListFilter
from later_django.admin.jobs import PAGE_SIZE
from later_django.core import stages
from later_django.engine.job_actions import bulk
from later_django.engine.job_actions.selection import (
    BULK_CANCEL_STAGES,
    BULK_DELETE_STAGES,
    BULK_RUN_NOW_STAGES,
    DEFAULT_BATCH_SIZE,
    QUEUE_CURSOR,
    BulkOutcome,
    JobSelection,
)

#: Jobs per transaction of a bulk action from the dashboard.
BATCH_SIZE = DEFAULT_BATCH_SIZE
#: Rows an "all matching" action looks at in one request, at most (matching or not):
#: a request then holds no transaction longer than a batch and ends in seconds.
ROWS_PER_REQUEST = 10_000
#: Job ids a "selected" action takes: the rows of one page.
SELECTED_MAX = PAGE_SIZE
#: The scopes of a bulk request: the ticked rows, every row of the page, all matching.
SELECTED, PAGE, MATCHING = "selected", "page", "matching"
#: The form field of each scope's job ids.
_ID_FIELDS = {SELECTED: "job_id", PAGE: "page_job_id"}
_JOB_ID = re.compile(r"[0-9A-Za-z_-]{1,64}")


@dataclass(frozen=True)
class BulkAction:
    """One bulk action: its form value, its button, the stages it applies to, the
    sentence saying what it does, the verb of its outcome and the engine's function."""

    name: str
    label: str
    stages: tuple[str, ...]
    consequence: str
    done: str
    run: Callable[..., BulkOutcome]


BULK_ACTIONS: dict[str, BulkAction] = {
    action.name: action
    for action in (
        BulkAction(
            "retry",
            "Retry",
            (stages.FAILED,),
            "Each job is enqueued again and runs once more; its earlier errors are kept, "
            "so a job whose retries are used up fails for good at its next error.",
            "retried",
            bulk.retry_selected,
        ),
        BulkAction(
            "run_now",
            "Run now",
            BULK_RUN_NOW_STAGES,
            "Each job's schedule entry is removed and the job is enqueued to run at once.",
            "enqueued to run now",
            bulk.run_now_selected,
        ),
        BulkAction(
            "cancel",
            "Cancel",
            BULK_CANCEL_STAGES,
            "Each job is written cancelled and will not run; a running job (or one on a "
            "topic partition) is asked to stop and recorded cancelled when it ends.",
            "cancelled",
            bulk.cancel_selected,
        ),
        BulkAction(
            "delete",
            "Delete",
            BULK_DELETE_STAGES,
            "Each job is removed for good: its record, its row in the job lists, its "
            "schedule entry and its place among its parent's continuations. A job with "
            "continuations waiting for it is refused.",
            "deleted",
            bulk.delete_selected,
        ),
    )
}


class BulkRequestError(ValueError):
    """A bulk request the list cannot run; the message names the value and the rule."""


def actions_for(stage: str) -> list[BulkAction]:
    """The bulk actions that apply to jobs of ``stage``, in button order."""
    return [action for action in BULK_ACTIONS.values() if stage in action.stages]


@dataclass(frozen=True)
class BulkRequest:
    """What a bulk form or confirmation page names: an action on the jobs of a stage,
    ``job_ids`` (the selected rows) or, when empty, all that ``list_filter`` matches,
    from ``cursor`` on (where an earlier request of the same run stopped)."""

    action: BulkAction
    stage: str
    list_filter: ListFilter
    job_ids: tuple[str, ...] = ()
    cursor: str | None = None

    @classmethod
    def from_query(cls, stage: str, query: QueryDict) -> BulkRequest:
        """The request of a form's fields (``action``; ``scope``: ``selected`` with the
        ticked ``job_id``s, ``page`` with the page's ``page_job_id``s, or ``matching``
        with the filters and ``cursor``); ``InputError`` for a value that breaks its
        rule (a field given twice, a NUL, over-long, an unreadable cursor: 400),
        ``BulkRequestError`` naming what else is wrong."""
        name = _field(query, "action")
        action = BULK_ACTIONS.get(name)
        if action is None:
            known = ", ".join(BULK_ACTIONS)
            raise BulkRequestError(f"action {name!r} is not a bulk action; use one of {known}")
        if stage not in action.stages:
            raise BulkRequestError(
                f"{action.label} does not apply to {stage} jobs; it applies to "
                f"{', '.join(action.stages)} jobs"
            )
        scope = _field(query, "scope")
        list_filter = ListFilter.from_query(query)
        cursor = checked_cursor(stage, inputs.one("cursor", query.getlist("cursor")) or "")
        if scope == MATCHING:
            return cls(action, stage, list_filter, (), cursor)
        if scope not in _ID_FIELDS:
            raise BulkRequestError(
                f"scope {scope!r} is not one; use {SELECTED}, {PAGE} or {MATCHING}"
            )
        return cls(action, stage, list_filter, _checked_ids(query.getlist(_ID_FIELDS[scope])))

    @property
    def scope(self) -> str:
        return SELECTED if self.job_ids else MATCHING

    def selection(self, now_ms: int) -> JobSelection:
        """The engine's selection: the ticked rows (as long as they are still in the
        stage), or the filters' (``FilterError`` for a bad filter value)."""
        if self.job_ids:
            return JobSelection(stage=self.stage, job_ids=self.job_ids)
        return self.list_filter.selection(self.stage, now_ms)

    def run(self, using: str, namespace: str, now_ms: int, *, dry_run: bool) -> BulkOutcome:
        """Runs (or with ``dry_run`` counts) the action: :data:`BATCH_SIZE` jobs per
        transaction; all matching: :data:`ROWS_PER_REQUEST` rows looked at at most
        (``outcome.resume_cursor`` set when it stopped before the end)."""
        return self.action.run(
            self.selection(now_ms),
            using=using,
            namespace=namespace,
            batch_size=BATCH_SIZE,
            dry_run=dry_run,
            cursor=self.cursor,
            max_rows=None if self.job_ids else ROWS_PER_REQUEST,
        )

    def fixed_at(self, now_ms: int) -> BulkRequest:
        """This request with relative times (``1h``…) written as the UTC times they
        mean at ``now_ms``, so the confirmed run takes what the confirmation counted."""
        values = {"since": self.list_filter.since, "until": self.list_filter.until}
        for name, value in values.items():
            if value in RELATIVE_TIMES:
                moment = (now_ms - RELATIVE_TIMES[value][1]) / 1000
                values[name] = datetime.fromtimestamp(moment, tz=UTC).isoformat(
                    timespec="milliseconds"
                )
        fixed = ListFilter(
            task=self.list_filter.task,
            queue=self.list_filter.queue,
            error=self.list_filter.error,
            **values,
        )
        return BulkRequest(self.action, self.stage, fixed, self.job_ids, self.cursor)

    def with_cursor(self, cursor: str | None) -> BulkRequest:
        return BulkRequest(self.action, self.stage, self.list_filter, self.job_ids, cursor)

    def fields(self) -> list[tuple[str, str]]:
        """The form fields that name this request again (hidden inputs, a link)."""
        named = [("action", self.action.name), ("scope", self.scope)]
        named += list(self.list_filter.params().items())
        named += [("job_id", job_id) for job_id in self.job_ids]
        if self.cursor:
            named.append(("cursor", self.cursor))
        return named


#: The longest ``action`` or ``scope`` value read (the known ones are far shorter).
_WORD_LENGTH = 40


def _field(query: QueryDict, name: str) -> str:
    """The one value of a word field (``action``, ``scope``): ``InputError`` when given
    twice, holding a NUL or longer than :data:`_WORD_LENGTH`; ``""`` when absent."""
    value = inputs.one(name, query.getlist(name)) or ""
    return inputs.text(name, value, max_length=_WORD_LENGTH, empty=True)


def checked_cursor(stage: str, value: str) -> str | None:
    """The cursor of a list of ``stage`` that a link or an earlier request of a bulk
    run handed back (``None`` when empty: the start); ``InputError`` (400) for text
    that is not one (:func:`~later_django.inputs.job_list_cursor`) or a queue cursor
    outside the ``enqueued`` list, so a bulk action refuses it rather than reading it
    as "from the start"."""
    cursor = inputs.job_list_cursor("cursor", value)
    if cursor is not None and cursor.startswith(QUEUE_CURSOR) and stage != stages.ENQUEUED:
        raise inputs.InputError(
            "cursor", cursor, f"is a queue cursor; only the {stages.ENQUEUED} list has one"
        )
    return cursor


def _checked_ids(job_ids: list[str]) -> tuple[str, ...]:
    """The ticked job ids, once each; ``BulkRequestError`` for none, too many, or one
    that cannot be a job id (``InputError`` for a NUL or an over-long one)."""
    for job_id in job_ids[: SELECTED_MAX * 2]:
        inputs.text("job_id", job_id, max_length=inputs.NAME_LENGTH, empty=True)
    unique = tuple(dict.fromkeys(job_id.strip() for job_id in job_ids if job_id.strip()))
    if not unique:
        raise BulkRequestError("no job was selected: tick at least one row, or choose all matching")
    if len(unique) > SELECTED_MAX:
        raise BulkRequestError(
            f"{len(unique)} jobs were selected; at most {SELECTED_MAX} (a page) can be, "
            "choose all matching for more"
        )
    for job_id in unique:
        if not _JOB_ID.fullmatch(job_id):
            raise BulkRequestError(
                f"{inputs.shown(job_id)} is not a job id (letters, digits, - and _ only)"
            )
    return unique


def outcome_text(action: BulkAction, outcome: BulkOutcome) -> str:
    """What a run did, in one sentence: matched, changed, refused, batches."""
    text = (
        f"{action.label}: {outcome.matched} matched, {outcome.changed} {action.done}, "
        f"{outcome.refused} refused, in {outcome.batches} batch"
        f"{'' if outcome.batches == 1 else 'es'}."
    )
    if outcome.requested:
        text += f" Of those, {outcome.requested} running were asked to stop."
    return text
