"""The long lists of a workflow's page as HTML built in Python: what each waiting job
waits on, and the table of jobs left out of the figure.

A 1,000-job workflow lists up to 1,000 lines; through the template language they
cost about half the page's time (each line a dozen variable lookups and escapes), so
they are written here, as the figure is, with every text escaped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from later_django.admin.workflow_graph import GraphNode


def waiting_items(nodes: Sequence[GraphNode], href: Callable[[str], str]) -> str:
    """``<li>`` lines: a link to each waiting job, its task, and what it waits for."""
    return "".join(
        f'<li><a href="{escape(href(node.job_id))}"><code>{escape(node.job_id)}</code></a> '
        f"{escape(node.task_path)} waits for {escape(node.waiting_on)}</li>"
        for node in nodes
    )


def left_out_rows(nodes: Sequence[GraphNode], href: Callable[[str], str]) -> str:
    """``<tr>`` lines: job (a link), task, stage, what it waits for."""
    return "".join(
        f'<tr><td><a href="{escape(href(node.job_id))}"><code>{escape(node.job_id)}</code></a>'
        f"</td><td><code>{escape(node.task_path)}</code></td><td>{escape(node.stage)}</td>"
        f"<td>{escape(node.waiting_on)}</td></tr>"
        for node in nodes
    )
