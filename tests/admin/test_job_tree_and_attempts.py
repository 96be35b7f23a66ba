"""The job page's pure parts: the continuation tree's SVG and the attempts read from a record."""

from __future__ import annotations

import re
from dataclasses import replace

from later_django.admin.attempts import RUNNING_NOW, attempts_of
from later_django.admin.job_tree import NODE_HEIGHT, PER_LINE, JobTree, TreeNode, tree_svg
from later_django.core.records import JobError, JobRecord


def node(job_id: str, stage: str = "success", task: str = "app.tasks.send") -> TreeNode:
    return TreeNode(job_id, task, stage)


def href(job_id: str) -> str:
    return f"/job/{job_id}/"


def boxes(svg: str) -> dict[str, tuple[int, int]]:
    """Each node's job id (from its link) and the top-left corner of its box."""
    found = re.findall(r'<a href="/job/([^/]+)/"[^>]*>.*?<rect x="(\d+)" y="(\d+)"', svg)
    return {job_id: (int(x), int(y)) for job_id, x, y in found}


def test_each_generation_is_a_row_and_each_node_links_to_its_job() -> None:
    tree = JobTree(
        job=node("JOB", "running"),
        ancestors=[node("GRANDPARENT"), node("PARENT")],
        siblings=[node("SISTER", "failed")],
        children=[node("CHILD-1", "waiting"), node("CHILD-2", "waiting")],
    )
    svg = tree_svg(tree, href)
    placed = boxes(svg)
    assert set(placed) == {"GRANDPARENT", "PARENT", "JOB", "SISTER", "CHILD-1", "CHILD-2"}
    rows = sorted({y for _, y in placed.values()})
    assert len(rows) == 4
    assert placed["GRANDPARENT"][1] < placed["PARENT"][1] < placed["JOB"][1]
    assert placed["JOB"][1] == placed["SISTER"][1] < placed["CHILD-1"][1] == placed["CHILD-2"][1]
    # Edges: grandparent→parent, parent→job and sister, job→each child.
    assert svg.count("<line ") == 5
    assert 'class="later-node later-node-running later-node-current"' in svg
    assert 'class="later-node later-node-failed"' in svg


def test_a_large_generation_wraps_and_the_svg_grows_to_hold_it() -> None:
    children = [node(f"CHILD-{n:03}") for n in range(100)]
    svg = tree_svg(JobTree(job=node("JOB"), children=children), href)
    placed = boxes(svg)
    child_rows = sorted({placed[child.job_id][1] for child in children})
    assert len(child_rows) == -(-100 // PER_LINE)
    height = int(re.search(r'height="(\d+)"', svg).group(1))
    assert height >= child_rows[-1] + NODE_HEIGHT
    assert svg.count("<line ") == 100


def test_every_text_is_escaped() -> None:
    tree = JobTree(job=node("JOB", task="app.<script>"), ancestors=[node("P<>", task='x."&')])
    svg = tree_svg(tree, href)
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert "P&lt;&gt;" in svg and "&quot;&amp;" in svg


def test_a_job_without_parent_or_continuation_is_alone() -> None:
    assert JobTree(job=node("JOB")).is_alone
    assert not JobTree(job=node("JOB"), children=[node("C")]).is_alone


def record(**changes: object) -> JobRecord:
    base = JobRecord(
        job_id="JOB",
        namespace="default",
        task_path="app.tasks.send",
        args=[],
        kwargs={},
        queue_name="default",
        priority=0,
        backend="default",
        stage="enqueued",
        stage_at_ms=1_000,
        created_at_ms=1_000,
    )
    return replace(base, **changes)


def test_attempts_come_from_the_history_with_their_worker_error_and_duration() -> None:
    first_error = JobError("builtins.ValueError", "Traceback ...\nValueError: no", 1_500, 1)
    retried = record(
        history=[
            ("enqueued", 1_000),
            ("running", 1_100),
            ("requeued", 1_500),
            ("enqueued", 2_000),
            ("running", 2_050),
        ],
        stage="success",
        stage_at_ms=2_080,
        worker_ids=["vm:1:A", "vm:2:B"],
        errors=[first_error],
    )
    first, second = attempts_of(retried, now_ms=9_999)
    assert (first.number, first.ran_for, first.worker_id) == (1, "400 ms", "vm:1:A")
    assert first.outcome == "retried" and first.error == first_error
    assert (second.number, second.ran_for, second.worker_id) == (2, "30 ms", "vm:2:B")
    assert second.outcome == "succeeded" and second.error is None


def test_the_attempt_running_now_runs_until_now() -> None:
    running = record(
        history=[("enqueued", 1_000)], stage="running", stage_at_ms=1_000, worker_ids=["w"]
    )
    (attempt,) = attempts_of(running, now_ms=4_000)
    assert attempt.outcome == RUNNING_NOW and attempt.ran_for == "3 s"


def test_a_job_that_never_ran_has_no_attempt() -> None:
    assert attempts_of(record(), now_ms=5_000) == []
