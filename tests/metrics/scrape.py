"""Reading Prometheus text as a scraper does: prometheus-client's parser, and
``promtool check metrics`` (Debian's ``prometheus`` package)."""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

#: (sample name, sorted label items) -> value
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples_of(text: str) -> Samples:
    """Every sample of ``text``, by name and labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """The sample ``name`` with exactly ``labels``, or None."""
    return samples.get((name, tuple(sorted(labels.items()))))


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, items), v in samples.items() if n == name and wanted <= set(items))


def families_of(text: str) -> set[str]:
    return {family.name for family in text_string_to_metric_families(text)}


def http_get(url: str, headers: dict[str, str] | None = None) -> str:
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.read().decode()


def promtool() -> str | None:
    """The promtool binary; the test fails without it when ``LATER_REQUIRE_PROMTOOL``
    is set (CI), else is skipped."""
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("LATER_REQUIRE_PROMTOOL"):
            pytest.fail("LATER_REQUIRE_PROMTOOL is set but promtool is not installed")
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    return found


def promtool_problems(text: str) -> str:
    """What ``promtool check metrics`` says about ``text`` ("" when it passes)."""
    binary = promtool()
    assert binary is not None
    checked = subprocess.run(
        [binary, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    if checked.returncode == 0 and not checked.stdout.strip() and not checked.stderr.strip():
        return ""
    return f"exit {checked.returncode}: {checked.stdout}{checked.stderr}"
