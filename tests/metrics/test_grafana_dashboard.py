"""The Grafana dashboard (``docs/grafana/later_django.json``) against the one list of
exported names (``core/metric_names.py``): every query names only samples a scrape
shows, filters and groups by labels those families have, every family has a panel,
and, where ``promtool`` is installed, every expression is valid PromQL (``promtool
check rules`` on one recording rule per expression). docs/observability.md names every
panel."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from later_django.core.metric_names import (
    VIEW_METRICS,
    WORKER_METRICS,
    MetricName,
    every_sample_name,
)
from tests.metrics.scrape import promtool

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "docs" / "grafana" / "later_django.json"
PAGE = ROOT / "docs" / "observability.md"
FAMILIES: tuple[MetricName, ...] = (*VIEW_METRICS, *WORKER_METRICS)
#: Families deliberately without a panel (none: every exported family has one).
LEFT_OUT: frozenset[str] = frozenset()
#: Concrete values for Grafana's variables, so that promtool reads plain PromQL.
SUBSTITUTES = {"__rate_interval": "5m", "namespace": "default", "queue": "default"}
#: An identifier outside quoted strings that starts like one of our names.
LATER_NAME = re.compile(r"(?<![A-Za-z0-9_:])later_[A-Za-z0-9_:]*")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
SELECTOR = re.compile(r"(later_[A-Za-z0-9_:]*)\s*\{([^}]*)\}")
MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
LABEL_VALUES = re.compile(r"^label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\)$")


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def query_panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel but rows, those nested in collapsed rows included."""
    found = []
    for panel in board["panels"]:
        if panel.get("type") == "row":
            found.extend(panel.get("panels", []))
        else:
            found.append(panel)
    return found


def panel_exprs(board: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, expr) of every panel target."""
    return [
        (f"panel {panel.get('title')!r} target {target.get('refId')}", target["expr"])
        for panel in query_panels(board)
        for target in panel.get("targets", [])
    ]


def variable_query(variable: dict[str, Any]) -> str:
    query = variable.get("query")
    return query.get("query", "") if isinstance(query, dict) else str(query or "")


def query_variables(board: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in board["templating"]["list"] if v.get("type") == "query"}


def names_in(expr: str) -> set[str]:
    """The ``later_*`` identifiers of ``expr`` (quoted label values left out)."""
    return set(LATER_NAME.findall(STRING.sub('""', expr)))


def family_of(sample: str) -> MetricName:
    found = [metric for metric in FAMILIES if sample in metric.samples]
    assert found, f"{sample} is not a sample of any exported family"
    return found[0]


def concrete(expr: str) -> str:
    """``expr`` with Grafana's variables replaced by values."""
    for name, value in SUBSTITUTES.items():
        expr = expr.replace("${" + name + "}", value).replace("$" + name, value)
    return expr


def test_the_dashboard_parses_with_its_settings() -> None:
    board = dashboard()
    assert board["refresh"] == "30s"
    assert 36 <= board["schemaVersion"] <= 41
    assert board["title"] and board["uid"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("namespace", "queue"):
        assert variables[name]["type"] == "query", name
        assert LABEL_VALUES.match(variable_query(variables[name])), name


def test_every_panel_has_a_title_a_unit_a_target_and_the_templated_datasource() -> None:
    board = dashboard()
    panels = query_panels(board)
    assert len(panels) >= 20
    for row in (p for p in board["panels"] if p.get("type") == "row"):
        assert row.get("title"), row
    for panel in panels:
        title = panel.get("title")
        assert title, panel.get("id")
        assert panel["type"] in {"timeseries", "stat"}, title
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, title
        assert panel["fieldConfig"]["defaults"].get("unit"), title
        targets = panel.get("targets", [])
        assert targets, title
        for target in targets:
            assert target.get("expr", "").strip(), (title, target.get("refId"))
        ref_ids = [target.get("refId") for target in targets]
        assert len(set(ref_ids)) == len(ref_ids), title
    titles = [panel["title"] for panel in panels]
    assert len(set(titles)) == len(titles)
    ids = [panel["id"] for panel in board["panels"]]
    assert len(set(ids)) == len(ids)


def test_panels_fit_the_grid_without_overlapping() -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in dashboard()["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["w"] > 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, (panel["title"], cells.get((x, y)))
                cells[(x, y)] = panel["title"]


def test_every_query_names_only_exported_samples() -> None:
    board = dashboard()
    exported = every_sample_name()
    queries = panel_exprs(board) + [
        (f"variable {name}", variable_query(v)) for name, v in query_variables(board).items()
    ]
    assert queries
    for where, expr in queries:
        named = names_in(expr)
        assert named, (where, expr)
        assert named <= exported, (where, sorted(named - exported))


def test_every_selector_and_grouping_uses_labels_its_families_have() -> None:
    """A filter on a label the family lacks (``namespace`` on a worker-port metric)
    selects nothing; a grouping by one yields a single unlabelled series."""
    board = dashboard()
    queries = panel_exprs(board) + [
        (f"variable {name}", variable_query(v)) for name, v in query_variables(board).items()
    ]
    for where, expr in queries:
        bare = STRING.sub('""', expr)
        for sample, matchers in SELECTOR.findall(bare):
            labels = set(MATCHER.findall(matchers))
            assert labels <= set(family_of(sample).labels), (where, sample, labels)
        named = [family_of(sample) for sample in names_in(expr)]
        available = {label for metric in named for label in metric.labels}
        if any(sample.endswith("_bucket") for sample in names_in(expr)):
            available.add("le")
        for grouping in GROUPING.findall(bare):
            labels = {label.strip() for label in grouping.split(",") if label.strip()}
            assert labels <= available, (where, sorted(labels - available))
    for name, variable in query_variables(board).items():
        selector, label = LABEL_VALUES.match(variable_query(variable)).groups()
        (sample,) = names_in(selector)
        assert label in family_of(sample).labels, (name, label)


def test_every_exported_family_has_a_panel() -> None:
    used = {family_of(s).name for _, expr in panel_exprs(dashboard()) for s in names_in(expr)}
    families = {metric.name for metric in FAMILIES}
    # Unused families must be listed, and a listed one must be unused (no stale entry).
    assert families - used == LEFT_OUT, (sorted(families - used - LEFT_OUT), sorted(LEFT_OUT))


def test_the_observability_page_names_every_panel_and_the_variables() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert "## Grafana dashboard" in text
    section = text.split("## Grafana dashboard", 1)[1].split("\n## ", 1)[0]
    assert "docs/grafana/later_django.json" in section
    for panel in query_panels(dashboard()):
        assert panel["title"] in section, panel["title"]
    for name in ("namespace", "queue", "datasource"):
        assert f"`{name}`" in section, name


def promtool_check_rules(
    exprs: list[tuple[str, str]], tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """``promtool check rules`` on one recording rule per expression (JSON is YAML)."""
    rules = [
        {"record": f"later_dashboard:query_{n}", "expr": concrete(expr)}
        for n, (_, expr) in enumerate(exprs)
    ]
    path = tmp_path / f"rules_{len(list(tmp_path.iterdir()))}.yml"
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    binary = promtool()
    assert binary is not None
    return subprocess.run(
        [binary, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )


def test_every_expression_is_valid_promql(tmp_path: Path) -> None:
    board = dashboard()
    exprs = panel_exprs(board)
    for name, variable in query_variables(board).items():
        selector, _ = LABEL_VALUES.match(variable_query(variable)).groups()
        exprs.append((f"variable {name}", selector))
    for where, expr in exprs:
        assert "$" not in concrete(expr), (where, concrete(expr))
    # The check itself: a broken expression is refused (so a pass below means something).
    broken = promtool_check_rules([("broken", "sum by (le (rate(later_jobs_total[5m])")], tmp_path)
    assert broken.returncode != 0, broken.stdout + broken.stderr
    checked = promtool_check_rules(exprs, tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in checked.stdout, checked.stdout


@pytest.mark.parametrize(
    ("expr", "exported"),
    [
        ("sum(rate(later_jobs_total[5m]))", True),
        ("sum(rate(later_jobs[5m]))", False),  # the family, not the sample
        ("later_job_duration_seconds_bucket", True),
        ("later_job_duration_seconds", False),
        ('later_queue_ready_jobs{queue="later_x"}', True),  # label values are not names
        ("later_queue_ready_jobs_total", False),
    ],
)
def test_the_name_check_tells_renamed_samples_apart(expr: str, exported: bool) -> None:
    assert (names_in(expr) <= every_sample_name()) is exported
