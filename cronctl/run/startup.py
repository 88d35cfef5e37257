"""The start-up runs of `cronctl work`: each `on_start = true` task, once, when `work` starts
(docs/schedule-file.md, "Start-up tasks").

They run beside the minute loop, never before it: a slow start-up task must not delay the
first minute. Each is recorded like a scheduled run, with `"trigger": "start"` and the instant
`work` started as its occurrence, and goes through the same steps in the same order: paused,
`when`/`skip`, the overlap lock, the command (with its retries, ping and hooks). The overlap
lock is taken whether or not the task sets `without_overlapping`, as `cronctl exec` takes it:
a start-up run that finds its task running (a `work` restarted while its last start-up run
goes on) is recorded `skipped: still running`, never run beside it. No `on_one_server` claim:
a claim is keyed by an occurrence the machines share, and a start is one machine's own, so
every machine whose `work` starts runs its start-up tasks (`check` warns about the pair).
The task's schedule window is left alone: its scheduled occurrences are neither run early
nor counted missed because of the start-up run.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from cronctl.coord.port import HeldLock, StoreUnavailable
from cronctl.core.model import Schedule, Task
from cronctl.core.runs import START_TRIGGER, RunRow
from cronctl.edge import metrics
from cronctl.edge.state.store import Store
from cronctl.run import attempts, guards
from cronctl.run.context import (
    RunContext,
    RunReport,
    coord_of,
    new_run_id,
)
from cronctl.run.occurrence import execute, recorded, task_env
from cronctl.run.once import coordinated
from cronctl.run.outcomes import NOT_STARTED, still_running


def start_tasks(schedule: Schedule) -> list[Task]:
    """The tasks `work` runs when it starts."""
    return [t for t in schedule.tasks if t.on_start]


def run_start_tasks(schedule: Schedule, started: datetime, ctx: RunContext) -> RunReport:
    """Run every on_start task once (at most max_parallel at once); what happened to each."""
    tasks = start_tasks(schedule)
    if not tasks:
        return RunReport(started, [])
    with coordinated(ctx) as ctx:
        return _run_all(schedule, tasks, started.replace(microsecond=0), ctx)


def _run_all(
    schedule: Schedule, tasks: Sequence[Task], started: datetime, ctx: RunContext
) -> RunReport:
    paused = guards.paused(ctx).names
    rows = [
        RunRow(
            id=new_run_id(started),
            task=task.name,
            occurrence=started,
            outcome="skipped: paused" if task.paused or task.name in paused else "pending",
            host=ctx.host,
            pid=ctx.pid,
            trigger=START_TRIGGER,
        )
        for task in tasks
    ]
    with Store.open(ctx.state_dir) as store:
        with store.transaction() as tx:
            tx.add_runs(rows)
        todo = [(t, r) for t, r in zip(tasks, rows, strict=True) if r.outcome == "pending"]
        results = {r.id: r for r in rows}
        guard = threading.Lock()

        def worker() -> None:
            while True:
                with guard:
                    if not todo:
                        return
                    task, row = todo.pop(0)
                result = _run_one(store, task, row, ctx)
                with guard:
                    results[row.id] = result

        threads = [
            ctx.spawn(worker, f"cronctl-start-{i}") for i in range(min(ctx.max_parallel, len(todo)))
        ]
        for thread in threads:
            thread.join()
        runs = list(results.values())
        if ctx.records is not None:
            ctx.records.finish(store, runs, ctx.state_dir)
        if schedule.settings.metrics_file is not None:
            metrics.write_metrics(schedule, store, ctx.clock(), ctx.state_dir, ctx.warn)
    return RunReport(started, runs)


def _run_one(store: Store, task: Task, row: RunRow, ctx: RunContext) -> RunRow:
    """One start-up run through its conditions and overlap lock to its recorded end."""
    try:
        result = _guarded(store, task, row, ctx)
    except StoreUnavailable as exc:
        result = replace(row, outcome="error", message=str(exc))
    except Exception as exc:  # anything: recorded as the run's error, never a dead thread
        result = replace(row, outcome="error", message=f"cronctl: {exc}")
    return recorded(store, task, result, ctx)[-1]


def _guarded(store: Store, task: Task, row: RunRow, ctx: RunContext) -> RunRow:
    if ctx.tracker is not None and ctx.tracker.stopping:
        return replace(row, outcome="interrupted", message=NOT_STARTED)
    env = task_env(task, row, ctx)
    if not guards.conditions_pass(task, env, ctx):
        return replace(row, outcome="skipped: condition")
    now = ctx.clock()
    attempt = coord_of(ctx).try_overlap(
        task.name, lease=task.overlap_lease, now=now, timeout=task.timeout
    )
    if attempt.lock is None:
        return still_running(row, attempt.holder, now)
    lock: HeldLock = attempt.lock
    try:
        with guards.group_slot(task, row, ctx) as full:
            if full is not None:
                return full
            if task.reports_outside:
                return attempts.execute(store, task, row, env, ctx, lock, execute)
            return execute(store, task, row, env, ctx, lock)
    finally:
        guards.release(task, lock, ctx)
