"""`cronctl run`: plan the window, then for each due occurrence, in this order (docs/guarantees.md):
paused, when/skip conditions, on_one_server claim, without_overlapping lock, run.

The steps live in `cronctl.run` (context, planning, guards, occurrence, recovery);
this module ties them together and keeps the names callers import from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime

from cronctl.coord import open_coordinator, outbox
from cronctl.core.due import Plan
from cronctl.core.model import Schedule
from cronctl.core.runs import RunRow
from cronctl.edge import metrics
from cronctl.edge.awake import join_awake
from cronctl.edge.safefiles import ensure_private_dir
from cronctl.edge.state.store import Store
from cronctl.run import chains, guards, occurrence, planning, recovery
from cronctl.run.context import (
    CONDITION_TIMEOUT_S,
    REHEARSAL_AHEAD,
    REHEARSAL_DIR,
    Preclaims,
    RunContext,
    Running,
    RunReport,
    Tracker,
    check_condition,
    coord_of,
    new_run_id,
    real_clock,
    start_command,
)
from cronctl.run.recovery import FOREIGN_HOST_AGE

__all__ = [
    "CONDITION_TIMEOUT_S",
    "FOREIGN_HOST_AGE",
    "REHEARSAL_AHEAD",
    "REHEARSAL_DIR",
    "RunContext",
    "RunReport",
    "Running",
    "Tracker",
    "check_condition",
    "new_run_id",
    "real_clock",
    "run_once",
    "start_command",
]


def run_once(
    schedule: Schedule, now: datetime, ctx: RunContext, ahead: planning.Ahead | None = None
) -> RunReport:
    """Plan every task's window at `now`, record it, then run what is due.

    `ahead`: decisions worked out before `now` came (`work`); planning checks each is still
    what it would decide now."""
    if ctx.rehearsal:
        ctx = replace(ctx, state_dir=ensure_private_dir(ctx.state_dir) / REHEARSAL_DIR)
    with coordinated(ctx) as ctx:
        return _run_once(schedule, now, ctx, ahead)


@contextmanager
def coordinated(ctx: RunContext) -> Iterator[RunContext]:
    """`ctx` ready for a run (`run_once`, `work`'s start-up tasks): its directories made, a
    coordinator (files in lock_dir unless one is given) that a stop wakes from a wait on the
    store, closed at the end."""
    ensure_private_dir(ctx.state_dir)
    ensure_private_dir(ctx.lock_dir)
    coord = ctx.coord or open_coordinator(None, ctx.lock_dir, host=ctx.host, pid=ctx.pid)
    records = outbox.Records(coord.fleet) if coord.fleet is not None and not ctx.rehearsal else None
    ctx = replace(ctx, coord=coord, claimed=Preclaims(), marked=set(), records=records)
    if ctx.tracker is not None:
        ctx.tracker.on_stop(coord.stop_waiting)  # a SIGTERM ends a wait on the store at once
    try:
        yield ctx
    finally:
        if ctx.tracker is not None:
            ctx.tracker.forget_stop(coord.stop_waiting)
        coord.close()


def _run_once(
    schedule: Schedule, now: datetime, ctx: RunContext, ahead: planning.Ahead | None
) -> RunReport:
    pauses = guards.paused(ctx)
    paused = pauses.names
    ctx = replace(ctx, recheck_pauses=pauses.late)
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
        chained = _chains(schedule, paused, plans, ctx)
        caught: list[RunRow] = []
        catching = None
        if chained is not None:
            ctx = replace(ctx, follow=chained)
            # Beside the due tasks: a chain a crash left never holds up this minute's runs.
            catching = ctx.spawn(lambda: _catch_up(chained, store, now, ctx, caught), "catch-up")
        if pending:
            if ctx.starting is not None:
                ctx.starting(now, pending)
            by_task: dict[str, list[RunRow]] = {}
            for row in pending:
                by_task.setdefault(row.task, []).append(row)
            started = None if ahead is None else lambda: planning.advance_quiet(store, ahead, ctx)
            for row in occurrence.run_all(store, plans, by_task, ctx, started):
                results[row.id] = row
        if catching is not None:
            join_awake(catching)  # in `run`, the main thread: a SIGTERM must wake it
            results.update((row.id, row) for row in caught)
        if ctx.records is not None:
            unsent = ctx.records.finish(store, list(results.values()), ctx.state_dir)
            if unsent is not None and not _store_failure_said(pauses, results.values(), ctx):
                ctx.warn(
                    f"cronctl: warning: {unsent}; this run's records wait in "
                    f"{ctx.state_dir / outbox.OUTBOX} and go with the next run that reaches it"
                )
        if now.minute == 0 and not ctx.rehearsal:
            # Never by a pretended future time: that would delete present-day data.
            recovery.sweep(store, ctx, min(now, real_clock()))
        if schedule.settings.metrics_file is not None and not ctx.rehearsal:
            metrics.write_metrics(schedule, store, now, ctx.state_dir, ctx.warn)
    return RunReport(now, list(results.values()), plans=plans, missed=_missed(plans))


def _catch_up(
    chained: chains.RunChains, store: Store, now: datetime, ctx: RunContext, into: list[RunRow]
) -> None:
    """The chains' catch-up in its own thread: what it ran goes to ``into``; a failure is
    said, and the next minute looks again."""
    try:
        into.extend(chained.catch_up(store, now, ctx))
    except Exception as exc:
        ctx.warn(f"cronctl: error: chained tasks were not caught up this minute: {exc}")


def _chains(
    schedule: Schedule, paused: Mapping[str, object], plans: Mapping[str, Plan], ctx: RunContext
) -> chains.RunChains | None:
    """The run's chains, None when the schedule has none (nothing is recorded or read)."""
    if ctx.dry_run or not (schedule.followed_elsewhere or any(t.chained for t in schedule.tasks)):
        return None
    first = {n: p.last_occurrence for n, p in plans.items() if p.last_occurrence is not None}
    return chains.RunChains(schedule, paused, first)


def _store_failure_said(pauses: guards.Pauses, rows: Iterable[RunRow], ctx: RunContext) -> bool:
    """Whether the run has already said that the store failed it, or why it did not wait
    for it (once is enough for cron's mail): at the pauses (also when they came late: the
    read that failed then said so), in a task's error, or because it was told to stop."""
    if pauses.unreachable or pauses.late or (ctx.tracker is not None and ctx.tracker.stopping):
        return True
    where = coord_of(ctx).describe()
    return any(r.outcome == "error" and where in (r.message or "") for r in rows)


def _missed(plans: Mapping[str, Plan]) -> dict[str, tuple[int, datetime | None]]:
    """The missed count and window start of each task that missed something."""
    return {n: (p.missed_count, p.since) for n, p in plans.items() if p.missed}
