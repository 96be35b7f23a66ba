"""A workflow's jobs as a DAG drawn in server-rendered SVG.

Layers by longest path from the roots: a job with no parent among the drawn jobs is
on layer 0, any other one layer below its lowest parent, so every edge points down.
A layer wraps after :data:`PER_LINE` nodes (a batch of 300 members is 30 lines, not
one line 40,000 pixels wide). Each node is a link to its job's page, coloured by its
stage (``later-node-<stage>``, the job tree's classes in ``dashboard.css``) and
labelled with the end of its id, its stage and the last part of its task path; its
tooltip names the job and, for a waiting job, what it waits on. Edges run parent →
child, at most :data:`MOST_EDGES` of them (then the figure says how many it left
out). Every text is escaped.

Pure: :func:`graph_svg` takes the nodes (parents before children is the usual order,
not required) and returns text; the reads are :mod:`~later_django.admin.workflow_detail`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from later_django.admin.job_tree import GAP_X, GAP_Y, ID_TAIL, MARGIN, NODE_HEIGHT, NODE_WIDTH

#: Nodes per line of a layer; more wrap onto the next line.
PER_LINE = 10
#: Edges drawn at most (a dense fan-in of 300 parents into 300 children would be 90,000).
MOST_EDGES = 3_000


@dataclass(frozen=True)
class GraphNode:
    """One job of the figure: ``parents`` are the jobs it waits for (any of them may
    be left out of the figure); ``waiting_on`` the text of what a waiting job waits
    on (empty otherwise)."""

    job_id: str
    task_path: str
    stage: str
    parents: tuple[str, ...] = ()
    waiting_on: str = ""


def short_task(task_path: str) -> str:
    """The last part of a dotted task path (``?`` when unknown)."""
    return task_path.rsplit(".", 1)[-1] if task_path else "?"


def layers(nodes: Sequence[GraphNode]) -> list[list[GraphNode]]:
    """The nodes by longest path from the roots (a topological walk, so a parent that
    joined after its child, as a member added to a running batch, still lies above
    it); each layer in the nodes' order."""
    by_id = {node.job_id: node for node in nodes}
    children: dict[str, list[str]] = {}
    waiting_for: dict[str, int] = {}
    for node in nodes:
        inside = {parent for parent in node.parents if parent in by_id and parent != node.job_id}
        waiting_for[node.job_id] = len(inside)
        for parent in inside:
            children.setdefault(parent, []).append(node.job_id)
    depth = dict.fromkeys(by_id, 0)
    ready = [node.job_id for node in nodes if not waiting_for[node.job_id]]
    while ready:
        job_id = ready.pop()
        for child in children.get(job_id, ()):
            depth[child] = max(depth[child], depth[job_id] + 1)
            waiting_for[child] -= 1
            if not waiting_for[child]:
                ready.append(child)
    rows: list[list[GraphNode]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for node in nodes:
        rows[depth[node.job_id]].append(node)
    return rows


@dataclass(frozen=True)
class Drawing:
    """The figure and how many edges it left out (beyond :data:`MOST_EDGES`)."""

    svg: str
    edges_left_out: int


def graph_svg(nodes: Sequence[GraphNode], href: Callable[[str], str], label: str) -> Drawing:
    """The DAG of ``nodes`` as an ``<svg>`` element named ``label``; ``href(job_id)``
    is each node's link."""
    places: dict[str, tuple[int, int]] = {}
    width = height = 0
    for layer in layers(nodes):
        for index, node in enumerate(layer):
            line, column = divmod(index, PER_LINE)
            x = MARGIN + column * (NODE_WIDTH + GAP_X)
            y = height + MARGIN + line * (NODE_HEIGHT + GAP_Y)
            places[node.job_id] = (x, y)
            width = max(width, x + NODE_WIDTH + MARGIN)
        height += ((len(layer) + PER_LINE - 1) // PER_LINE) * (NODE_HEIGHT + GAP_Y)
    height = max(height + MARGIN - GAP_Y, 0)
    parts = [
        f'<svg class="later-tree later-flow" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(label)}">',
        '<g class="later-tree-edges">',
    ]
    drawn = left_out = 0
    for node in nodes:
        x2, y2 = places[node.job_id]
        for parent in dict.fromkeys(node.parents):
            if parent not in places or parent == node.job_id:
                continue
            if drawn == MOST_EDGES:
                left_out += 1
                continue
            x1, y1 = places[parent]
            parts.append(
                f'<line x1="{x1 + NODE_WIDTH // 2}" y1="{y1 + NODE_HEIGHT}" '
                f'x2="{x2 + NODE_WIDTH // 2}" y2="{y2}"/>'
            )
            drawn += 1
    parts.append("</g>")
    for node in nodes:
        x, y = places[node.job_id]
        title = f"{node.job_id} {node.task_path} ({node.stage})"
        if node.waiting_on:
            title += f": waits for {node.waiting_on}"
        parts.append(
            f'<a href="{escape(href(node.job_id))}" class="later-node '
            f'later-node-{escape(node.stage)}"><title>{escape(title)}</title>'
            f'<rect x="{x}" y="{y}" width="{NODE_WIDTH}" height="{NODE_HEIGHT}" rx="4"/>'
            f'<text x="{x + 6}" y="{y + 14}">'
            f"{escape(f'…{node.job_id[-ID_TAIL:]} · {node.stage}')}</text>"
            f'<text x="{x + 6}" y="{y + 29}">{escape(short_task(node.task_path))}</text></a>'
        )
    parts.append("</svg>")
    return Drawing("".join(parts), left_out)
