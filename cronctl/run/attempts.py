"""One occurrence beyond its command (docs/schedule-file.md, "Retries, pings and hooks"):
retries, the heartbeat ping, the hooks, and what to report when it ends (`notify`).

The single attempt is handed in (`Attempt`): this module wraps whatever starts the command,
so it sits above run/occurrence.py's workers without importing them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import TypeAlias

from cronctl.coord.port import HeldLock
from cronctl.core.model import Task
from cronctl.core.runs import AFTER_TRIGGER, FAILED, FINISHED, START_TRIGGER, RunRow
from cronctl.edge.notify import OccurrencePings, RunPings, run_hook
from cronctl.edge.state.store import Store
from cronctl.run.context import RESULT_FIELDS, RunContext, new_run_id

#: One attempt of the command: (store, task, its row, env, ctx, overlap lock) -> the result.
Attempt: TypeAlias = Callable[
    [Store, Task, RunRow, dict[str, str], RunContext, HeldLock | None], RunRow
]

RETRYABLE = FAILED - {"error"}
#: The runs that retry: not `exec`'s, which an operator watches.
_RETRIED = ("schedule", START_TRIGGER, AFTER_TRIGGER)


def execute(
    store: Store,
    task: Task,
    row: RunRow,
    env: dict[str, str],
    ctx: RunContext,
    lock: HeldLock | None,
    attempt: Attempt,
) -> RunRow:
    """Run the command (`attempt`), again on failure while retries last; ping and hook around
    it all.

    The overlap lock (`lock`) stays held through the retry delays: the occurrence is not
    over until its last attempt is.
    """
    pinger = None
    own = None  # the pings of an occurrence run outside run_all (`exec`): waited for here
    if task.ping_url is not None:
        pings = ctx.pings
        if pings is None:
            pings = own = RunPings()
            if ctx.tracker is not None:
                ctx.tracker.on_stop(own.stop)
        pinger = OccurrencePings(task, ctx.state_dir, ctx.warn, pings)
        pinger.start(row.id)
    result = attempt(store, task, row, env, ctx, lock)
    while (delay := retry_delay(task, result, ctx)) is not None:
        store.update_run(result.id, **{k: getattr(result, k) for k in RESULT_FIELDS})
        ctx.sleep(delay.total_seconds())
        if ctx.tracker is not None and ctx.tracker.stopping:
            # Told to stop during the delay: the failed attempt is the outcome, and says so.
            result = replace(result, message=_joined(result.message, NOT_RETRIED))
            break
        row = replace(
            RunRow(row.id, row.task, row.occurrence, "pending", row.host, row.pid),
            id=new_run_id(row.occurrence),
            trigger=row.trigger,
            attempt=result.attempt + 1,
            upstream=row.upstream,
        )
        with store.transaction() as tx:
            tx.add_run(row)
        env = {**env, "CRONCTL_RUN_ID": row.id, "CRONCTL_ATTEMPT": str(row.attempt)}
        result = attempt(store, task, row, env, ctx, lock)
    if pinger is not None:
        pinger.finish(result)  # in the background: the result is recorded without waiting
    if task.on_failure or task.on_success:
        run_hook(task, result, env, ctx.state_dir, ctx.warn)
    if own is not None:
        own.settle()
        if ctx.tracker is not None:
            ctx.tracker.forget_stop(own.stop)
    return result


#: Added to the message of a failed attempt whose retry a stop prevented.
NOT_RETRIED = "not retried: cronctl was told to stop"


def _joined(first: str | None, second: str) -> str:
    return f"{first}; {second}" if first else second


def retry_delay(task: Task, result: RunRow, ctx: RunContext) -> timedelta | None:
    """How long to wait before the next attempt, or None: no retry.

    Only scheduled and start-up runs retry (not `exec`'s), only `failed`/`timeout` (an
    `error` could not start: trying again changes nothing), and a guarded task stops when
    the retry would start at or after its next occurrence, which must never find its own
    retry still running.
    """
    if result.outcome not in RETRYABLE or result.trigger not in (
        "schedule",
        START_TRIGGER,
        AFTER_TRIGGER,
    ):
        return None
    if result.attempt > task.retries:
        return None
    delay = task.retry_delay * (1 << (result.attempt - 1))
    if task.without_overlapping or task.on_one_server:
        following = task.next_run(result.occurrence)
        if following is not None and ctx.clock() + delay >= following:
            ctx.warn(
                f"cronctl: task {task.name}: not retrying attempt {result.attempt}: the retry "
                "would reach the next occurrence"
            )
            return None
    return delay


def earlier(store: Store, result: RunRow) -> list[RunRow]:
    """The attempts before `result` of its occurrence, as recorded (oldest first)."""
    if result.attempt <= 1:
        return []
    rows = store.history(result.task, limit=result.attempt + 50)
    found = [
        r
        for r in rows
        if r.occurrence == result.occurrence and r.attempt < result.attempt and r.id != result.id
    ]
    return sorted(found, key=lambda r: r.attempt)


def finished(store: Store, task: Task, result: RunRow, ctx: RunContext) -> None:
    """Tell `ctx.on_done` how the occurrence ended and what to say about it."""
    if ctx.on_done is None:
        return
    ctx.on_done(task, result, report_kind(store, task, result))


def report_kind(store: Store, task: Task, result: RunRow) -> str | None:
    """ "failure" (print the report), "recovered" (one line), or None (say nothing).

    `notify = "always"`: every failure. `"change"`: a failure only when the run before it
    did not fail, and one line when a failing task works again.
    """
    failed = result.outcome in FAILED
    if task.notify != "change":
        return "failure" if failed else None
    if result.outcome not in FINISHED:
        return None
    before = previous_final(store, result)
    was_failing = before is not None and before.outcome in FAILED
    if failed:
        return None if was_failing else "failure"
    return "recovered" if was_failing else None


def previous_final(store: Store, result: RunRow) -> RunRow | None:
    """The last run of the task before `result`'s occurrence that ended ok or failing."""
    for row in store.history(result.task, limit=200):
        if row.occurrence < result.occurrence and row.outcome in FINISHED:
            return row
    return None
