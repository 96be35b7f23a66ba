"""A job's continuation tree as server-rendered SVG: its parents, its siblings, its children.

The tree has one row per generation: the ancestors from the oldest one read down to
the parent, then the job among its siblings (the parent's other continuations), then
the job's own continuations. Each node is a link to its job's page, coloured by its
stage (``later-node-<stage>``, colours in ``dashboard.css``), labelled with the end of
its id and the last part of its task path; a full generation wraps after
:data:`PER_LINE` nodes. Every text is escaped.

:func:`tree_svg` is pure (a :class:`JobTree` in, text out). The reads are the job
page's (:mod:`later_django.admin.jobs`): at most :data:`ANCESTORS` parent records read
by key one after the other, and the parent's and the job's continuations, each list
bounded by the page's ``CHILDREN_SHOWN``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

#: Generations of parents shown above the job (the walk up stops there).
ANCESTORS = 5
#: Nodes per line of a generation; more wrap onto the next line.
PER_LINE = 8
NODE_WIDTH, NODE_HEIGHT = 132, 36
#: Gaps between nodes of a line and between lines (the edges run in the vertical ones).
GAP_X, GAP_Y = 12, 26
MARGIN = 6
#: Characters of a job id shown (ULIDs end in their random part, which tells them apart).
ID_TAIL = 8


@dataclass(frozen=True)
class TreeNode:
    job_id: str
    task_path: str
    stage: str


@dataclass(frozen=True)
class JobTree:
    """The generations around ``job``: ``ancestors`` oldest first (the last is the
    parent), ``siblings`` the parent's other continuations, ``children`` the job's."""

    job: TreeNode
    ancestors: Sequence[TreeNode] = ()
    siblings: Sequence[TreeNode] = ()
    children: Sequence[TreeNode] = ()

    @property
    def is_alone(self) -> bool:
        """No parent and no continuation: nothing worth drawing."""
        return not self.ancestors and not self.children


@dataclass
class _Placed:
    node: TreeNode
    x: int
    y: int
    current: bool = False


@dataclass
class _Layout:
    width: int = 0
    height: int = 0
    nodes: list[_Placed] = field(default_factory=list)
    #: (from node, to node) of every edge: a parent above to a child below.
    edges: list[tuple[_Placed, _Placed]] = field(default_factory=list)


def _place_generation(layout: _Layout, nodes: Sequence[TreeNode], job_id: str) -> list[_Placed]:
    """Places one generation below what is placed, wrapping after ``PER_LINE``."""
    placed = []
    for index, node in enumerate(nodes):
        line, column = divmod(index, PER_LINE)
        x = MARGIN + column * (NODE_WIDTH + GAP_X)
        y = layout.height + MARGIN + line * (NODE_HEIGHT + GAP_Y)
        placed.append(_Placed(node, x, y, node.job_id == job_id))
        layout.width = max(layout.width, x + NODE_WIDTH + MARGIN)
    lines = (len(nodes) + PER_LINE - 1) // PER_LINE
    layout.height += lines * (NODE_HEIGHT + GAP_Y)
    layout.nodes.extend(placed)
    return placed


def layout_tree(tree: JobTree) -> _Layout:
    """Positions: one generation per row, each node linked to its parent above."""
    layout = _Layout()
    above: _Placed | None = None
    for ancestor in tree.ancestors:
        (placed,) = _place_generation(layout, [ancestor], tree.job.job_id)
        if above is not None:
            layout.edges.append((above, placed))
        above = placed
    generation = [tree.job, *tree.siblings] if tree.ancestors else [tree.job]
    placed_generation = _place_generation(layout, generation, tree.job.job_id)
    if above is not None:
        layout.edges.extend((above, placed) for placed in placed_generation)
    (job,) = [placed for placed in placed_generation if placed.current]
    for child in _place_generation(layout, tree.children, tree.job.job_id):
        layout.edges.append((job, child))
    layout.height += MARGIN - GAP_Y
    return layout


def _label(node: TreeNode) -> tuple[str, str]:
    task = node.task_path.rsplit(".", 1)[-1] if node.task_path else "?"
    return f"…{node.job_id[-ID_TAIL:]} · {node.stage}", task


def tree_svg(tree: JobTree, href: Callable[[str], str]) -> str:
    """The tree as an ``<svg>`` element; ``href(job_id)`` is each node's link."""
    layout = layout_tree(tree)
    parts = [
        f'<svg class="later-tree" viewBox="0 0 {layout.width} {layout.height}" '
        f'width="{layout.width}" height="{layout.height}" role="img" '
        f'aria-label="continuation tree of job {escape(tree.job.job_id)}">',
        '<g class="later-tree-edges">',
    ]
    for upper, lower in layout.edges:
        parts.append(
            f'<line x1="{upper.x + NODE_WIDTH // 2}" y1="{upper.y + NODE_HEIGHT}" '
            f'x2="{lower.x + NODE_WIDTH // 2}" y2="{lower.y}"/>'
        )
    parts.append("</g>")
    for placed in layout.nodes:
        node = placed.node
        first, second = _label(node)
        css = f"later-node later-node-{escape(node.stage)}"
        if placed.current:
            css += " later-node-current"
        parts.append(
            f'<a href="{escape(href(node.job_id))}" class="{css}">'
            f"<title>{escape(node.job_id)} {escape(node.task_path)} ({escape(node.stage)})</title>"
            f'<rect x="{placed.x}" y="{placed.y}" width="{NODE_WIDTH}" height="{NODE_HEIGHT}" '
            'rx="4"/>'
            f'<text x="{placed.x + 6}" y="{placed.y + 14}">{escape(first)}</text>'
            f'<text x="{placed.x + 6}" y="{placed.y + 29}">{escape(second)}</text></a>'
        )
    parts.append("</svg>")
    return "".join(parts)
