"""A run (`cronctl run`, each minute of `work`): plan the windows, then run each due
occurrence through its guards (docs/guarantees.md); and `work`'s start-up runs
(docs/schedule-file.md, "Start-up tasks"), which leave the windows alone."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime

from cronctl.coord import outbox
from cronctl.core.due import Plan
from cronctl.core.model import Schedule, Task
from cronctl.core.runs import START_TRIGGER, RunRow
from cronctl.edge import metrics
from cronctl.edge.awake import join_awake
from cronctl.edge.safefiles import ensure_private_dir
from cronctl.edge.state.store import Store
from cronctl.run import chains, guards, occurrence, planning, recovery
from cronctl.run.context import REHEARSAL_DIR, RunContext, RunReport, RunState, real_clock


def run_once(
    schedule: Schedule, now: datetime, ctx: RunContext, ahead: planning.Ahead | None = None
) -> RunReport:
    """Plan every task's window at `now`, record it, then run what is due (`ahead`: `work`'s
    decisions worked out early, which planning checks)."""
    with coordinated(ctx) as ctx:
        return _run_once(schedule, now, ctx, ahead)


@contextmanager
def coordinated(ctx: RunContext) -> Iterator[RunContext]:
    """`ctx` with a state of its own: directories made (a rehearsal's apart), the coordinator
    woken by a stop and closed at the end, pings waited for."""
    if ctx.rehearsal:  # recorded and claimed apart (docs/guarantees.md#--now-rehearsals)
        ensure_private_dir(ctx.lock_dir / REHEARSAL_DIR, within=ctx.lock_dir)
        ctx = replace(ctx, state_dir=ensure_private_dir(ctx.state_dir) / REHEARSAL_DIR)
    ensure_private_dir(ctx.state_dir)
    ensure_private_dir(ctx.lock_dir)
    fleet = ctx.coord.fleet
    run = RunState()
    if fleet is not None and not ctx.rehearsal:
        run.records = outbox.Records(fleet)
    ctx = replace(ctx, run=run)
    stops = (ctx.coord.stop_waiting, run.pings.stop)  # a SIGTERM ends those waits at once
    for stop in stops:
        ctx.tracker.on_stop(stop)
    try:
        yield ctx
    finally:
        try:
            run.pings.settle()  # after every result is recorded: pings never delay a record
        finally:
            for stop in stops:
                ctx.tracker.forget_stop(stop)
            ctx.coord.close()


def _run_once(
    schedule: Schedule, now: datetime, ctx: RunContext, ahead: planning.Ahead | None
) -> RunReport:
    pauses = guards.paused(ctx)
    paused = pauses.names
    ctx.run.recheck_pauses = pauses.late
    kept = ahead.open_store() if ahead is not None else None  # `work`'s, open since its lead
    with kept or Store.open(ctx.state_dir) as store:
        if ctx.dry_run:
            try:
                planning.plan_all(store, schedule, now, paused, ctx)
            except planning.DryRunRollback as dry:
                runs = [
                    planning.dry_outcome(row, dry.plans[row.task].task, ctx) for row in dry.rows
                ]
                return RunReport(now, runs, dry_run=True, missed=_missed(dry.plans))
        recovered = recovery.recover(store, ctx, schedule)
        plans, rows = planning.plan_all(store, schedule, now, paused, ctx, ahead)
        # Older occurrences first: a task's rows run in order (run_task).
        rows = planning.taken_over(store, schedule, paused, rows, ctx) + rows
        pending = [r for r in rows if r.outcome == "pending"]
        results: dict[str, RunRow] = {r.id: r for r in recovered + rows}
        caught: list[RunRow] = []
        catching = None
        if schedule.followed_elsewhere or any(t.chained for t in schedule.tasks):
            first = {n: p.last_occurrence for n, p in plans.items() if p.last_occurrence}
            chained = ctx.run.follow = chains.RunChains(schedule, paused, first)
            # Beside the due tasks: a chain a crash left never holds up this minute's runs.
            catching = ctx.world.spawn(
                lambda: _catch_up(chained, store, now, ctx, caught), "catch-up"
            )
        if pending:
            ctx.listener.starting(now, pending)
            units: dict[str, tuple[Task, list[RunRow]]] = {}
            for row in pending:
                units.setdefault(row.task, (plans[row.task].task, []))[1].append(row)
            started = None if ahead is None else lambda: planning.advance_quiet(store, ahead, ctx)
            for row in occurrence.run_all(store, list(units.values()), ctx, started):
                results[row.id] = row
        if catching is not None:
            join_awake(catching)  # in `run`, the main thread: a SIGTERM must wake it
            results.update((row.id, row) for row in caught)
        unsent = ctx.run.records.finish(store, list(results.values()), ctx.state_dir)
        if unsent is not None and not _store_failure_said(pauses, results.values(), ctx):
            ctx.world.warn(
                f"cronctl: warning: {unsent}; this run's records wait in "
                f"{ctx.state_dir / outbox.OUTBOX} and go with the next run that reaches it"
            )
        if now.minute == 0 and not ctx.rehearsal:
            # Never by a pretended future time: that would delete present-day data.
            recovery.sweep(store, ctx, min(now, real_clock()))
        if schedule.settings.metrics_file is not None and not ctx.rehearsal:
            metrics.write_metrics(schedule, store, now, ctx.state_dir, ctx.world.warn)
    return RunReport(now, list(results.values()), plans=plans, missed=_missed(plans))


def _catch_up(
    chained: chains.RunChains, store: Store, now: datetime, ctx: RunContext, into: list[RunRow]
) -> None:
    """In its own thread; a failure is said, the next minute looks again."""
    try:
        into.extend(chained.catch_up(store, now, ctx))
    except Exception as exc:
        ctx.world.warn(f"cronctl: error: chained tasks were not caught up this minute: {exc}")


def _store_failure_said(pauses: guards.Pauses, rows: Iterable[RunRow], ctx: RunContext) -> bool:
    """Whether the run has already said that the store failed it, or why it did not wait for
    it (once is enough for cron's mail): at the pauses, in a task's error, or told to stop."""
    if pauses.unreachable or pauses.late or ctx.tracker.stopping:
        return True
    where = ctx.coord.describe()
    return any(r.outcome == "error" and where in (r.message or "") for r in rows)


def _missed(plans: Mapping[str, Plan]) -> dict[str, tuple[int, datetime | None]]:
    return {n: (p.missed_count, p.since) for n, p in plans.items() if p.missed}


def start_tasks(schedule: Schedule) -> list[Task]:
    return [t for t in schedule.tasks if t.on_start]


def run_start_tasks(schedule: Schedule, started: datetime, ctx: RunContext) -> RunReport:
    """Each on_start task once (``"trigger": "start"``): no claim (a start is one machine's
    own), the overlap lock always, as `exec` takes it."""
    tasks = start_tasks(schedule)
    started = started.replace(microsecond=0)
    with coordinated(ctx) as ctx, Store.open(ctx.state_dir) as store:
        paused = guards.paused(ctx).names
        rows = []
        for task in tasks:
            stopped = task.paused or task.name in paused
            row = planning.make_row(task, started, "skipped: paused" if stopped else "pending", ctx)
            rows.append(replace(row, trigger=START_TRIGGER))
        with store.transaction() as tx:
            tx.add_runs(rows)
        units = [(t, [r]) for t, r in zip(tasks, rows, strict=True) if r.outcome == "pending"]
        # Each one's last attempt (run_all gives the earlier ones too).
        final = {r.task: r for r in (occurrence.run_all(store, units, ctx) if units else [])}
        runs = [final.get(r.task, r) for r in rows]
        ctx.run.records.finish(store, runs, ctx.state_dir)
        if schedule.settings.metrics_file is not None:
            metrics.write_metrics(schedule, store, ctx.world.clock(), ctx.state_dir, ctx.world.warn)
    return RunReport(started, runs)
