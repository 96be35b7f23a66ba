"""``fan_in``: SIGKILL of a random ``--processes 2`` child every few seconds while a
fan-in's parents run.

One transaction enqueues ``PARENTS`` ledger jobs and two children of all of them
(``api.after``, ``on="success"`` and ``on="finish"``), and a batch of ``PARENTS`` more
with ``on_success`` and ``on_finish`` callbacks (``later_django.batches``); steady load
runs beside them.

Pass: the common checks over every job (parents, children and load: zero lost,
every duplicate explained by a kill, every job SUCCESSFUL), the kills' reclaims
(each interrupted job started again; no bound on when: it queues behind the
parents), and for each child: made ready exactly once (its record left ``waiting``
once), a completed run (a second run only where a kill explains it: the common
check), and its first start after the last parent's first completed run; each batch
callback's job made ready exactly once and its callback called once, with every
member counted as succeeded; and the batch's counts by stage (``get_workflow``) exactly
its jobs, all succeeded.
"""

from __future__ import annotations

import json

from chaos.cells.kills import check_reclaims, kill_child, supervisor
from chaos.harness import Run
from chaos.ledger import committed_ids, read_lines

#: Parents of the fan-in (the short profile; the long one multiplies it).
PARENTS = 5_000
#: Each parent's run: long enough that kills land among running parents.
TASK_SECONDS = 0.01
RATE = 20.0


def fan_in(run: Run) -> None:
    parents = run.profile.count(PARENTS)
    kills, every = run.profile.count(4), 3.0
    parent_proc = supervisor(run)
    ids = run.directory / "ids-fan-in.jsonl"
    lines = run.directory / "batch-lines.jsonl"
    printed = run.agent(
        "fan_in", "--ids", str(ids), "--ledger", str(run.ledger.path),
        "--parents", str(parents), "--task-seconds", str(TASK_SECONDS),
        "--batch-lines", str(lines),
    )  # fmt: skip
    jobs = json.loads(printed.strip().splitlines()[-1])
    children = {on: jobs[on] for on in ("success", "finish")}
    callbacks = {rule: jobs[rule] for rule in ("on_success", "on_finish")}
    run.enqueue(RATE, kills * every + 3, task_seconds=0.02)
    run.wait_started()
    replaced = []
    for _ in range(kills):
        run.sleep(every * run.random.uniform(0.6, 1.2))
        replaced.append(kill_child(run, parent_proc))
    view = run.finish(drain_timeout=120.0, records=(*children.values(), *callbacks.values()))
    # An interrupted job restarts behind the parents still queued: no bound on when.
    check_reclaims(run, replaced, bounded=False)
    parent_ids = list(committed_ids([ids]))[:parents]
    _check_children(run, children, view, parent_ids)
    _check_callbacks(run, callbacks, view, read_lines(lines), parents)
    _check_batch_counts(run, jobs["batch"], parents + len(callbacks))


def _check_batch_counts(run: Run, batch_id: str, jobs: int) -> None:
    """The batch's counts by stage, kept by the transactions that moved its jobs
    through every kill, say each of its jobs (members and callbacks) succeeded once."""
    printed = run.agent("workflow", "--id", batch_id)
    workflow = json.loads(printed.strip().splitlines()[-1])
    run.result.figure("batch counts", workflow and workflow["counts"])
    run.result.check(
        workflow is not None and workflow["counts"] == {"success": jobs},
        f"the batch's counts by stage are exactly {jobs} succeeded",
    )


def _check_children(run: Run, children: dict[str, str], view: dict, parents: list[str]) -> None:
    add, check = run.result.figure, run.result.check
    add("fan-in parents", len(parents))
    by_job = run.ledger.by_job
    first_done = [
        min(e.done for e in by_job.get(job, []) if e.done is not None)
        for job in parents
        if any(e.done is not None for e in by_job.get(job, []))
    ]
    check(len(first_done) == len(parents), "every parent completed a run")
    last_parent = max(first_done, default=None)
    for on, child in children.items():
        runs = sorted(by_job.get(child, []), key=lambda execution: execution.start)
        add(f"on={on} child runs", len(runs))
        check(
            view.get(child, {}).get("left_waiting") == 1,
            f"the on={on} child was made ready exactly once",
        )
        check(
            any(execution.done is not None for execution in runs),
            f"the on={on} child completed a run",
        )
        check(
            bool(runs) and last_parent is not None and runs[0].start >= last_parent,
            f"the on={on} child started after its last parent's first completed run",
        )


def _check_callbacks(
    run: Run, callbacks: dict[str, str], view: dict, lines: list[dict], members: int
) -> None:
    """Each batch callback's job left ``waiting`` once, and its function ran once (the
    callback's job is not a ledger job: a kill during its run would show as a second
    line, which fails this), seeing every member succeeded."""
    check = run.result.check
    for rule, job in callbacks.items():
        ran = [line for line in lines if line["rule"] == rule]
        run.result.figure(f"batch {rule} calls", len(ran))
        check(
            view.get(job, {}).get("left_waiting") == 1,
            f"the batch's {rule} job was made ready exactly once",
        )
        check(len(ran) == 1, f"the batch's {rule} callback was called once ({len(ran)})")
        check(
            all(line["members"] == members == line["succeeded"] for line in ran),
            f"the batch's {rule} callback counted {members} members, all succeeded",
        )
