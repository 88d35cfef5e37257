"""The guards of one due occurrence, in the documented order after `paused`
(docs/guarantees.md): when/skip conditions, the on_one_server claim, the
without_overlapping lock, a slot of the task's group."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from cronctl.coord import open_coordinator, outbox
from cronctl.coord.port import Coordinator, HeldLock, StoreUnavailable
from cronctl.core.due import Plan
from cronctl.core.groups import DEFAULT_GROUP_WAIT
from cronctl.core.model import Task, format_duration, format_utc
from cronctl.core.runs import RunRow
from cronctl.edge.awake import wait_awake
from cronctl.edge.paths import ensure_private_dir
from cronctl.run.context import CONDITION_TIMEOUT_S, REHEARSAL_DIR, RunContext, coord_of
from cronctl.run.outcomes import NOT_STARTED, still_running

#: How long the run waits for a store across the network to answer with the pauses before
#: the tasks that need no store start by the pauses last read from it (docs/fleets-postgresql.md).
PAUSES_WAIT_S = 1.0
#: How often a task of a full group tries its group's slots again.
GROUP_POLL_S = 0.5


@dataclass(frozen=True, slots=True)
class Pauses:
    """The operator pauses a run goes by; ``late``: the store had not answered in time, and
    ``unreachable``: it could not be asked (the error is said); either way these are the
    ones last read from it (see RunContext.recheck_pauses)."""

    names: Mapping[str, object]
    late: bool = False
    unreachable: bool = False


def paused(ctx: RunContext) -> Pauses:
    """The operator pauses. A store across the network is given PAUSES_WAIT_S: a store that
    answers but blocks (a locked table) must not hold back the tasks that need no store. When
    it is unreachable or late, the pauses last read from it hold (guarded tasks then wait for
    it, or fail at their claim or lock; the others run: see docs/fleets-postgresql.md)."""
    if not coord_of(ctx).may_be_unreachable:
        return _read_pauses(ctx)
    found: list[Pauses] = []
    refused: list[BaseException] = []  # a refusal (a newer schema): raised if in time
    answered = threading.Event()

    def ask() -> None:
        try:
            found.append(_read_pauses(ctx))
        except BaseException as exc:
            refused.append(exc)
        finally:
            answered.set()

    ctx.spawn(ask, "cronctl-pauses")
    deadline = time.monotonic() + PAUSES_WAIT_S
    while not answered.is_set() and (left := deadline - time.monotonic()) > 0:
        wait_awake(answered, left)  # `run`'s main thread: a SIGTERM must wake it (edge/awake)
    if not answered.is_set():
        return Pauses(dict.fromkeys(outbox.remembered_pauses(ctx.state_dir)), late=True)
    if refused:
        raise refused[0]
    return found[0]


def _read_pauses(ctx: RunContext) -> Pauses:
    """The store's pauses, or the ones last read from it, said why, when it is unreachable."""
    coord = coord_of(ctx)
    try:
        pauses = coord.paused_tasks()
    except StoreUnavailable as exc:
        kept = outbox.remembered_pauses(ctx.state_dir)
        also = f"; the pauses last read from it still hold ({', '.join(kept)})" if kept else ""
        ctx.warn(f"cronctl: error: {exc}; guarded tasks are not started this minute{also}")
        return Pauses(dict.fromkeys(kept), unreachable=True)
    if coord.may_be_unreachable:
        outbox.remember_pauses(ctx.state_dir, list(pauses))
    return Pauses(pauses)


def preclaim(
    plans: Mapping[str, Plan], by_task: Mapping[str, list[RunRow]], ctx: RunContext, now: datetime
) -> None:
    """Claim the next occurrence of every on_one_server task without conditions in one round
    trip. Tasks with when/skip claim after their conditions pass (docs/guarantees.md): a
    condition may hold on one machine only. A rehearsal never claims in the store (see claim)."""
    if ctx.rehearsal:
        return
    first = [
        rows[0]
        for name, rows in by_task.items()
        if (task := plans[name].task).on_one_server and not task.when and not task.skip
    ]
    if not first:
        return
    ctx.claimed.asking(r.id for r in first)

    def take() -> None:
        won: set[tuple[str, datetime]] | None = None
        try:
            won = coord_of(ctx).claim([(r.task, r.occurrence) for r in first], now=now)
        except StoreUnavailable:
            pass  # each task then meets the store's failure at its own claim
        finally:
            ctx.claimed.answered({} if won is None else {r.id: _key(r) in won for r in first})

    if coord_of(ctx).may_be_unreachable:
        ctx.spawn(take, "cronctl-claims")  # a store that blocks holds back no other task
    else:
        take()


def _key(row: RunRow) -> tuple[str, datetime]:
    return row.task, row.occurrence


def claim(task: Task, row: RunRow, ctx: RunContext, now: datetime) -> bool:
    """Whether this machine won `row`'s occurrence (taken ahead by preclaim, or now)."""
    key = (task.name, row.occurrence)
    if ctx.rehearsal:
        # A claim taken for a pretended future occurrence would make the real one, when its
        # time comes, look run by another server: rehearsals claim among themselves, apart
        # (machines rehearsing the same future still run each occurrence once), in lock_dir
        # also when a coordination store holds the real claims.
        apart = rehearsal_coordinator(ctx)
        try:
            return key in apart.claim([key], now=now)
        finally:
            apart.close()
    won = ctx.claimed.take(row.id)
    if won is None:
        won = key in coord_of(ctx).claim([key], now=now)
    return won


def rehearsal_coordinator(ctx: RunContext) -> Coordinator:
    """The claims of rehearsals, apart from the real ones (see claim); the caller closes it."""
    lock_dir = ensure_private_dir(ctx.lock_dir / REHEARSAL_DIR, within=ctx.lock_dir)
    return open_coordinator(None, lock_dir, host=ctx.host, pid=ctx.pid)


def conditions_pass(task: Task, env: dict[str, str], ctx: RunContext) -> bool:
    """`when` holds and `skip` does not (each run as the task would be)."""

    def holds(command: str) -> bool:
        return ctx.condition(
            command, shell=task.shell, workdir=task.workdir, env=env, timeout_s=CONDITION_TIMEOUT_S
        )

    if task.when is not None and not holds(task.when):
        return False
    return not (task.skip is not None and holds(task.skip))


def acquire(
    task: Task, row: RunRow, ctx: RunContext, now: datetime
) -> tuple[RunRow | None, HeldLock | None]:
    """Take the claim and the overlap lock: (the row's skip outcome, None) when one is
    refused, else (None, the lock to hand to the task, or None when it needs none).

    :raises StoreUnavailable: the coordination store could not be asked.
    """
    guarded = task.on_one_server or task.without_overlapping
    if guarded and ctx.recheck_pauses and task.name in coord_of(ctx).paused_tasks():
        return replace(row, outcome="skipped: paused"), None
    if task.on_one_server and not claim(task, row, ctx, now):
        return replace(row, outcome="skipped: another server"), None
    if not task.without_overlapping:
        return None, None
    attempt = coord_of(ctx).try_overlap(
        task.name, lease=task.overlap_lease, now=now, timeout=task.timeout
    )
    if not attempt.may_run:
        return still_running(row, attempt.holder, now), None
    if attempt.status == "overtaken":
        holder = attempt.holder.describe() if attempt.holder else "an unknown run"
        lease = format_duration(task.overlap_lease or timedelta(0))
        ctx.warn(
            f"cronctl: warning: task {task.name}: the run by {holder} has held its "
            f"overlap lock longer than the {lease} lease; treating it as stuck "
            "and running anyway"
        )
    return None, attempt.lock


def release(task: Task, lock: HeldLock, ctx: RunContext) -> None:
    """Let the overlap lock go; a store lock lost while the task ran says so."""
    lock.release()
    if lost := getattr(lock, "lost", None):
        ctx.warn(f"cronctl: warning: task {task.name}: {lost} while it ran")


@contextmanager
def group_slot(task: Task, row: RunRow, ctx: RunContext) -> Iterator[RunRow | None]:
    """Hold a slot of the task's group around the body, which is given None; or, when the
    group stayed full until ``misfire_grace`` (DEFAULT_GROUP_WAIT without one) after the
    occurrence, the row's ``skipped: group full`` outcome (``interrupted`` when told to stop
    while waiting). A task of no group is given None at once.

    :raises StoreUnavailable: the coordination store could not be asked.
    """
    if task.group is None:
        yield None
        return
    grace = task.misfire_grace or DEFAULT_GROUP_WAIT
    began, began_s = ctx.clock(), time.monotonic()
    allowed = (row.occurrence + grace - began).total_seconds()
    coord = coord_of(ctx)
    while (slot := coord.try_group_slot(task.group, task.group_limit)) is None:
        if ctx.tracker is not None and ctx.tracker.stopping:
            yield replace(row, outcome="interrupted", message=NOT_STARTED)
            return
        # Time passes by either clock: `run --now T` pins ctx.clock, a test's sleep moves it.
        waited = max((ctx.clock() - began).total_seconds(), time.monotonic() - began_s)
        if (left := allowed - waited) <= 0:
            until = format_utc(row.occurrence + grace)
            full = f"group {task.group} was full (max_running {task.group_limit}) until {until}"
            yield replace(row, outcome="skipped: group full", message=full)
            return
        ctx.sleep(min(GROUP_POLL_S, left))  # `work` and `run` end it early when told to stop
    try:
        yield None
    finally:
        slot.release()
