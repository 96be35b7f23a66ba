"""``later_worker --metrics-port``: the worker's figures over HTTP for Prometheus.

One process: :func:`serve_process` starts prometheus-client's HTTP server on a
daemon thread of the worker, with the worker's families and the process
collector. A supervisor (``--processes N``): :class:`SupervisorExport` gives the
children a directory for prometheus-client's multiprocess files before they are
forked, serves the families summed over its children (and those that have
exited: counters never go back), drops a dead child's live gauges, and removes
the directory at exit. Each child then writes its figures to files only
(:func:`child_telemetry`).

The families are :data:`later_django.core.metric_names.WORKER_METRICS`.
"""

from __future__ import annotations

import bisect
import collections
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from later_django.core.metric_names import DURATION_BUCKETS, WORKER_METRICS
from later_django.core.records import JobRecord
from later_django.engine.execution.values import Outcome, StartedJob
from later_django.worker.telemetry import Telemetry, outcome_label

try:
    import prometheus_client
    from prometheus_client import (
        CollectorRegistry,
        Counter,
        Gauge,
        Histogram,
        ProcessCollector,
        multiprocess,
        values,
    )
except ImportError as error:  # pragma: no cover - the extra is installed in the tests
    raise ImportError(
        "later_worker --metrics-port needs prometheus-client: pip install 'later-django[metrics]'"
    ) from error

MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: How often a worker writes its figures to prometheus-client (each loop turn calls
#: ``threads``; an idle loop turns at least once a second). Under ``--processes`` each
#: write is a locked write to a shared file: per job, they cost more than the job's
#: own bookkeeping.
WRITE_SECONDS = 0.1
_HELP = {metric.name: metric.help for metric in WORKER_METRICS}
_LABELS = {metric.name: list(metric.labels) for metric in WORKER_METRICS}


class PrometheusTelemetry(Telemetry):
    """The worker's reports as prometheus-client families in ``registry`` (None: not
    registered anywhere, as a supervised child's, whose values go to files).

    Claims, waits, outcomes and durations are gathered in memory and written every
    WRITE_SECONDS from the loop's turn (``threads``), and at exit (``flush``): a scrape
    sees them at most about a second late. Timeouts go the same way; lease losses and
    database errors are rare and written at once."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        def made(kind: Any, name: str, **extra: Any) -> Any:
            return kind(name, _HELP[name], _LABELS[name], registry=registry, **extra)

        self._jobs = made(Counter, "later_jobs")
        self._duration = made(Histogram, "later_job_duration_seconds", buckets=DURATION_BUCKETS)
        self._wait = made(Histogram, "later_job_wait_seconds", buckets=DURATION_BUCKETS)
        self._claimed = made(Counter, "later_claimed_jobs")
        self._lease_losses = made(Counter, "later_lease_losses")
        self._database_errors = made(Counter, "later_database_errors")
        self._lock_conflicts = made(Counter, "later_lock_conflicts")
        # Summed over the live children; a dead child's are dropped (mark_process_dead).
        self._busy = made(Gauge, "later_worker_busy_threads", multiprocess_mode="livesum")
        self._threads = made(Gauge, "later_worker_threads", multiprocess_mode="livesum")
        self._last_threads = (-1, -1)
        self._children: dict[tuple[Any, ...], Any] = {}
        # What happened since the last write (main thread only, see Telemetry).
        self._claimed_since: collections.Counter[str] = collections.Counter()
        self._waits_since: dict[str, list[float]] = collections.defaultdict(list)
        self._ended_since: collections.Counter[tuple[str, str, str]] = collections.Counter()
        self._durations_since: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
        self._written_at = time.monotonic()

    def started(self, jobs: Sequence[StartedJob], now_ms: int) -> None:
        for job in jobs:
            record = job.record
            self._claimed_since[record.queue_name] += 1
            if record.ready_at_ms is not None:
                wait = max(now_ms - record.ready_at_ms, 0) / 1000
                self._waits_since[record.queue_name].append(wait)

    def finished(self, outcomes: Sequence[Outcome], records: Sequence[JobRecord]) -> None:
        for outcome, record in zip(outcomes, records, strict=True):
            label = outcome_label(record)
            if label is None:
                continue
            self._ended_since[record.task_path, record.queue_name, label] += 1
            self._durations_since[record.task_path, record.queue_name].append(outcome.seconds)

    def threads(self, busy: int, total: int) -> None:
        """Called each loop turn (at least once a second): writes what happened since
        the last write, and the thread gauges, at most every WRITE_SECONDS."""
        if time.monotonic() - self._written_at >= WRITE_SECONDS:
            self.flush(busy, total)

    def flush(self, busy: int | None = None, total: int | None = None) -> None:
        """Writes the claims, waits, outcomes and durations gathered since the last
        write (and the thread gauges, when given and changed).

        The gauges are written first: a scrape reads the files while a write goes on,
        so one that finds every count of this write also finds the gauges of the same
        moment (the counts written before the gauges let a scrape see the last job
        counted while its thread still showed busy)."""
        if busy is not None and total is not None and (busy, total) != self._last_threads:
            self._last_threads = (busy, total)
            self._busy.set(busy)
            self._threads.set(total)
        for queue, count in self._claimed_since.items():
            self._child(self._claimed, queue).inc(count)
        for queue, amounts in self._waits_since.items():
            observe_all(self._child(self._wait, queue), amounts)
        for labels, count in self._ended_since.items():
            self._child(self._jobs, *labels).inc(count)
        for (task, queue), amounts in self._durations_since.items():
            observe_all(self._child(self._duration, task, queue), amounts)
        self._claimed_since.clear()
        self._waits_since.clear()
        self._ended_since.clear()
        self._durations_since.clear()
        self._written_at = time.monotonic()

    def timed_out(self, jobs: Sequence[StartedJob], seconds: Sequence[float]) -> None:
        for job, ran in zip(jobs, seconds, strict=True):
            record = job.record
            self._ended_since[record.task_path, record.queue_name, "timed_out"] += 1
            self._durations_since[record.task_path, record.queue_name].append(ran)

    def _child(self, family: Any, *labels: str) -> Any:
        """``family.labels(*labels)``, kept: prometheus-client checks the labels and
        takes a lock on every ``labels()`` call, which cost more than the ``inc``
        itself. The cache is bounded as the labels are (task paths and queues)."""
        key = (id(family), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = family.labels(*labels)
        return child

    def lease_lost(self, lease: str, count: int) -> None:
        self._lease_losses.labels(lease).inc(count)

    def database_error(self) -> None:
        self._database_errors.inc()

    def lock_conflict(self, kind: str) -> None:
        self._lock_conflicts.labels(kind=kind).inc()


def observe_all(histogram: Any, amounts: Sequence[float]) -> None:
    """Observes every one of ``amounts`` on the labelled ``histogram`` (a child of a
    prometheus-client ``Histogram``), as ``observe`` would one by one, but with one
    write to its sum and one per bucket the batch touches: under ``--processes`` each
    write is a locked write to a shared file, and ``observe`` makes two per value.
    Reads the client's bucket layout (``_upper_bounds``, ``_buckets``, ``_sum``, the
    same since its 0.x releases); a client laid out otherwise gets ``observe`` per
    value."""
    bounds = getattr(histogram, "_upper_bounds", None)
    buckets = getattr(histogram, "_buckets", None)
    total = getattr(histogram, "_sum", None)
    if bounds is None or buckets is None or total is None or len(bounds) != len(buckets):
        for amount in amounts:
            histogram.observe(amount)
        return
    # observe() counts a value in the first bucket whose bound is >= it; the last
    # bound is +Inf, so every value has one.
    counts = collections.Counter(bisect.bisect_left(bounds, amount) for amount in amounts)
    total.inc(sum(amounts))
    for index, count in counts.items():
        buckets[index].inc(count)


def serve_process(port: int, host: str) -> PrometheusTelemetry:
    """Serves this process's families (and its process collector) on ``host:port``
    from a daemon thread; returns the telemetry that feeds them. Raises ``OSError``
    when the port cannot be bound."""
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    telemetry = PrometheusTelemetry(registry)
    prometheus_client.start_http_server(port, addr=host, registry=registry)
    return telemetry


def child_telemetry() -> PrometheusTelemetry:
    """In a supervised child: telemetry whose values go to the supervisor's
    multiprocess directory. The value class is chosen here, not at import: the
    project may have imported prometheus-client before the directory was set."""
    if not getattr(values.ValueClass, "_multiprocess", False):
        values.ValueClass = values.MultiProcessValue()
    return PrometheusTelemetry(None)


class SupervisorExport:
    """The supervisor's side of ``--metrics-port`` with ``--processes``."""

    def __init__(self, port: int, host: str) -> None:
        self.port = port
        self.host = host
        self.directory = tempfile.mkdtemp(prefix="later-metrics-")
        self._server: Any = None
        # Read by the children's prometheus-client (they inherit the environment).
        os.environ[MULTIPROCESS_DIR_ENV] = self.directory

    def serve(self) -> None:
        """Serves the children's families summed; raises ``OSError`` for a port in use."""
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=self.directory)
        self._server, _ = prometheus_client.start_http_server(
            self.port, addr=self.host, registry=registry
        )

    def in_child(self) -> PrometheusTelemetry:
        """In a forked child: closes the inherited listening socket (the port must be
        free once the supervisor is gone) and returns the child's telemetry."""
        if self._server is not None:
            self._server.socket.close()
        return child_telemetry()

    def child_gone(self, pid: int) -> None:
        """Drops the live gauges of an exited child (its counters stay in the sums)."""
        multiprocess.mark_process_dead(pid, self.directory)

    def close(self) -> None:
        if os.environ.get(MULTIPROCESS_DIR_ENV) == self.directory:
            del os.environ[MULTIPROCESS_DIR_ENV]
        shutil.rmtree(self.directory, ignore_errors=True)
