"""OpenTelemetry tracing (``later_django.engine.tracing``): the enqueue's PRODUCER span,
the trace context stored in the record, the execution's CONSUMER span continuing it; off
without an SDK, with ``LATER["TRACING"] = False`` or without opentelemetry-api.

One SDK ``TracerProvider`` (an in-memory exporter behind a ``SimpleSpanProcessor``) is
made once per test process. It is not installed for good as the global provider, which
``set_tracer_provider`` sets only once and which would then trace every later test of the
process: :func:`use_provider` puts it in the API's global for one test (the state
``set_tracer_provider`` leaves, as OpenTelemetry's own test helpers do), and the ``sdk``
fixture does that and empties the exporter."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext

import msgpack
import pytest
from django.db import connections
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased
from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, SpanKind, StatusCode

from later_django.api import continue_with, enqueue_many
from later_django.compat.tasks import TaskResultStatus, task
from later_django.conf import later_settings
from later_django.core.keys import job_key
from later_django.core.records import JobRecord, decode_record, encode_record
from later_django.engine import metrics, tracing
from later_django.exceptions import ParentNotFound
from later_django.storage.stores import stores_for
from later_django.testing import run_jobs
from tests.engine import tasks
from tests.engine.support import NAMESPACE, run_burst

ROLLED_BACK = pytest.mark.django_db(databases="__all__")
COMMITTED = pytest.mark.django_db(transaction=True, databases="__all__")

EXPORTER = InMemorySpanExporter()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))
#: The application's own spans (the request an enqueue happens in).
APP_TRACER = PROVIDER.get_tracer("tests.engine.test_tracing")

#: The sampled bit of a traceparent's flags.
SAMPLED = 0x01
#: Attempts of ``fails_once`` so far.
attempts_seen: list[int] = []


@task(retry={"max_retries": 1, "backoff": "immediate"})
def fails_once() -> str:
    attempts_seen.append(len(attempts_seen) + 1)
    if len(attempts_seen) == 1:
        raise tasks.Boom("the first attempt fails")
    return "second time"


@task
def enqueues_add(a: int) -> int:
    """Enqueues ``add(a, 1)`` from inside a job."""
    tasks.add.enqueue(a, 1)
    return a


def use_provider(monkeypatch: pytest.MonkeyPatch, provider: object) -> None:
    """``provider`` as the global tracer provider until the test ends (None: none set)."""
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    assert provider is None or trace.get_tracer_provider() is provider


@pytest.fixture
def sdk(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The SDK provider as the global one for this test; its exporter, emptied."""
    use_provider(monkeypatch, PROVIDER)
    EXPORTER.clear()
    attempts_seen.clear()
    yield EXPORTER
    EXPORTER.clear()


def spans(exporter: InMemorySpanExporter, kind: SpanKind) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.kind == kind]


def stored(alias: str, job_id: str) -> tuple[JobRecord, dict[str, object]]:
    """The record of ``job_id`` and its MessagePack map, as stored."""
    raw = stores_for(alias).kv.get(job_key(NAMESPACE, job_id))
    assert raw is not None
    return decode_record(raw), msgpack.unpackb(raw, raw=False)


def parent_span_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


@ROLLED_BACK
def test_the_execution_span_continues_the_trace_of_the_request_that_enqueued(
    engine_db: str, sdk: InMemorySpanExporter
) -> None:
    with APP_TRACER.start_as_current_span("POST /checkout", kind=SpanKind.SERVER) as request:
        enqueued = tasks.add.enqueue(2, 3)
    [ran] = run_jobs()  # outside the request's span: the parent comes from the record

    assert ran.status == TaskResultStatus.SUCCESSFUL
    [send] = spans(sdk, SpanKind.PRODUCER)
    [process] = spans(sdk, SpanKind.CONSUMER)
    trace_id = request.get_span_context().trace_id
    assert send.context.trace_id == process.context.trace_id == trace_id
    assert parent_span_id(send) == request.get_span_context().span_id
    assert parent_span_id(process) == send.context.span_id
    assert process.parent is not None and process.parent.is_remote
    assert send.name == "send default" and process.name == "process default"
    assert dict(send.attributes or {}) == {
        "messaging.system": "later_django",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": "default",
        "messaging.message.id": enqueued.id,
        "later_django.task": "tests.engine.tasks.add",
    }
    assert dict(process.attributes or {}) == {
        "messaging.system": "later_django",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": "default",
        "messaging.message.id": enqueued.id,
        "later_django.task": "tests.engine.tasks.add",
        "later_django.attempt": 1,
    }
    assert process.status.status_code == StatusCode.UNSET
    record, body = stored(engine_db, enqueued.id)
    assert record.trace is not None and body["trace"] == record.trace
    version, carried_trace, carried_span, flags = record.trace["traceparent"].split("-")
    assert (version, carried_trace, carried_span) == (
        "00",
        f"{trace_id:032x}",
        f"{send.context.span_id:016x}",
    )
    assert int(flags, 16) & SAMPLED


@COMMITTED
def test_a_worker_thread_continues_the_trace_from_the_record(
    engine_db: str, sdk: InMemorySpanExporter
) -> None:
    with APP_TRACER.start_as_current_span("POST /checkout", kind=SpanKind.SERVER) as request:
        enqueued = tasks.add.enqueue(1, 1)
    run_burst()

    [send] = spans(sdk, SpanKind.PRODUCER)
    [process] = spans(sdk, SpanKind.CONSUMER)
    assert process.context.trace_id == request.get_span_context().trace_id
    assert parent_span_id(process) == send.context.span_id
    assert (process.attributes or {})["messaging.message.id"] == enqueued.id


@ROLLED_BACK
def test_a_failing_task_s_span_has_status_error_and_the_exception(
    engine_db: str, sdk: InMemorySpanExporter
) -> None:
    tasks.fail_once_without_retry.enqueue("card declined")
    [ran] = run_jobs()

    assert ran.status == TaskResultStatus.FAILED
    [process] = spans(sdk, SpanKind.CONSUMER)
    assert process.status.status_code == StatusCode.ERROR
    assert process.status.description == "Boom: card declined"
    [event] = process.events
    assert event.name == "exception"
    assert (event.attributes or {})["exception.type"].endswith("Boom")
    assert (event.attributes or {})["exception.message"] == "card declined"
    [send] = spans(sdk, SpanKind.PRODUCER)
    assert send.status.status_code == StatusCode.UNSET


@ROLLED_BACK
def test_each_attempt_is_a_span_under_the_same_enqueue(
    engine_db: str, sdk: InMemorySpanExporter
) -> None:
    enqueued = fails_once.enqueue()
    [ran] = run_jobs()

    assert ran.status == TaskResultStatus.SUCCESSFUL and attempts_seen == [1, 2]
    [send] = spans(sdk, SpanKind.PRODUCER)
    first, second = spans(sdk, SpanKind.CONSUMER)
    assert [(span.attributes or {})["later_django.attempt"] for span in (first, second)] == [1, 2]
    assert parent_span_id(first) == parent_span_id(second) == send.context.span_id
    assert first.status.status_code == StatusCode.ERROR
    assert second.status.status_code == StatusCode.UNSET
    assert stored(engine_db, enqueued.id)[0].trace is not None


@ROLLED_BACK
def test_every_job_of_enqueue_many_continues_the_batch_span(
    engine_db: str, sdk: InMemorySpanExporter
) -> None:
    with APP_TRACER.start_as_current_span("import", kind=SpanKind.SERVER) as request:
        ids = enqueue_many(tasks.add, [((n, n), {}) for n in range(3)], ids_only=True)
    run_jobs()

    [send] = spans(sdk, SpanKind.PRODUCER)
    assert send.name == "send default"
    attributes = dict(send.attributes or {})
    assert attributes["messaging.batch.message_count"] == 3
    assert "messaging.message.id" not in attributes
    assert parent_span_id(send) == request.get_span_context().span_id
    processes = spans(sdk, SpanKind.CONSUMER)
    assert sorted((span.attributes or {})["messaging.message.id"] for span in processes) == sorted(
        ids
    )
    assert {parent_span_id(span) for span in processes} == {send.context.span_id}
    carriers = [stored(engine_db, job_id)[0].trace for job_id in ids]
    assert carriers[0] is not None and carriers == [carriers[0]] * 3


@ROLLED_BACK
def test_a_job_enqueued_by_a_job_continues_the_same_trace(
    engine_db: str, sdk: InMemorySpanExporter
) -> None:
    with APP_TRACER.start_as_current_span("POST /start", kind=SpanKind.SERVER) as request:
        enqueues_add.enqueue(5)
    assert len(run_jobs()) == 2

    first_send, second_send = spans(sdk, SpanKind.PRODUCER)
    first_process, second_process = spans(sdk, SpanKind.CONSUMER)
    assert (first_process.attributes or {})["later_django.task"].endswith("enqueues_add")
    assert parent_span_id(second_send) == first_process.context.span_id
    assert parent_span_id(second_process) == second_send.context.span_id
    assert parent_span_id(first_send) == request.get_span_context().span_id
    trace_id = request.get_span_context().trace_id
    assert {span.context.trace_id for span in (second_send, second_process)} == {trace_id}


@ROLLED_BACK
def test_a_failed_enqueue_s_span_has_status_error(
    engine_db: str, sdk: InMemorySpanExporter
) -> None:
    with pytest.raises(ParentNotFound):
        continue_with("01NOSUCHPARENT0000000000000", tasks.add, 1, 2)

    [send] = spans(sdk, SpanKind.PRODUCER)
    assert send.status.status_code == StatusCode.ERROR
    assert [event.name for event in send.events] == ["exception"]


def tracing_off_by_api_default(monkeypatch: pytest.MonkeyPatch) -> AbstractContextManager[None]:
    """No SDK configured: the API's default proxy provider."""
    use_provider(monkeypatch, None)
    assert isinstance(trace.get_tracer_provider(), ProxyTracerProvider)
    return nullcontext()


def tracing_off_by_no_op_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> AbstractContextManager[None]:
    use_provider(monkeypatch, NoOpTracerProvider())
    return nullcontext()


def tracing_off_by_setting(monkeypatch: pytest.MonkeyPatch) -> AbstractContextManager[None]:
    use_provider(monkeypatch, PROVIDER)
    settings = later_settings()
    return override_settings(
        LATER={"NAMESPACE": settings.namespace, "DATABASE": settings.database, "TRACING": False}
    )


def tracing_off_without_the_api(monkeypatch: pytest.MonkeyPatch) -> AbstractContextManager[None]:
    use_provider(monkeypatch, PROVIDER)
    monkeypatch.setattr(tracing, "INSTALLED", False)
    return nullcontext()


@ROLLED_BACK
@pytest.mark.parametrize(
    "turn_off",
    [
        tracing_off_by_api_default,
        tracing_off_by_no_op_provider,
        tracing_off_by_setting,
        tracing_off_without_the_api,
    ],
    ids=["no_sdk", "no_op_provider", "setting_false", "no_opentelemetry_api"],
)
def test_with_tracing_off_no_span_is_made_and_no_context_stored(
    engine_db: str,
    monkeypatch: pytest.MonkeyPatch,
    turn_off: Callable[[pytest.MonkeyPatch], AbstractContextManager[None]],
) -> None:
    EXPORTER.clear()
    with turn_off(monkeypatch):
        with APP_TRACER.start_as_current_span("POST /checkout", kind=SpanKind.SERVER):
            one = tasks.add.enqueue(1, 2)
            many = enqueue_many(tasks.add, [((n, n), {}) for n in range(2)], ids_only=True)
        assert len(run_jobs()) == 3

    for job_id in [one.id, *many]:
        record, body = stored(engine_db, job_id)
        assert record.trace is None and "trace" not in body
    # Only the test's own request span: later_django made none.
    assert [span.name for span in EXPORTER.get_finished_spans()] == ["POST /checkout"]
    EXPORTER.clear()


@ROLLED_BACK
def test_a_sampled_out_enqueue_carries_its_decision_and_the_execution_follows_it(
    engine_db: str, sdk: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The web process samples nothing; the worker (PROVIDER) follows its parent.
    dropping = TracerProvider(sampler=ParentBased(ALWAYS_OFF))
    use_provider(monkeypatch, dropping)
    enqueued = tasks.add.enqueue(1, 2)
    use_provider(monkeypatch, PROVIDER)
    run_jobs()

    carrier = stored(engine_db, enqueued.id)[0].trace
    assert carrier is not None
    assert not int(carrier["traceparent"].rsplit("-", 1)[1], 16) & SAMPLED
    assert sdk.get_finished_spans() == ()


@ROLLED_BACK
def test_tracing_adds_no_statement_to_an_enqueue(
    engine_db: str, sdk: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    def statements() -> list[str]:
        metrics.accumulator.take()  # no once-a-second metrics flush in the capture
        with CaptureQueriesContext(connections[engine_db]) as captured:
            tasks.add.enqueue(1, 2)
            enqueue_many(tasks.add, [((n, n), {}) for n in range(3)], ids_only=True)
        return [query["sql"] for query in captured.captured_queries]

    traced = statements()
    use_provider(monkeypatch, NoOpTracerProvider())
    untraced = statements()

    assert len(spans(sdk, SpanKind.PRODUCER)) == 2
    assert len(traced) == len(untraced) > 0, (traced, untraced)


def test_a_record_without_the_trace_field_decodes_and_runs_as_a_root_span(
    sdk: InMemorySpanExporter,
) -> None:
    record = JobRecord(
        job_id="01J0000000000000000000000A",
        namespace=NAMESPACE,
        task_path="tests.engine.tasks.add",
        args=[1, 2],
        kwargs={},
        queue_name="default",
        priority=0,
        backend="default",
        stage="enqueued",
        stage_at_ms=1,
        created_at_ms=1,
    )
    raw = encode_record(record)
    body = msgpack.unpackb(raw, raw=False)
    assert "trace" not in body  # what every record written before tracing holds
    old = decode_record(msgpack.packb(body, use_bin_type=True))
    assert old.trace is None and old == record

    with APP_TRACER.start_as_current_span("unrelated current span"):
        with tracing.execution_span(old):
            pass
        record.trace = {"traceparent": "00-not-a-valid-context-01"}
        with tracing.execution_span(decode_record(encode_record(record))):
            pass

    no_carrier, invalid_carrier = spans(sdk, SpanKind.CONSUMER)
    assert no_carrier.parent is None and invalid_carrier.parent is None
    assert no_carrier.context.trace_id != invalid_carrier.context.trace_id


@ROLLED_BACK
def test_the_provider_is_also_found_through_get_tracer_provider(
    engine_db: str, sdk: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path taken when OTEL_PYTHON_TRACER_PROVIDER names the provider (or the API
    has no ``_TRACER_PROVIDER``)."""
    monkeypatch.setattr(tracing, "_DIRECT", False)
    tasks.add.enqueue(1, 1)
    run_jobs()

    [send] = spans(sdk, SpanKind.PRODUCER)
    [process] = spans(sdk, SpanKind.CONSUMER)
    assert parent_span_id(process) == send.context.span_id


def test_without_opentelemetry_the_module_imports_and_stays_off() -> None:
    """A process where ``import opentelemetry`` fails (the extra not installed)."""
    code = """
import sys
sys.modules["opentelemetry"] = None  # makes every import of it raise ImportError
from later_django.conf import LaterSettings
from later_django.core.records import JobRecord
from later_django.engine import tracing
record = JobRecord("id", "ns", "t.p", [], {}, "default", 0, "default", "enqueued", 1, 1)
with tracing.execution_span(record):
    pass
print(tracing.INSTALLED, tracing.active_tracer(LaterSettings()))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "None"]
