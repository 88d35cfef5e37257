"""`cronctl exec NAME [--wait] [--chain]`: run one task now as a scheduled run would
(docs/commands.md), but with no claim and no conditions, and under the overlap lock even
without `without_overlapping` (two runs by hand at once are never what was meant)."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from functools import partial
from types import FrameType
from typing import TypeVar

from cronctl.commands.schedule import find_task
from cronctl.coord import outbox
from cronctl.coord.port import Coordinator, GroupSlot, HeldLock, HolderInfo
from cronctl.core.model import Schedule, Task, format_duration, runs_on
from cronctl.core.runs import RunRow
from cronctl.edge.awake import AWAKE_S
from cronctl.edge.process.procs import alive
from cronctl.edge.safefiles import ensure_private_dir
from cronctl.edge.state.store import Store
from cronctl.errors import CronctlError, UsageError
from cronctl.run import chains, guards
from cronctl.run.attempts import execute, task_env
from cronctl.run.context import RunContext, Tracker, new_run_id, result_fields
from cronctl.run.once import coordinated

WAIT_POLL_S = 0.5
_T = TypeVar("_T")
_Words = tuple[str, str, str]


@dataclass(frozen=True)
class ExecResult:
    run: RunRow
    exit_code: int  # what `cronctl exec` exits with
    followed: tuple[RunRow, ...] = ()  # `--chain`: the runs of what followed, in order


class Busy(CronctlError):
    """Running already, or its group full: nothing started (`said`: without the --wait hint)."""

    def __init__(self, said: str, wait: str) -> None:
        super().__init__(f"{said}, or pass --wait to wait {wait}")
        self.said = said


@dataclass(frozen=True)
class Begun:
    """A manual run holding its lock (and slot), recorded "pending"; :meth:`finish` runs it."""

    task: Task
    ctx: RunContext  # its tracker: the run's commands, to pass Ctrl-C or SIGTERM on to
    lock: HeldLock
    slot: GroupSlot | None
    row: RunRow

    def finish(self) -> ExecResult:
        try:
            result = _in_worker(lambda: _run_now(self.task, self.ctx, self.lock, self.row))
        finally:
            if self.slot is not None:
                self.slot.release()
            guards.release(self.task, self.lock, self.ctx)  # a store lock lost meanwhile says so
        return ExecResult(result, exit_code_of(result))


def exec_task(
    schedule: Schedule, name: str, ctx: RunContext, wait: bool, chain: bool = False
) -> ExecResult:
    """Run `name` now under its overlap lock; refuse (or wait) while it is running. With
    `chain`, then what follows it; the exit code is 1 when one of those did not end ok."""
    begun = begin_exec(schedule, name, ctx, wait)
    with _signals_forwarded(begun.ctx.tracker):
        done = begun.finish()
        if not chain:
            return done
        rows = _in_worker(lambda: follow_chain(schedule, begun.task, done.run, begun.ctx))
        failed = done.exit_code == 0 and any(r.outcome != "ok" for r in rows)
        return replace(done, followed=tuple(rows), exit_code=1 if failed else done.exit_code)


def follow_chain(schedule: Schedule, task: Task, row: RunRow, ctx: RunContext) -> list[RunRow]:
    """What follows ``task``'s ended run ``row``, run as the schedule would: their rows."""
    with coordinated(ctx) as ctx, Store.open(ctx.state_dir) as store:
        followers = ctx.run.follow = chains.RunChains(schedule, guards.paused(ctx).names, {})
        followers.record(task, row, ctx)
        rows = followers.start(store, task, row, ctx)
        ctx.run.records.finish(store, rows, ctx.state_dir)
    return rows


def begin_exec(schedule: Schedule, name: str, ctx: RunContext, wait: bool) -> Begun:
    """Take `name`'s overlap lock (and its group's slot) and record the run "pending"; Busy
    when it is running (or its group is full) and `wait` is False."""
    task = find_task(schedule, name)
    if not runs_on(task, ctx.host):
        patterns = ", ".join(task.hosts)
        raise UsageError(
            f"task {name!r} runs only on hosts matching {patterns}; this machine is "
            f"{ctx.host!r} (set --host or CRONCTL_HOST if that name is wrong)"
        )
    ensure_private_dir(ctx.state_dir)
    ensure_private_dir(ctx.lock_dir)
    coord = ctx.coord
    with ExitStack() as undo:  # let go of the lock and the slot if what follows fails
        try:
            if task.paused or task.name in coord.paused_tasks():
                ctx.world.warn(
                    f"cronctl: note: task {task.name} is paused; running it anyway, as asked"
                )
            attempt = partial(_lock_attempt, task, coord, ctx)
            lock = _wait_for(attempt, ctx, wait, ("for it to end", "it ends", "for it"))
            undo.callback(lock.release)
            slot = _take_slot(task, coord, ctx, wait)
            if slot is not None:
                undo.callback(slot.release)
        finally:
            coord.close()  # the run's connection only: a store lock keeps its own session
        row = _pending(task, ctx)
        undo.pop_all()
    return Begun(task, replace(ctx, tracker=Tracker()), lock, slot, row)


def _in_worker(body: Callable[[], _T]) -> _T:
    """Run `body` in a thread while the main thread waits: a signal handler (which Python
    runs in the main thread) then never interrupts the body inside a lock it holds."""
    with futures.ThreadPoolExecutor(1, thread_name_prefix="cronctl-exec") as pool:
        future = pool.submit(body)
        while not futures.wait((future,), AWAKE_S).done:
            pass  # short waits: a SIGTERM must wake the main thread (edge/awake.py)
        return future.result()


def _pending(task: Task, ctx: RunContext) -> RunRow:
    now = ctx.world.clock()
    at = now.replace(microsecond=0)
    row = RunRow(new_run_id(now), task.name, at, "pending", ctx.host, os.getpid(), trigger="manual")
    with Store.open(ctx.state_dir) as store, store.transaction() as tx:
        tx.add_run(row)
    return row


def _run_now(task: Task, ctx: RunContext, lock: HeldLock, row: RunRow) -> RunRow:
    with coordinated(ctx) as ctx, Store.open(ctx.state_dir) as store:
        result = execute(store, task, row, task_env(task, row, ctx), ctx, lock)
        store.update_run(result.id, **result_fields(result))
        # Into the fleet history too: the fleet's views show manual runs.
        unsent = ctx.run.records.finish(store, [result], ctx.state_dir)
        if unsent is not None:
            ctx.world.warn(
                f"cronctl: warning: {unsent}; the run's record waits in "
                f"{ctx.state_dir / outbox.OUTBOX} and goes with the next run that reaches it"
            )
    return result


def exit_code_of(run: RunRow) -> int:
    """The task's exit code; 124 for a timeout (as timeout(1)), 128+N for a signal (as the
    shell), 127 when the command could not start."""
    if run.exit_code is not None:
        return run.exit_code
    if run.outcome == "timeout":
        return 124
    if run.outcome == "failed":
        # Killed by a signal, which the runner's message names (a row has no signal column).
        words = re.findall(r"\bSIG[A-Z0-9]+\b", run.message or "")
        named = [signal.Signals[w] for w in words if w in signal.Signals.__members__]
        return 128 + int(named[0]) if named else 1
    return 127 if run.outcome == "error" else 1


def _lock_attempt(task: Task, coord: Coordinator, ctx: RunContext) -> tuple[HeldLock | None, str]:
    """One attempt at the task's overlap lock, lock_dir (or the store) asked afresh."""
    try:
        attempt = coord.try_overlap(
            task.name, lease=task.overlap_lease, now=ctx.world.clock(), timeout=task.timeout
        )
    finally:
        coord.close()  # files: lock_dir checked again at the next attempt
    holder = attempt.holder
    if attempt.lock is not None:
        with Store.open(ctx.state_dir) as store:
            holder = running_here(store, ctx.host, task.name)
        if holder is None:
            if attempt.status == "overtaken":
                stuck = attempt.holder.describe() if attempt.holder else "an unknown run"
                lease = format_duration(task.overlap_lease) if task.overlap_lease else "?"
                ctx.world.warn(
                    f"cronctl: warning: task {task.name}: the run by {stuck} has held its "
                    f"overlap lock longer than the {lease} lease; treating it as stuck"
                )
            return attempt.lock, ""
        attempt.lock.release()  # an unguarded task's scheduled runs take no lock
    said = f" ({holder.describe()})" if holder else ""
    return None, f"task {task.name} is running{said}"


def _take_slot(task: Task, coord: Coordinator, ctx: RunContext, wait: bool) -> GroupSlot | None:
    """A slot of the task's group (None: it has none), waited for with --wait."""
    group, limit = task.group, task.group_limit
    if group is None:
        return None
    full = f"task {task.name}: group {group} is full ({limit} of its tasks are running)"
    words = ("for a slot", "one ends", "for a slot")
    return _wait_for(lambda: (coord.try_group_slot(group, limit), full), ctx, wait, words)


def _wait_for(
    attempt: Callable[[], tuple[_T | None, str]], ctx: RunContext, wait: bool, words: _Words
) -> _T:
    """What `attempt` takes, tried every WAIT_POLL_S with --wait, else Busy with its reason.
    `words`: waiting for what, try again when, and the --wait hint."""
    waiting, again, hint = words
    said = False
    while True:
        taken, why = attempt()
        if taken is not None:
            return taken
        if not wait:
            raise Busy(f"{why}; nothing was started. Try again when {again}", hint)
        if not said:
            ctx.world.warn(f"cronctl: {why}; waiting {waiting}")
            said = True
        ctx.world.sleep(WAIT_POLL_S)


def running_here(store: Store, host: str, name: str) -> HolderInfo | None:
    """A live run of `name` this machine's history shows (an unguarded task's holds no lock)."""
    for row in store.unfinished_runs(host):
        mine = row.task == name and row.outcome == "running"
        if mine and row.pid is not None and alive(row.pid):
            return HolderInfo(host, row.pid, row.started or row.occurrence)
    return None


@contextmanager
def _signals_forwarded(tracker: Tracker) -> Iterator[None]:
    """Ctrl-C or SIGTERM reach the task, which then ends and is recorded (cronctl waits for
    it). SIGHUP is ignored, so a dropped ssh session does not stop a manual run midway: by a
    handler that does nothing, as the task would inherit SIG_IGN through exec."""

    def forward(signum: int, _frame: FrameType | None) -> None:
        tracker.stop(signum)  # a task registered after this is signalled as it starts

    handlers = {signal.SIGINT: forward, signal.SIGTERM: forward, signal.SIGHUP: lambda *_: None}
    previous = {signum: signal.signal(signum, handler) for signum, handler in handlers.items()}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
