"""OpenTelemetry tracing: a span around each enqueue and one around each task call,
the enqueue's trace context stored in the job record in between.

The contract:

* **On or off.** On only when opentelemetry-api is importable (decided once, when this
  module is imported: nothing is imported per call), ``LATER["TRACING"]`` is not False,
  and a tracer provider is set globally (an SDK's; not the API's default proxy, not
  ``NoOpTracerProvider``). Off, :func:`active_tracer` is all an enqueue adds: one call
  reading a flag, the setting and (while no provider is set) the API's global. No
  statement is ever added: the context rides in the record the enqueue writes anyway.
* **Enqueue** (:func:`enqueue_span`, around ``engine.enqueue.enqueue_jobs``, so every way
  in: ``enqueue``, ``enqueue_many``, ``continue_with``, ``enqueue_to_partition``,
  ``enqueue_unique``, recurring occurrences): one span of kind PRODUCER per call, named
  ``send <queue>`` (``send`` when the batch spans queues), current while the jobs are
  written, with the messaging attributes (``messaging.system`` = ``later_django``,
  ``messaging.operation.type`` = ``send``, ``messaging.destination.name``; one job:
  ``messaging.message.id``; several: ``messaging.batch.message_count``) and
  ``later_django.task`` when the jobs share one task. It yields the carrier: what the
  globally configured propagator injects for the span (W3C ``traceparent``,
  ``tracestate``, ``baggage`` by default), or None when it injects nothing. Every job of
  the call stores that one carrier as ``JobRecord.trace``. A sampled-out span injects
  its context with the not-sampled flag, so the worker's parent-based sampler drops the
  execution too.
* **Execution** (:func:`execution_span`, around the task call in
  ``worker.task_calls``): one span of kind CONSUMER named ``process <queue>``, whose
  parent is the context extracted from the record's carrier (none, or one the
  propagator cannot read: a root span), current during the task call (the task's own
  spans are its children), with the same attributes (``messaging.operation.type`` =
  ``process``) and ``later_django.attempt``. An exception raised by the task is
  recorded on it (``record_exception``), its status set to ERROR, and raised on. Each
  attempt is one span, a child of the same enqueue span: the record, carrier included,
  is kept through retries.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from later_django import __version__
from later_django.conf import LaterSettings, later_settings
from later_django.core.records import JobRecord

try:
    from opentelemetry import propagate, trace
    from opentelemetry.environment_variables import OTEL_PYTHON_TRACER_PROVIDER
    from opentelemetry.trace import (
        NoOpTracerProvider,
        ProxyTracerProvider,
        SpanKind,
        Status,
        StatusCode,
        Tracer,
        TracerProvider,
    )
except ImportError:  # the extra later-django[otel] is not installed: tracing is off
    INSTALLED = False
    _DIRECT = False
else:
    INSTALLED = True
    #: Read the API's global provider where it keeps it (None until one is set): one
    #: attribute load, where ``get_tracer_provider()`` looks the environment up on each
    #: call while none is set. Not when OTEL_PYTHON_TRACER_PROVIDER names one (only
    #: ``get_tracer_provider()`` loads it), nor on an API without that global.
    _DIRECT = hasattr(trace, "_TRACER_PROVIDER") and OTEL_PYTHON_TRACER_PROVIDER not in os.environ

SYSTEM = "later_django"
_NO_SPAN: AbstractContextManager[None] = nullcontext()
#: The global tracer provider last seen, and its tracer (None: the API's default, off).
_seen: tuple[object, Tracer | None] = (None, None)


def active_tracer(settings: LaterSettings) -> Tracer | None:
    """The tracer to start later_django's spans with, or None when tracing is off: the
    one check an enqueue makes. The global provider is asked per call, so a provider set
    after Django started is used; its tracer is made once per provider."""
    if not (INSTALLED and settings.tracing):
        return None
    provider = trace._TRACER_PROVIDER if _DIRECT else trace.get_tracer_provider()
    if provider is None:  # no SDK configured
        return None
    seen, tracer = _seen
    return tracer if provider is seen else _tracer_of(provider)


def _tracer_of(provider: TracerProvider) -> Tracer | None:
    """``provider``'s tracer, None for the API's default proxy or a no-op provider."""
    global _seen
    tracer = (
        None
        if isinstance(provider, ProxyTracerProvider | NoOpTracerProvider)
        else provider.get_tracer(SYSTEM, __version__)
    )
    _seen = (provider, tracer)
    return tracer


@contextmanager
def enqueue_span(
    tracer: Tracer, task_paths: Sequence[str], queues: Sequence[str], job_ids: Sequence[str]
) -> Iterator[dict[str, str] | None]:
    """The PRODUCER span of one enqueue call of ``job_ids`` (their task paths and queues
    in the same order), current inside the block; yields the carrier to store in each
    job's record (None: nothing to store). An exception is recorded on it and raised on."""
    queue_names = set(queues)
    queue = next(iter(queue_names)) if len(queue_names) == 1 else None
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
    }
    if queue is not None:
        attributes["messaging.destination.name"] = queue
    if len(job_ids) == 1:
        attributes["messaging.message.id"] = job_ids[0]
    else:
        attributes["messaging.batch.message_count"] = len(job_ids)
    tasks = set(task_paths)
    if len(tasks) == 1:
        attributes["later_django.task"] = next(iter(tasks))
    name = "send" if queue is None else f"send {queue}"
    with tracer.start_as_current_span(name, kind=SpanKind.PRODUCER, attributes=attributes):
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        yield carrier or None


def execution_span(record: JobRecord) -> AbstractContextManager[None]:
    """The CONSUMER span of one attempt of ``record``'s task, to wrap the task call in
    (a context manager that does nothing when tracing is off)."""
    if not INSTALLED:
        return _NO_SPAN
    tracer = active_tracer(later_settings())
    if tracer is None:
        return _NO_SPAN
    return _execution(tracer, record)


@contextmanager
def _execution(tracer: Tracer, record: JobRecord) -> Iterator[None]:
    carrier = record.trace if isinstance(record.trace, dict) else {}
    # extract() starts from an empty context: no carrier, no parent (a root span).
    parent = propagate.extract(carrier)
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": record.queue_name,
        "messaging.message.id": record.job_id,
        "later_django.task": record.task_path,
        "later_django.attempt": record.attempts,
    }
    with tracer.start_as_current_span(
        f"process {record.queue_name}",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield
        except BaseException as error:  # the task's failure (caught by the caller)
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            raise
