"""The suite's lanes, and the order its files are handed to pytest-xdist workers.

``SLOW`` lists the test files whose tests start real processes (workers, maintenance
processes, dev servers, Chromium, pgbouncer, package builds) or seed tens of thousands
of jobs: most of the suite's time sits in them (docs/testing.md, "Lanes"). Their tests
carry the ``slow`` mark, so ``make test-quick`` (``-m "not slow"``) is the inner loop
and ``make test`` runs both lanes at once.

``CORNERS`` are the slow files whose subject still varies with the Django version
(a fresh ``startproject``, the example project, the migration framework): they carry
the ``corners`` mark too, and the version corners (``bin/matrix``) run
``-m "not slow or corners"``.

The order: ``make test`` hands whole files to its workers (``--dist loadfile``) in
collection order (``--no-loadscope-reorder``), so the slow files, listed here from
the most to the least costly (as measured, docs/testing.md), are collected first and
the quick files, most tests first, fill the workers' tails. A file's own order of
tests is kept.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

#: Slow files, most costly first (seconds on one worker of ``make test``, 2026-12-06).
SLOW = (
    "tests/test_wagtail_site.py",
    "tests/worker/test_faults.py",
    "tests/worker/test_worker_process.py",
    "tests/worker/test_health_file.py",
    "tests/recurring/test_worker_processes.py",
    "tests/partitions/test_worker_processes.py",
    "tests/test_missing_migrations.py",
    "tests/worker/test_limit_workers.py",
    "tests/browser/test_live_refresh.py",
    "tests/browser/test_operator_walk.py",
    "tests/browser/test_mariadb_walk.py",
    "tests/browser/test_operator_clicks.py",
    "tests/browser/test_job_page_style.py",
    "tests/browser/test_workflow_pages.py",
    "tests/worker/test_timeout_workers.py",
    "tests/worker/test_not_transient.py",
    "tests/test_quickstart.py",
    "tests/test_example_project.py",
    "tests/maintenance/test_processes.py",
    "tests/engine/test_command_bad_input.py",
    "tests/browser/test_dashboard_layout.py",
    "tests/worker/test_pause_workers.py",
    "tests/worker/test_fan_in_workers.py",
    "tests/browser/test_demo_page.py",
    "tests/metrics/test_scrapes.py",
    "tests/pgbouncer/test_workers.py",
    "tests/browser/test_dashboard.py",
    "tests/pgbouncer/test_transaction_pooling.py",
    "tests/packaging/test_distributions.py",
    # Property tests: each example asks both databases, about 40 s in all (issue 38).
    "tests/inputs/test_dashboard_properties.py",
    # Their 100,000 jobs are copies of a few enqueued ones (tests/copies.py): 12 s and 7 s.
    "tests/maintenance/test_pass_reads.py",
    "tests/engine/test_promotion.py",
)

#: Slow files the version corners run all the same.
CORNERS = frozenset(
    {
        "tests/test_quickstart.py",
        "tests/test_example_project.py",
        "tests/test_missing_migrations.py",
        "tests/test_wagtail_site.py",
    }
)

MARKS = (
    "slow: starts real processes or seeds tens of thousands of jobs (tests/lanes.py); "
    "make test-quick leaves these out",
    "corners: slow, yet run on every corner of the version matrix (tests/lanes.py)",
)

_ROOT = Path(__file__).resolve().parent.parent


def file_of(item: pytest.Item) -> str:
    """The item's test file, relative to the repository, with forward slashes."""
    return Path(item.path).resolve().relative_to(_ROOT).as_posix()


def pytest_configure(config: pytest.Config) -> None:
    for mark in MARKS:
        config.addinivalue_line("markers", mark)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks the slow files' tests and orders the files: the slow ones first, in
    ``SLOW``'s order, then the rest with the most tests first (a stable sort: each
    file's tests keep their order, and every xdist worker collects the same list)."""
    rank = {name: position for position, name in enumerate(SLOW)}
    files = {id(item): file_of(item) for item in items}
    tests_in = Counter(files.values())
    for item in items:
        name = files[id(item)]
        if name in rank:
            item.add_marker(pytest.mark.slow)
            if name in CORNERS:
                item.add_marker(pytest.mark.corners)

    def order(item: pytest.Item) -> tuple[int, int, str]:
        name = files[id(item)]
        if name in rank:
            return (0, rank[name], name)
        return (1, -tests_in[name], name)

    items.sort(key=order)
