"""The workflow figure (pure): layers by longest path, every edge pointing down, links
and escaped text, and the bound on edges."""

from __future__ import annotations

import re

import pytest

from later_django.admin import workflow_graph
from later_django.admin.workflow_graph import GraphNode, graph_svg, layers
from later_django.admin.workflow_rows import left_out_rows, waiting_items


def ids(rows: list[list[GraphNode]]) -> list[list[str]]:
    return [[node.job_id for node in row] for row in rows]


def test_layers_follow_the_longest_path_from_the_roots() -> None:
    nodes = [
        GraphNode("A", "t.a", "success"),
        GraphNode("B", "t.b", "success", ("A",)),
        GraphNode("C", "t.c", "waiting", ("A", "B")),
        GraphNode("D", "t.d", "enqueued"),
        # A member added to a running batch joins after the callback that waits for it.
        GraphNode("CB", "t.cb", "waiting", ("D", "LATE")),
        GraphNode("LATE", "t.late", "enqueued", ("C",)),
        GraphNode("X", "t.x", "waiting", ("NOT-DRAWN",)),
    ]
    assert ids(layers(nodes)) == [["A", "D", "X"], ["B"], ["C"], ["LATE"], ["CB"]]


def test_the_figure_links_every_node_escapes_its_text_and_draws_each_edge() -> None:
    nodes = [
        GraphNode("01AAAAAAAAAAAAAAAAAAAAAAAA", "app.<script>x", "success"),
        GraphNode(
            "01BBBBBBBBBBBBBBBBBBBBBBBB",
            "app.ship",
            "waiting",
            ("01AAAAAAAAAAAAAAAAAAAAAAAA",),
            "1 of 1 parent: <b>",
        ),
    ]
    drawing = graph_svg(nodes, lambda job_id: f"/job/{job_id}/?a=1&b=2", 'flow "1"')
    svg = drawing.svg
    assert "<script>" not in svg and "&lt;script&gt;x" in svg and "<b>" not in svg
    assert svg.count('href="/job/') == 2 and "&amp;b=2" in svg
    assert 'aria-label="flow &quot;1&quot;"' in svg
    assert "later-node-success" in svg and "later-node-waiting" in svg
    (line,) = re.findall(r"<line [^>]*/>", svg)
    y1, y2 = (int(v) for v in re.findall(r'y[12]="(\d+)"', line))
    assert y1 < y2  # parent above, child below
    assert drawing.edges_left_out == 0


def test_edges_beyond_the_bound_are_counted_not_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workflow_graph, "MOST_EDGES", 2)
    parents = [GraphNode(f"P{n}", "t.p", "success") for n in range(4)]
    child = GraphNode("C", "t.c", "waiting", tuple(node.job_id for node in parents))
    drawing = graph_svg([*parents, child], str, "x")
    assert drawing.svg.count("<line ") == 2 and drawing.edges_left_out == 2


def test_the_page_lists_escape_every_text_and_link_each_job() -> None:
    node = GraphNode("01AAAAAAAAAAAAAAAAAAAAAAAA", "app.<i>t", "waiting", (), "1 of 1 parent: <b>")
    waiting = waiting_items([node], lambda job_id: f"/job/{job_id}/?a&b")
    rows = left_out_rows([node], lambda job_id: f"/job/{job_id}/")
    for html in (waiting, rows):
        assert "<i>" not in html and "<b>" not in html and "&lt;b&gt;" in html
        assert 'href="/job/01AAAAAAAAAAAAAAAAAAAAAAAA/' in html
    assert "?a&amp;b" in waiting and rows.startswith("<tr>")
