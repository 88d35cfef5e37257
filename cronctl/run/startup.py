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

import os
from datetime import datetime

from cronctl.core.model import Schedule, Task
from cronctl.core.runs import START_TRIGGER, RunRow
from cronctl.edge import metrics
from cronctl.edge.state.store import Store
from cronctl.run import guards
from cronctl.run.context import RunContext, RunReport, new_run_id
from cronctl.run.occurrence import run_all
from cronctl.run.once import coordinated


def start_tasks(schedule: Schedule) -> list[Task]:
    """The tasks `work` runs when it starts."""
    return [t for t in schedule.tasks if t.on_start]


def run_start_tasks(schedule: Schedule, started: datetime, ctx: RunContext) -> RunReport:
    """Run every on_start task once (at most max_parallel at once); what happened to each."""
    tasks = start_tasks(schedule)
    if not tasks:
        return RunReport(started, [])
    started = started.replace(microsecond=0)
    with coordinated(ctx) as ctx, Store.open(ctx.state_dir) as store:
        paused = guards.paused(ctx).names
        rows = [
            RunRow(
                id=new_run_id(started),
                task=task.name,
                occurrence=started,
                outcome="skipped: paused" if task.paused or task.name in paused else "pending",
                host=ctx.host,
                pid=os.getpid(),
                trigger=START_TRIGGER,
            )
            for task in tasks
        ]
        with store.transaction() as tx:
            tx.add_runs(rows)
        units = [(t, [r]) for t, r in zip(tasks, rows, strict=True) if r.outcome == "pending"]
        final = {r.task: r for r in run_all(store, units, ctx)}  # each one's last attempt
        runs = [final.get(r.task, r) for r in rows]
        ctx.run.records.finish(store, runs, ctx.state_dir)
        if schedule.settings.metrics_file is not None:
            metrics.write_metrics(schedule, store, ctx.world.clock(), ctx.state_dir, ctx.world.warn)
    return RunReport(started, runs)
