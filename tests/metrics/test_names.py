"""The one list of exported names (``core/metric_names.py``) against the docs: every
family has its row in docs/observability.md, and every ``later_*`` name the page
mentions is exported."""

from __future__ import annotations

import re
from pathlib import Path

from later_django.core.metric_names import VIEW_METRICS, WORKER_METRICS, every_sample_name

PAGE = Path(__file__).resolve().parents[2] / "docs" / "observability.md"


def test_every_exported_family_has_its_row_on_the_observability_page() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for metric in (*VIEW_METRICS, *WORKER_METRICS):
        shown = metric.samples[0] if metric.kind == "counter" else metric.name
        assert f"| `{shown}` | {metric.kind} |" in text, metric.name


def test_every_later_name_on_the_page_is_exported() -> None:
    text = PAGE.read_text(encoding="utf-8")
    mentioned = set(re.findall(r"`(later_[a-z_]+)(?:\{[^`]*\})?`", text))
    families = {metric.name for metric in (*VIEW_METRICS, *WORKER_METRICS)}
    unknown = {name for name in mentioned if name not in every_sample_name() | families}
    # Table names, settings keys and modules are not metric names.
    unknown -= {"later_django", "later_worker", "later_status"}
    assert unknown == set()


def test_counters_end_in_total_and_units_are_base_units() -> None:
    for metric in (*VIEW_METRICS, *WORKER_METRICS):
        assert not metric.name.endswith("_total"), metric.name
        assert not re.search(r"_(ms|milliseconds|minutes|kb|mb)\b", metric.name), metric.name
        assert "job_id" not in metric.labels


def test_each_rows_meaning_on_the_page_is_the_help_prometheus_shows() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for metric in (*VIEW_METRICS, *WORKER_METRICS):
        shown = metric.samples[0] if metric.kind == "counter" else metric.name
        [row] = [line for line in text.splitlines() if line.startswith(f"| `{shown}` |")]
        assert row.rsplit("|", 2)[-2].strip() == metric.help, metric.name


def test_the_wait_histogram_and_the_claims_say_they_count_attempts() -> None:
    """A retried job is observed once per attempt (28 waits for 25 jobs, 3 retried)."""
    by_name = {metric.name: metric for metric in WORKER_METRICS}
    for name in ("later_job_wait_seconds", "later_claimed_jobs"):
        assert "attempt" in by_name[name].help, name
