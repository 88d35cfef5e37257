"""One occurrence's command: its attempts, retries, pings and hooks, and what to report when
it ends (docs/schedule-file.md, "Retries, pings and hooks")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

from cronctl.coord.port import HeldLock
from cronctl.core.model import Task, format_utc
from cronctl.core.runs import AFTER_TRIGGER, FAILED, FINISHED, START_TRIGGER, RunRow
from cronctl.edge import secrets
from cronctl.edge.notify import OccurrencePings, run_hook
from cronctl.edge.process import runner
from cronctl.edge.safefiles import ensure_private_dir
from cronctl.edge.state.store import Store
from cronctl.errors import EnvFileError
from cronctl.run.context import (
    NOT_STARTED,
    RunContext,
    log_path,
    new_run_id,
    result_fields,
    running_fields,
)

RETRYABLE = FAILED - {"error"}
#: Added to the message of a failed attempt whose retry a stop prevented.
NOT_RETRIED = "not retried: cronctl was told to stop"
#: cronctl's own secrets, never inherited by a task (docs/guarantees.md); its `env` may set one.
#: libpq's PGPASSWORD and the like are the tasks' own.
SECRET_VARIABLES = ("CRONCTL_COORDINATION", "CRONCTL_SERVE_TOKEN")


def task_env(task: Task, row: RunRow, ctx: RunContext) -> dict[str, str]:
    """The environment of the task's command (and its hooks and conditions): cronctl's
    without its secrets, the task's, and CRONCTL_*."""
    env = dict(ctx.env)  # a copy and two pops, not a test per variable
    for name in SECRET_VARIABLES:
        env.pop(name, None)
    env.update(task.env)
    env["CRONCTL_TASK"] = task.name
    env["CRONCTL_OCCURRENCE"] = format_utc(row.occurrence)
    env["CRONCTL_RUN_ID"] = row.id
    # Every attempt, the first too: a script testing it must not meet an unset variable.
    env["CRONCTL_ATTEMPT"] = str(row.attempt)
    if task.chained:
        env["CRONCTL_UPSTREAM"] = row.upstream  # the upstream run ids (docs/chains.md)
    return env


def execute(
    store: Store, task: Task, row: RunRow, env: dict[str, str], ctx: RunContext,
    lock: HeldLock | None, started: Callable[[str], None] = lambda _id: None,
) -> RunRow:  # fmt: skip
    """Run the command, again on failure while retries last (holding `lock` through the
    delays: the occurrence lasts until its last attempt ends), pings and hooks around it;
    ``started`` hears each attempt's id once its command started."""
    if not task.reports_outside:
        return _attempt(store, task, row, env, ctx, lock, started)
    pinger = None
    if task.ping_url is not None:
        pinger = OccurrencePings(task, ctx.state_dir, ctx.world.warn, ctx.run.pings, row.id)
    result = _attempt(store, task, row, env, ctx, lock, started)
    while (delay := retry_delay(task, result, ctx)) is not None:
        store.update_run(result.id, **result_fields(result))
        ctx.world.sleep(delay.total_seconds())
        if ctx.tracker.stopping:
            # Told to stop during the delay: the failed attempt is the outcome, and says so.
            message = f"{result.message}; {NOT_RETRIED}" if result.message else NOT_RETRIED
            result = replace(result, message=message)
            break
        row = RunRow(
            new_run_id(row.occurrence), row.task, row.occurrence, "pending", row.host, row.pid,
            trigger=row.trigger, attempt=result.attempt + 1, upstream=row.upstream,
        )  # fmt: skip
        with store.transaction() as tx:
            tx.add_run(row)
        env = {**env, "CRONCTL_RUN_ID": row.id, "CRONCTL_ATTEMPT": str(row.attempt)}
        result = _attempt(store, task, row, env, ctx, lock, started)
    if pinger is not None:
        pinger.finish(result)  # in the background: the result is recorded without waiting
    if task.on_failure or task.on_success:
        run_hook(task, result, env, ctx.state_dir, ctx.world.warn)
    return result


def _attempt(
    store: Store, task: Task, row: RunRow, env: dict[str, str], ctx: RunContext,
    lock: HeldLock | None, started: Callable[[str], None],
) -> RunRow:  # fmt: skip
    """Mark the run "running" (durably), start the command, wait for it: its result row."""
    mask: tuple[str, ...] = ()
    if task.has_secrets:
        try:
            # Read at each attempt (a rotated secret counts from the next one), for the
            # command only: conditions and hooks never see them.
            found = secrets.load(task, ctx.env)
        except EnvFileError as exc:
            # Nothing ran: the task's own failure, named by file and line, never by value.
            message = f"cannot read its secrets: {exc}; it was not started"
            return replace(row, outcome="error", message=message, started=None)
        env = {**env, **found.env, **{k: v for k, v in env.items() if k.startswith("CRONCTL_")}}
        mask = found.values
    path = log_path(task, row, ctx)  # text: a Path per task cost more than its checks
    ensure_private_dir(path.rpartition("/")[0], within=ctx.state_dir)
    # Recorded before the start (by planning for the first wave): a cronctl killed from here
    # on leaves "running", which recovery reports as an unknown outcome, never as "did not run".
    if row.id not in ctx.run.marked:
        store.update_run(row.id, **running_fields(task, row, ctx))
    spec = runner.RunSpec(
        command=task.command, shell=task.shell, workdir=task.workdir, env=env,
        timeout=task.timeout, log_path=path, pass_fds=(lock.fd,) if lock is not None else (),
        stream=ctx.listener.output(task.name), mask=mask, max_output=task.max_output or 0,
        memory_max=task.memory_max, cpu_max=task.cpu_max, nice=task.nice, ionice=task.ionice,
    )  # fmt: skip
    if ctx.tracker.stopping:
        return replace(row, outcome="interrupted", message=NOT_STARTED, log_path=None)
    running = ctx.world.start(spec)
    ctx.tracker.add(running)
    try:
        _record_command(task, lock, getattr(running, "pid", None), ctx)
        started(row.id)
        result = running.wait()
    finally:
        ctx.tracker.discard(running)
    return replace(
        row, outcome=result.outcome, exit_code=result.exit_code, started=result.started,
        ended=result.ended, duration_s=result.duration_s,
        log_path=path if getattr(result, "log_kept", True) else None, tail=result.tail,
        message=_message(result),
    )  # fmt: skip


def _record_command(task: Task, lock: HeldLock | None, pid: object, ctx: RunContext) -> None:
    if lock is None or not isinstance(pid, int):
        return
    try:
        lock.record_command(pid)
    except OSError as exc:
        ctx.world.warn(
            f"cronctl: warning: task {task.name}: could not record its command in the overlap "
            f"lock ({exc}); if it closes its descriptors and cronctl dies, a second copy could "
            "start"
        )


def _message(result: runner.CommandResult) -> str | None:
    """The result's message, naming the signal that ended it (never "exit None")."""
    if result.signal is None or result.exit_code is not None:
        return result.message
    killed = f"killed by {runner.signal_name(result.signal)}"
    return f"{killed}; {result.message}" if result.message else killed


def retry_delay(task: Task, result: RunRow, ctx: RunContext) -> timedelta | None:
    """The wait before the next attempt; None: no retry (`exec`'s: an operator watches; an
    `error` never started; a guarded task's next occurrence must not find it running)."""
    if result.outcome not in RETRYABLE or result.attempt > task.retries:
        return None
    if result.trigger not in ("schedule", START_TRIGGER, AFTER_TRIGGER):
        return None
    delay = task.retry_delay * (1 << (result.attempt - 1))
    if task.without_overlapping or task.on_one_server:
        following = task.next_run(result.occurrence)
        if following is not None and ctx.world.clock() + delay >= following:
            ctx.world.warn(
                f"cronctl: task {task.name}: not retrying attempt {result.attempt}: the retry "
                "would reach the next occurrence"
            )
            return None
    return delay


def earlier(store: Store, result: RunRow) -> list[RunRow]:
    """The attempts of `result`'s occurrence before it, oldest first."""
    if result.attempt <= 1:
        return []
    rows = store.history(result.task, limit=result.attempt + 50)
    found = [
        r
        for r in rows
        if r.occurrence == result.occurrence and r.attempt < result.attempt and r.id != result.id
    ]
    return sorted(found, key=lambda r: r.attempt)


def report_kind(store: Store, task: Task, result: RunRow) -> str | None:
    """ "failure" (print the report), "recovered" (one line), or None (say nothing):
    `notify = "change"` reports a failure only when the run before it did not fail."""
    failed = result.outcome in FAILED
    if task.notify != "change":
        return "failure" if failed else None
    if result.outcome not in FINISHED:
        return None
    # The last run of the task before this occurrence that ended ok or failing.
    before = next(
        (r for r in store.history(result.task, limit=200)
         if r.occurrence < result.occurrence and r.outcome in FINISHED),
        None,
    )  # fmt: skip
    was_failing = before is not None and before.outcome in FAILED
    if failed:
        return None if was_failing else "failure"
    return "recovered" if was_failing else None
