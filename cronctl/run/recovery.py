"""Closing what a dead cronctl left (pending/running rows, kept results), and the hourly
housekeeping."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import replace
from datetime import datetime, timedelta

from cronctl.coord.port import StoreUnavailable
from cronctl.core.model import Schedule
from cronctl.core.runs import HISTORY_RETENTION, LOG_RETENTION, RunRow
from cronctl.edge.process import procs, runner
from cronctl.edge.state import unsaved
from cronctl.edge.state.store import Store
from cronctl.run.context import RESULT_FIELDS, RunContext, real_clock

#: A row left open under another host name is judged only after this long (or the longest
#: task timeout, if longer): state_dir belongs to one machine, so such a row was left by this
#: machine under an earlier name (a renamed container), but its pid means nothing until no run
#: of the old name can still be going (say a state_dir wrongly shared for a while).
FOREIGN_HOST_AGE = timedelta(hours=24)
#: What a pending row a dead cronctl left says: provably never started (run/chains.py may
#: start it again).
DID_NOT_START = "cronctl died before starting this run; it did not run"


def recover(store: Store, ctx: RunContext, schedule: Schedule) -> list[RunRow]:
    """Close the rows a cronctl that died left pending or running, as errors of this run:
    cron's mail says what was interrupted."""
    unfinished = store.unfinished_runs(None)
    if not unfinished:
        # A kept result or a crashed run's reservation always comes with an unfinished row.
        return []
    kept = unsaved.Kept(ctx.state_dir)  # the results earlier runs could not save
    foreign_age = max([FOREIGN_HOST_AGE, *(t.timeout for t in schedule.tasks if t.timeout)])
    closed: list[RunRow] = []
    for row in unfinished:
        if (fields := kept.take(row.id)) is not None:
            try:
                store.close_unfinished(row, **{k: fields[k] for k in RESULT_FIELDS if k in fields})
            except (ValueError, TypeError):
                pass  # not a result cronctl wrote: recover the row as usual
            else:
                unsaved.forget(ctx.state_dir, row.id)
                continue  # ended and reported when it ran; now recorded, not reported again
        if row.host != ctx.host and real_clock() - (row.started or row.occurrence) <= foreign_age:
            continue
        # A live owner is still at work: another `run`, or this very process (`work` ticks
        # in threads, so a slow task from the last minute shares our pid).
        if row.pid is not None and procs.alive(row.pid):
            continue
        message = "cronctl died before this run finished; its outcome is unknown"
        if row.outcome == "pending":
            message = DID_NOT_START
        if row.host != ctx.host:
            message += f" (left open under the host name {row.host!r})"
        # Conditional: an owner that recorded its end since the read above keeps it.
        if store.close_unfinished(row, outcome="error", message=message):
            closed.append(replace(row, outcome="error", message=message))
        unsaved.forget(ctx.state_dir, row.id)  # the reservation a crash left behind
    kept.done()  # only now: a store that failed above leaves them for the next run
    return closed


def sweep(store: Store, ctx: RunContext, now: datetime) -> None:
    """Hourly housekeeping: old claims, logs and history rows."""
    with suppress(StoreUnavailable):  # housekeeping waits for the next hour
        ctx.coord.sweep(now)
    runner.sweep_logs(ctx.state_dir / "logs", now=now, max_age=LOG_RETENTION)
    store.prune(now - HISTORY_RETENTION)
