"""``enqueue_many``'s fast path makes what the general one made: the same ids (ULIDs),
records, bytes, writes, results and errors."""

from __future__ import annotations

import enum
import itertools
import math
from collections import OrderedDict
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import msgpack
import pytest
from django.db import connections, transaction
from django.utils import timezone
from ulid import ULID

from later_django.api import enqueue_many
from later_django.backend import LaterBackend
from later_django.compat.tasks import TaskResult, TaskResultDoesNotExist, task_enqueued
from later_django.core import commands, payload, records, stages
from later_django.core.commands import ExecuteJob, decode_command, encode_command
from later_django.core.records import JobError, JobRecord, decode_record, encode_record
from later_django.engine import moves
from later_django.engine.enqueue import NewJob, _new_record, _new_records
from later_django.engine.results import task_result
from later_django.engine.writes import JobWrites
from tests.engine import tasks
from tests.engine.support import key_column, no_rows, result, row_counts

MAX_RANDOM = (1 << 80) - 1
MS = 1_796_309_587_790  # a millisecond in 2026


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """``time.time_ns`` as records.py sees it: the values of the returned list (in
    milliseconds), the last one repeated; randomness from a fresh state."""
    moments = [MS]

    def time_ns() -> int:
        moment = moments.pop(0) if len(moments) > 1 else moments[0]
        return moment * 1_000_000

    monkeypatch.setattr(records.time, "time_ns", time_ns)
    records._forget_last_ulid()
    yield moments
    records._forget_last_ulid()


def random_bytes(monkeypatch: pytest.MonkeyPatch, *values: int) -> None:
    """``os.urandom`` as records.py sees it: ``values`` in turn, as 10 bytes each."""
    queue = list(values)
    monkeypatch.setattr(records.os, "urandom", lambda size: queue.pop(0).to_bytes(size, "big"))


def as_ulids(ids: list[str]) -> list[ULID]:
    parsed = [ULID.from_str(each) for each in ids]
    assert [str(each) for each in parsed] == ids
    return parsed


# --- ids ---


def test_new_job_ids_are_ulids_of_now_in_ascending_order() -> None:
    before = timezone.now().timestamp() * 1000
    ids = records.new_job_ids(3000)
    after = timezone.now().timestamp() * 1000

    assert len(set(ids)) == 3000 and ids == sorted(ids)
    assert all(len(each) == 26 for each in ids)
    parsed = as_ulids(ids)
    assert all(before - 1 <= each.milliseconds <= after + 1 for each in parsed)
    # Within a millisecond each id is the one before plus one (python-ulid's rule).
    for first, second in itertools.pairwise(parsed):
        if first.milliseconds == second.milliseconds:
            assert int(second) == int(first) + 1
    assert records.new_job_ids(0) == []


def test_ids_of_one_millisecond_continue_across_calls_and_across_the_tail_boundary(
    frozen_clock: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    start = (0x0123456789ABCDEF0123 & ~1023) | 1020  # 4 below a multiple of 1024
    random_bytes(monkeypatch, start)

    ids = [*records.new_job_ids(3), records.new_job_id(), *records.new_job_ids(2000)]

    parsed = as_ulids(ids)
    assert {each.milliseconds for each in parsed} == {MS}
    assert [int(each) & MAX_RANDOM for each in parsed] == list(range(start, start + 2004))
    assert ids == sorted(ids)


def test_ids_of_a_new_millisecond_start_from_fresh_randomness(
    frozen_clock: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    frozen_clock[:] = [MS, MS + 1]
    random_bytes(monkeypatch, 5, 7_000)

    first, second = as_ulids([records.new_job_id(), records.new_job_id()])

    assert (first.milliseconds, int(first) & MAX_RANDOM) == (MS, 5)
    assert (second.milliseconds, int(second) & MAX_RANDOM) == (MS + 1, 7_000)


def test_exhausted_randomness_waits_for_the_next_millisecond(
    frozen_clock: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    frozen_clock[:] = [MS, MS, MS, MS, MS + 1]
    random_bytes(monkeypatch, MAX_RANDOM - 3, 42)

    ids = records.new_job_ids(2) + records.new_job_ids(5)

    parsed = as_ulids(ids)
    assert [each.milliseconds for each in parsed] == [MS] * 2 + [MS + 1] * 5
    assert [int(each) & MAX_RANDOM for each in parsed] == [
        MAX_RANDOM - 3,
        MAX_RANDOM - 2,
        *range(42, 47),
    ]
    assert ids == sorted(ids)


def test_a_fresh_start_too_near_the_top_draws_again(
    frozen_clock: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    random_bytes(monkeypatch, MAX_RANDOM - 2, 9)

    parsed = as_ulids(records.new_job_ids(10))

    assert [int(each) & MAX_RANDOM for each in parsed] == list(range(9, 19))


def test_a_forked_child_starts_its_ids_afresh(
    frozen_clock: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    random_bytes(monkeypatch, 100, 5_000)
    parent = records.new_job_id()
    records._forget_last_ulid()  # what os.register_at_fork runs in the child
    child = records.new_job_id()

    assert [int(each) & MAX_RANDOM for each in as_ulids([parent, child])] == [100, 5_000]


# --- MessagePack ---


def reference_encoding(record: JobRecord) -> bytes:
    """encode_record as it was (msgpack.packb of the same map): the stored format."""
    body: dict[str, Any] = {"v": records.RECORD_FORMAT_VERSION}
    for short, name in records._FIELDS.items():
        value = getattr(record, name)
        if value is not None or short in records._REQUIRED:
            body[short] = value
    body["hist"] = [[stage, at] for stage, at in record.history]
    body["errors"] = [
        [error.exception_class_path, error.traceback, error.at_ms, error.attempt]
        for error in record.errors
    ]
    return msgpack.packb(body, use_bin_type=True)


def sample_records() -> list[JobRecord]:
    fresh = JobRecord(
        job_id=records.new_job_id(),
        namespace="default",
        task_path="tests.engine.tasks.add",
        args=[1, [2.5, None], {"a": True}],
        kwargs={"b": "é", "c": {"d": []}},
        queue_name="default",
        priority=-3,
        backend="default",
        stage=stages.ENQUEUED,
        stage_at_ms=MS,
        created_at_ms=MS,
    )
    full = fresh.clone()
    for name in (
        "run_after_ms",
        "ready_at_ms",
        "partition_id",
        "sequence",
        "enqueued_at_ms",
        "started_at_ms",
        "finished_at_ms",
        "last_attempted_at_ms",
    ):
        setattr(full, name, MS + 7)
    full.retry = {"max_retries": 2}
    full.parent_job_id, full.run_on, full.reason = records.new_job_id(), "finish", "why"
    full.recurring_id, full.topic, full.trace = "nightly", "orders", {"traceparent": "00-x"}
    full.return_value = {"sum": 3}
    full.stage = stages.FAILED
    full.history = [(stages.ENQUEUED, MS), (stages.RUNNING, MS + 1)]
    full.errors = [JobError("builtins.ValueError", "Traceback ...", MS + 2, 1)]
    full.worker_ids = ["worker-1"]
    return [fresh, full]


def test_records_encode_to_the_same_bytes_as_before_and_decode_back() -> None:
    for record in sample_records():
        encoded = encode_record(record)
        assert encoded == reference_encoding(record)
        assert decode_record(encoded) == record


def test_a_record_that_cannot_be_packed_leaves_the_packer_clean() -> None:
    bad, good = sample_records()
    bad.args = [object()]
    with pytest.raises(TypeError):
        encode_record(bad)
    assert encode_record(good) == reference_encoding(good)


def test_delivery_messages_are_the_same_bytes_one_by_one_or_for_a_batch() -> None:
    ids = [*records.new_job_ids(3), "caller-chosen"]
    expected = [
        msgpack.packb({"c": "job", "id": job_id, "t": "tasks.add"}, use_bin_type=True)
        for job_id in ids
    ]

    assert [encode_command(ExecuteJob(job_id, "tasks.add")) for job_id in ids] == expected
    assert commands.execute_job_payloads([(job_id, "tasks.add") for job_id in ids]) == expected
    assert decode_command(expected[0]) == ExecuteJob(ids[0], "tasks.add")


# --- arguments ---


class Colour(enum.IntEnum):
    RED = 1


class Name(str):
    pass


ACCEPTED = [
    None,
    True,
    0,
    -(2**70),
    1.5,
    "",
    "é",
    (),
    (1, "a", None),
    [[1, (2, 3)], {"k": (4,)}],
    {},
    {"a": {"b": [1.0, {"c": None}]}},
    Colour.RED,
    [Colour.RED],
    {"k": Name("v")},
    {Name("k"): 1},
    OrderedDict(a=1),
    [OrderedDict(a=(1,))],
]
REFUSED = [
    float("nan"),
    [1, float("inf")],
    {"a": [float("-inf")]},
    object(),
    [1, {"a": b"bytes"}],
    {1: "int key"},
    {"a": {2: "x"}},
    (1, {3}),
    [OrderedDict(a=object())],
]


def outcome(check: Any, value: Any) -> tuple[str, Any]:
    try:
        return "ok", check(value)
    except TypeError as error:
        return "refused", str(error)


@pytest.mark.parametrize(
    ("value", "accepted"), [(each, True) for each in ACCEPTED] + [(each, False) for each in REFUSED]
)
def test_the_quick_check_of_arguments_agrees_with_the_full_check(
    value: Any, accepted: bool
) -> None:
    quick = outcome(lambda each: payload.json_compatible(each, "args"), value)
    full = outcome(lambda each: payload._checked(each, "args"), value)

    assert quick == full
    assert (quick[0] == "ok") == accepted
    if accepted:
        assert type(quick[1]) is type(full[1])


@pytest.mark.parametrize("value", ACCEPTED + REFUSED)
def test_a_call_is_checked_as_its_args_and_kwargs_are(value: Any) -> None:
    for args, kwargs in [((value,), {}), ([1, value], {"x": value}), ((), {"x": value})]:
        pair = outcome(lambda call: payload.json_compatible_call(*call), (args, kwargs))
        expected = outcome(
            lambda call: (
                payload._checked(list(call[0]), "args"),
                payload._checked(dict(call[1]), "kwargs"),
            ),
            (args, kwargs),
        )
        assert pair == expected


def test_refused_values_are_named_where_they_sit() -> None:
    with pytest.raises(TypeError, match=r"kwargs\['a'\]\[0\] is nan, which is not JSON"):
        payload.json_compatible_call((), {"a": [math.nan]})
    with pytest.raises(TypeError, match=r"args\[1\] has the key 3 of type int"):
        payload.json_compatible_call((1, {3: 4}), {})


# --- records and writes ---


def new_jobs(count: int, **shared: Any) -> list[NewJob]:
    template = NewJob(
        task_path="tests.engine.tasks.add",
        args=[],
        kwargs={},
        queue_name="default",
        priority=0,
        backend="default",
        **shared,
    )
    return [template.with_arguments([n, [n]], {"k": n}) for n in range(count)]


def test_a_job_with_other_arguments_equals_one_built_by_its_constructor() -> None:
    (job,) = new_jobs(1, run_after_ms=MS, retry={"max_retries": 1})
    built = NewJob(
        task_path="tests.engine.tasks.add",
        args=[0, [0]],
        kwargs={"k": 0},
        queue_name="default",
        priority=0,
        backend="default",
        run_after_ms=MS,
        retry={"max_retries": 1},
    )
    assert job == built and repr(job) == repr(built)
    with pytest.raises(AttributeError):
        job.priority = 3  # type: ignore[misc]  # still frozen


@pytest.mark.parametrize("run_after_ms", [None, MS + 60_000])
def test_records_of_a_batch_equal_those_made_one_by_one(run_after_ms: int | None) -> None:
    jobs = new_jobs(4, run_after_ms=run_after_ms)
    other = NewJob("tests.engine.tasks.add_on_emails", [9], {}, "emails", 5, "default")
    jobs.insert(2, other)  # a job of another kind in the middle
    ids = records.new_job_ids(len(jobs))
    trace = {"traceparent": "00-abc"}

    batch = _new_records(jobs, ids, "default", MS, trace)
    one_by_one = [
        _new_record(job, job_id, "default", MS, trace)
        for job, job_id in zip(jobs, ids, strict=True)
    ]

    assert batch == one_by_one
    assert [record.stage for record in batch].count(stages.ENQUEUED) == (
        5 if run_after_ms is None else 1
    )
    for first, second in itertools.pairwise(batch):
        for name in ("history", "errors", "worker_ids"):
            assert getattr(first, name) is not getattr(second, name)


def written(writes: JobWrites) -> dict[str, Any]:
    """What ``writes`` would write, comparable."""
    return {
        "records": {
            key: (encode_record(record), ttl) for key, (record, ttl) in writes.records.items()
        },
        "publishes": dict(writes.table.publishes),
        "operations": writes.table.operations,
        "index": writes.table.index_changes,
        "transitions": sorted(writes.metrics.transitions),
    }


def test_placing_ready_records_together_writes_what_place_new_writes() -> None:
    jobs = new_jobs(3)
    jobs.insert(1, NewJob("tests.engine.tasks.add_on_emails", [9], {}, "emails", 5, "default"))
    made = _new_records(jobs, records.new_job_ids(len(jobs)), "default", MS, None)
    one_by_one, together = JobWrites("default"), JobWrites("default")

    for record in [record.clone() for record in made]:
        moves.place_new(one_by_one, record, MS)
    moves.place_ready(together, made, MS)

    assert written(together) == written(one_by_one)
    assert list(together.records) == [record.key for record in made]


# --- through the database ---

pytestmark_db = pytest.mark.django_db(transaction=True, databases="__all__")


@pytestmark_db
def test_results_equal_what_get_result_reads_back(engine_db: str) -> None:
    delayed = tasks.add.using(run_after=timezone.now() + timedelta(hours=1), priority=4)
    calls = [((n, [n, {"x": (n,)}]), {}) for n in range(5)]
    for task in (tasks.add, delayed):
        enqueued = enqueue_many(task, calls)
        backend = task.get_backend()
        assert enqueued == [backend.get_result(each.id) for each in enqueued]
        assert enqueued == [
            task_result(decode_record(encode_record_of(engine_db, each.id)), task)
            for each in enqueued
        ]
        assert all(type(each) is TaskResult for each in enqueued)
        assert enqueued[1].args == [1, [1, {"x": [1]}]]
        enqueued[1].args.append("mine")
        enqueued[1].errors.append("mine")  # type: ignore[arg-type]
        assert enqueued[2].args == [2, [2, {"x": [2]}]] and enqueued[2].errors == []
        assert enqueued[0].errors == [] and enqueued[3].worker_ids == []


def encode_record_of(alias: str, job_id: str) -> bytes:
    """The stored bytes of job ``job_id``'s record."""
    with connections[alias].cursor() as cursor:
        cursor.execute(
            f"SELECT value FROM later_storage WHERE {key_column(alias)} = %s",
            [f"default-job-{job_id}"],
        )
        return bytes(cursor.fetchone()[0])


@pytestmark_db
def test_a_unique_task_gets_the_holders_result_for_a_duplicate(engine_db: str) -> None:
    announced: list[str] = []

    def receiver(sender: object, task_result: TaskResult, **kwargs: object) -> None:
        announced.append(task_result.id)

    task_enqueued.connect(receiver)
    try:
        first = enqueue_many(tasks.unique_by_arguments, [((1, 2), {})])
        again = enqueue_many(tasks.unique_by_arguments, [((3, 4), {}), ((1, 2), {}), ((3, 4), {})])
    finally:
        task_enqueued.disconnect(receiver)

    assert again[1] == first[0]
    assert again[2] == again[0] != first[0]
    assert announced == [first[0].id, again[0].id]


@pytestmark_db
def test_signals_announce_each_result_once_on_commit(engine_db: str) -> None:
    announced: list[TaskResult] = []

    def receiver(sender: object, task_result: TaskResult, **kwargs: object) -> None:
        announced.append(task_result)

    task_enqueued.connect(receiver)
    try:
        with transaction.atomic(using=engine_db):
            enqueued = enqueue_many(tasks.add, [((n, 1), {}) for n in range(20)])
            assert announced == []
    finally:
        task_enqueued.disconnect(receiver)

    assert [each.id for each in announced] == [each.id for each in enqueued]
    assert all(mine is theirs for mine, theirs in zip(announced, enqueued, strict=True))


@pytestmark_db
@pytest.mark.parametrize("ids_only", [False, True])
def test_a_batch_in_a_rolled_back_transaction_leaves_nothing(
    engine_db: str, ids_only: bool
) -> None:
    with pytest.raises(RuntimeError), transaction.atomic(using=engine_db):
        enqueued = enqueue_many(tasks.add, [((n, 1), {}) for n in range(30)], ids_only=ids_only)
        raise RuntimeError("the caller's own work failed")

    assert row_counts(engine_db) == no_rows()
    ids = enqueued if ids_only else [each.id for each in enqueued]  # type: ignore[union-attr]
    with pytest.raises(TaskResultDoesNotExist):
        result(ids[0])


@pytestmark_db
def test_a_mixed_batch_publishes_its_ready_jobs_in_order(engine_db: str) -> None:
    backend = tasks.add.get_backend()
    assert isinstance(backend, LaterBackend)
    later = tasks.add.using(run_after=timezone.now() + timedelta(hours=1))
    plan = [tasks.add, tasks.add_on_emails, later, tasks.add, tasks.add_on_emails]
    jobs = [backend.new_job(task, (n, 1), {}) for n, task in enumerate(plan)]

    enqueued = backend.write_jobs(plan, jobs)

    assert [backend.get_result(each.id) for each in enqueued] == enqueued
    with connections[engine_db].cursor() as cursor:
        cursor.execute("SELECT queue_name, payload FROM later_delivery_queue ORDER BY sequence")
        rows = [(queue, decode_command(bytes(raw)).job_id) for queue, raw in cursor.fetchall()]
    ready = [each for each, task in zip(enqueued, plan, strict=True) if task is not later]
    # Each queue's messages in batch order (the order between queues is the driver's).
    by_queue: dict[str, list[str]] = {}
    for queue, job_id in rows:
        by_queue.setdefault(queue, []).append(job_id)
    assert by_queue == {
        queue: [each.id for each in ready if each.task.queue_name == queue]
        for queue in ("default", "emails")
    }
    assert row_counts(engine_db)["later_jobs_index"] == 1
