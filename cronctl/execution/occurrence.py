"""Running the due occurrences: each task's in a worker thread, one occurrence at a time
through its guards to its command, and its result recorded (or kept aside, SPEC 4.4)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple

from cronctl.core.due import Plan
from cronctl.core.model import Task, format_utc
from cronctl.core.record import replace
from cronctl.edge.coord import HeldLock, StoreUnavailable
from cronctl.edge.paths import ensure_private_dir
from cronctl.edge.store import PendingUpdate, RunRow, Store
from cronctl.errors import CronctlError
from cronctl.execution import guards
from cronctl.execution.context import RESULT_FIELDS, RunContext


def run_all(
    store: Store, plans: Mapping[str, Plan], by_task: Mapping[str, list[RunRow]], ctx: RunContext
) -> list[RunRow]:
    """Each task's occurrences in a worker thread, at most max_parallel at once."""
    units = iter(list(by_task.items()))
    results: list[RunRow] = []
    later: list[_Later] = []
    guard = threading.Lock()

    def worker() -> None:
        while True:
            with guard:
                unit = next(units, None)
            if unit is None:
                return
            name, rows = unit
            try:
                done = run_task(store, plans[name].task, rows, ctx, later)
            except Exception as exc:
                ctx.warn(f"cronctl: error: task {name}: could not record its run: {exc}")
                done = [replace(r, outcome="error", message=str(exc)) for r in rows]
            with guard:
                results.extend(done)

    threads = [
        threading.Thread(target=worker, name=f"cronctl-run-{i}")
        for i in range(max(1, min(ctx.max_parallel, len(by_task))))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return _settle(store, results, later, ctx)


class _Later(NamedTuple):
    """A result handed to the group commit without waiting (see run_task)."""

    handle: PendingUpdate
    result: RunRow
    fields: dict[str, Any]


def run_task(
    store: Store, task: Task, rows: list[RunRow], ctx: RunContext, later: list[_Later]
) -> list[RunRow]:
    """The occurrences of one task, oldest first, one at a time (catch-up never overlaps).

    A plain task's result joins the next group commit without waiting for it (``later``,
    settled by _settle once every worker is done): a crash before that commit leaves the row
    "running", reported as an unknown outcome, never run again. A task whose end is reported
    from history (notify, retries, live reports) waits, as those read what was saved.
    """
    from cronctl.edge import unsaved

    done: list[RunRow] = []
    for row in rows:
        unsaved.reserve(ctx.state_dir, row.id)  # room for the result if the disk fills up
        try:
            result = run_occurrence(store, task, row, ctx)
        except Exception as exc:
            result = replace(row, outcome="error", message=f"cronctl: {exc}")
        fields = {k: getattr(result, k) for k in RESULT_FIELDS}
        reported = result.attempt > 1 or task.notify != "always" or ctx.on_done is not None
        if not reported:
            handle = store.update_run_later(result.id, **fields)  # a retry's row has its own id
            later.append(_Later(handle, result, fields))
            done.append(result)
            continue
        try:
            store.update_run(result.id, **fields)
        except CronctlError as exc:
            result = _unsaved(result, fields, exc, ctx)
        else:
            unsaved.forget(ctx.state_dir, row.id)
        from cronctl import attempts

        done.extend(attempts.earlier(store, result))
        attempts.finished(store, task, result, ctx)
        done.append(result)
    return done


def _settle(
    store: Store, results: list[RunRow], later: list[_Later], ctx: RunContext
) -> list[RunRow]:
    """Commit the results still queued; drop the reservations of those saved, report those
    that could not be (kept aside, SPEC 4.4) as run_task reported them before batching."""
    if not later:
        return results
    from cronctl.edge import unsaved

    store.flush()
    changed: dict[str, RunRow] = {}
    for handle, result, fields in later:
        if handle.error is None:
            unsaved.forget(ctx.state_dir, result.id)
        elif isinstance(handle.error, CronctlError):
            changed[result.id] = _unsaved(result, fields, handle.error, ctx)
        else:
            ctx.warn(
                f"cronctl: error: task {result.task}: could not record its run: {handle.error}"
            )
            changed[result.id] = replace(result, outcome="error", message=str(handle.error))
    return [changed.get(r.id, r) for r in results]


def _unsaved(result: RunRow, fields: dict[str, Any], exc: CronctlError, ctx: RunContext) -> RunRow:
    """Report once what is known of a run whose record could not be saved (SPEC 4.4)."""
    from cronctl.edge import unsaved

    why = unsaved.keep(ctx.state_dir, result.id, fields)
    later = (
        "it is kept aside and recorded by the next run"
        if why is None
        else f"keeping it aside failed too ({why}), so the next run will report this run "
        "again, as of unknown outcome"
    )
    ran = "it did not run" if result.started is None else f"it ran: {result.outcome}"
    if result.exit_code is not None:
        ran += f", exit {result.exit_code}"
    note = f"the record could not be saved ({exc}); {later}"
    ctx.warn(f"cronctl: error: task {result.task}: {ran}; {note}")
    return replace(result, message="; ".join(filter(None, (result.message, note))))


def run_occurrence(store: Store, task: Task, row: RunRow, ctx: RunContext) -> RunRow:
    """One occurrence through jitter, misfire grace, conditions and guards to its end."""
    # Imported here, not at the top: a `run` with nothing due never needs it.
    from cronctl.outcomes import NOT_STARTED

    if task.jitter is not None:
        from cronctl.core.opskeys import jitter_offset

        ctx.sleep(jitter_offset(task, ctx.host))  # `work` ends it early when told to stop
    if ctx.tracker is not None and ctx.tracker.stopping:
        return replace(row, outcome="interrupted", message=NOT_STARTED)
    now = ctx.clock()
    if task.misfire_grace is not None and now - row.occurrence > task.misfire_grace:
        return replace(row, outcome="missed", message="older than misfire_grace when it came up")
    env = task_env(task, row, ctx)
    if not guards.conditions_pass(task, env, ctx):
        return replace(row, outcome="skipped: condition")
    if ctx.tracker is not None and ctx.tracker.stopping:
        # Told to stop while a condition ran: take no claim that another server could use.
        return replace(row, outcome="interrupted", message=NOT_STARTED)
    try:
        return _guarded(store, task, row, env, ctx, now)
    except StoreUnavailable as exc:
        return replace(row, outcome="error", message=str(exc))


def _guarded(
    store: Store, task: Task, row: RunRow, env: dict[str, str], ctx: RunContext, now: datetime
) -> RunRow:
    skipped, lock = guards.acquire(task, row, ctx, now)
    if skipped is not None:
        return skipped
    try:
        if task.reports_outside:
            from cronctl import attempts

            return attempts.execute(store, task, row, env, ctx, lock)
        return execute(store, task, row, env, ctx, lock)
    finally:
        if lock is not None:
            guards.release(task, lock, ctx)


def execute(
    store: Store,
    task: Task,
    row: RunRow,
    env: dict[str, str],
    ctx: RunContext,
    lock: HeldLock | None,
) -> RunRow:
    """Mark the run "running" (durably), start the command, wait for it: its result row."""
    log_dir = ensure_private_dir(ctx.state_dir / "logs" / task.name, within=ctx.state_dir)
    log_path = log_dir / f"{row.id}.log"
    # Recorded before the start: a cronctl killed from here on leaves "running", which
    # recovery reports as an unknown outcome, never as "did not run".
    store.update_run(row.id, outcome="running", started=ctx.clock(), log_path=str(log_path))
    from cronctl.edge import runner
    from cronctl.outcomes import NOT_STARTED, record_command, result_message

    spec = runner.RunSpec(
        command=task.command,
        shell=task.shell,
        workdir=task.workdir,
        env=env,
        timeout=task.timeout,
        log_path=log_path,
        pass_fds=(lock.fd,) if lock is not None else (),
        stream=ctx.output(task.name) if ctx.output is not None else None,
    )
    if ctx.tracker is not None and ctx.tracker.stopping:
        return replace(row, outcome="interrupted", message=NOT_STARTED, log_path=None)
    running = ctx.start(spec)
    if ctx.tracker is not None:
        ctx.tracker.add(running)
    try:
        record_command(task, lock, getattr(running, "pid", None), ctx.warn)
        result = running.wait()
    finally:
        if ctx.tracker is not None:
            ctx.tracker.discard(running)
    return replace(
        row,
        outcome=result.outcome,
        exit_code=result.exit_code,
        started=result.started,
        ended=result.ended,
        duration_s=result.duration_s,
        log_path=str(log_path) if getattr(result, "log_kept", True) else None,
        tail=result.tail,
        message=result_message(result),
    )


def task_env(task: Task, row: RunRow, ctx: RunContext) -> dict[str, str]:
    """The environment of the task's command: cronctl's, the task's, and CRONCTL_*."""
    env = dict(ctx.env)
    env.update(task.env)
    env["CRONCTL_TASK"] = task.name
    env["CRONCTL_OCCURRENCE"] = format_utc(row.occurrence)
    env["CRONCTL_RUN_ID"] = row.id
    return env
