"""Every key layout of ``later_storage``: the one place a ``<ns>-…`` key is spelled.

All keys start with the namespace, so namespaces never meet. Times inside keys
are epoch milliseconds zero-padded to :data:`DUE_DIGITS` digits, so byte order
equals time order and a schedule is read with one half-open key range.

* ``<ns>-job-<id>``: a job record;
* ``<ns>-job-<id>-next``: range of the ids of the continuations waiting for it (a
  child of several parents, ``api.after``, as :data:`FAN_IN_MARK` + its id);
* ``<ns>-job-<id>-pending``: a counter-only row: how many parents of the fan-in
  child ``<id>`` have not finished yet;
* ``<ns>-job-<id>-undecodable``: the original bytes of a record that could not
  be decoded, kept next to the failed record that replaced it;
* ``<ns>-due-<ms>-<id>``: schedule entry of a delayed or requeued job;
* ``<ns>-recurring-<id>``: a recurring definition;
* ``<ns>-recurdue-<ms>-<id>``: the recurring schedule index;
* ``<ns>-pass-<name>``: which process runs a maintenance pass (a lease);
* ``<ns>-paused-<queue>``: a paused queue (its value: when and by whom);
* ``<ns>-unique-<task path>:<key>``: the job holding a unique key (its id);
* ``<ns>-cancel-<id>``: a request to cancel a job that a worker must carry out
  (its value: the job's topic partition, when it has one);
* ``<ns>-slot-<queue>-<n>``: one of a limited queue's running slots (a fenced lease:
  the holder in the value, the lease's end as expiry, the epoch as counter);
* ``<ns>-rate-<queue>``: the start times within a rate-limited queue's window.

Names that start with :data:`RESERVED_PREFIX` (queues, topics) are the
library's own.
"""

from __future__ import annotations

#: Digits of the zero-padded times in schedule keys (enough until year 33658).
DUE_DIGITS = 15

#: Queue and topic names starting with this are reserved for later_django.
RESERVED_PREFIX = "__later"


def job_key(namespace: str, job_id: str) -> str:
    return f"{namespace}-job-{job_id}"


def job_key_prefix(namespace: str) -> str:
    """What every job record key of ``namespace`` starts with (then the job id)."""
    return f"{namespace}-job-"


def children_key(namespace: str, job_id: str) -> str:
    return f"{namespace}-job-{job_id}-next"


#: What starts a children range's member that names a child of several parents
#: (``api.after``) rather than a ``continue_with`` child: not a ULID character.
FAN_IN_MARK = b"&"


def fan_in_member(job_id: str) -> bytes:
    """The member a fan-in child ``job_id`` has in each of its parents' children ranges."""
    return FAN_IN_MARK + job_id.encode()


def member_child(member: bytes) -> tuple[str, bool]:
    """The child id a children range's ``member`` names, and whether it is a fan-in
    child (one that waits for all of several parents)."""
    if member.startswith(FAN_IN_MARK):
        return member[len(FAN_IN_MARK) :].decode(), True
    return member.decode(), False


def pending_parents_key(namespace: str, job_id: str) -> str:
    """The counter of the parents the fan-in child ``job_id`` still waits for."""
    return f"{namespace}-job-{job_id}-pending"


#: What ends the key of a parent's dependents counter (:func:`dependents_key`); the
#: sweep spells the key in SQL with it.
DEPENDENTS_SUFFIX = "-dependents"


def dependents_key(namespace: str, job_id: str) -> str:
    """The counter of the children of ``job_id`` (``continue_with`` or ``after``) that
    have not finished: while it exists the sweep keeps the parent's record, whose
    result they may read (``engine.parent_holds``)."""
    return f"{namespace}-job-{job_id}{DEPENDENTS_SUFFIX}"


def workflow_key(namespace: str, workflow_id: str) -> str:
    """The row of a workflow or batch: what it is, when it began, its callbacks."""
    return f"{namespace}-flow-{workflow_id}"


def workflow_key_bounds(namespace: str) -> tuple[str, str]:
    """``[start, stop)`` of every workflow row key: ``-`` sorts before ``.``."""
    return f"{namespace}-flow-", f"{namespace}-flow."


def workflow_jobs_key(namespace: str, workflow_id: str) -> str:
    """The range of a workflow's job ids, in the order they joined it."""
    return f"{namespace}-flow-{workflow_id}-jobs"


def workflow_count_key(namespace: str, workflow_id: str, stage: str, shard: int) -> str:
    """One stripe of the counter of a workflow's jobs in ``stage``; the stripes of a
    stage are summed on read (:func:`workflow_count_bounds`)."""
    return f"{namespace}-flown-{workflow_id}-{stage}-{shard}"


def workflow_count_bounds(namespace: str, workflow_id: str) -> tuple[str, str]:
    """``[start, stop)`` of every count stripe of ``workflow_id``."""
    return f"{namespace}-flown-{workflow_id}-", f"{namespace}-flown-{workflow_id}."


def live_workflows_key(namespace: str) -> str:
    """The range of the workflows not yet seen at rest (no job live), oldest first."""
    return f"{namespace}-flows-live"


def workflows_at_rest_key(namespace: str, state: str) -> str:
    """The counter of the workflows kept at rest in ``state`` (failed, cancelled,
    succeeded)."""
    return f"{namespace}-flows-{state}"


def workflows_at_rest_bounds(namespace: str) -> tuple[str, str]:
    """``[start, stop)`` of every :func:`workflows_at_rest_key` of ``namespace``."""
    return f"{namespace}-flows-", f"{namespace}-flows."


def workflow_expiry_key(namespace: str, due_at_ms: int, workflow_id: str) -> str:
    """When a workflow at rest is forgotten (its row, jobs range and counts deleted)."""
    return f"{namespace}-flowdue-{due_at_ms:0{DUE_DIGITS}d}-{workflow_id}"


def workflow_expiry_bounds(namespace: str, now_ms: int) -> tuple[str, str]:
    """``[start, stop)`` of the workflow expiries due at ``now_ms``."""
    return f"{namespace}-flowdue-", f"{namespace}-flowdue-{now_ms + 1:0{DUE_DIGITS}d}"


def stage_of_workflow_count_key(key: str) -> str:
    """The stage a count stripe key counts (its part before the shard)."""
    return key.rsplit("-", 2)[1]


def undecodable_key(namespace: str, job_id: str) -> str:
    return f"{namespace}-job-{job_id}-undecodable"


def due_key(namespace: str, due_at_ms: int, job_id: str) -> str:
    return f"{namespace}-due-{due_at_ms:0{DUE_DIGITS}d}-{job_id}"


def due_scan_bounds(namespace: str, now_ms: int) -> tuple[str, str]:
    """``[start, stop)`` of the schedule entries due at ``now_ms``."""
    return f"{namespace}-due-", f"{namespace}-due-{now_ms + 1:0{DUE_DIGITS}d}"


def job_id_of_due_key(key: str) -> str:
    return key.rsplit("-", 1)[1]


def recurring_key(namespace: str, recurring_id: str) -> str:
    return f"{namespace}-recurring-{recurring_id}"


def recurring_key_bounds(namespace: str) -> tuple[str, str]:
    """``[start, stop)`` of every recurring definition key: ``-`` sorts before ``.``."""
    return f"{namespace}-recurring-", f"{namespace}-recurring."


def recurring_due_key(namespace: str, next_run_ms: int, recurring_id: str) -> str:
    return f"{namespace}-recurdue-{next_run_ms:0{DUE_DIGITS}d}-{recurring_id}"


def recurring_due_bounds(namespace: str, now_ms: int) -> tuple[str, str]:
    """``[start, stop)`` of the recurring index keys due at ``now_ms``."""
    return f"{namespace}-recurdue-", f"{namespace}-recurdue-{now_ms + 1:0{DUE_DIGITS}d}"


def parse_recurring_due_key(namespace: str, key: str) -> tuple[int, str]:
    """``(next run ms, recurring id)`` of a recurring index key."""
    rest = key[len(f"{namespace}-recurdue-") :]
    return int(rest[:DUE_DIGITS]), rest[DUE_DIGITS + 1 :]


def pass_lease_key(namespace: str, name: str) -> str:
    return f"{namespace}-pass-{name}"


def paused_queue_key(namespace: str, queue_name: str) -> str:
    return f"{namespace}-paused-{queue_name}"


def paused_queue_bounds(namespace: str) -> tuple[str, str]:
    """``[start, stop)`` of every paused-queue key: ``-`` sorts before ``.``."""
    return f"{namespace}-paused-", f"{namespace}-paused."


def queue_of_paused_key(namespace: str, key: str) -> str:
    """The queue name of a paused-queue key."""
    return key[len(f"{namespace}-paused-") :]


def unique_key(namespace: str, task_path: str, key: str) -> str:
    """The key held by a unique job of ``task_path`` (task paths hold no ``:``)."""
    return f"{namespace}-unique-{task_path}:{key}"


def cancel_request_key(namespace: str, job_id: str) -> str:
    return f"{namespace}-cancel-{job_id}"


def cancel_request_bounds(namespace: str) -> tuple[str, str]:
    """``[start, stop)`` of every cancel request key: ``-`` sorts before ``.``."""
    return f"{namespace}-cancel-", f"{namespace}-cancel."


def job_id_of_cancel_request_key(namespace: str, key: str) -> str:
    return key[len(f"{namespace}-cancel-") :]


def queue_slot_key(namespace: str, queue_name: str, number: int) -> str:
    return f"{namespace}-slot-{queue_name}-{number:05d}"


def queue_rate_key(namespace: str, queue_name: str) -> str:
    return f"{namespace}-rate-{queue_name}"


def is_reserved(name: str) -> bool:
    """True for queue and topic names that belong to later_django itself."""
    return name.startswith(RESERVED_PREFIX)
