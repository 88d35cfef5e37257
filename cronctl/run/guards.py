"""The guards of one due occurrence, in the documented order after `paused`
(docs/guarantees.md): when/skip conditions, the on_one_server claim, the
without_overlapping lock, a slot of the task's group. Those that ask the coordination store
raise StoreUnavailable when it cannot be asked."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from cronctl.coord import open_coordinator, outbox
from cronctl.coord.port import Coordinator, HeldLock, HolderInfo, StoreUnavailable
from cronctl.core.model import DEFAULT_GROUP_WAIT, Task, format_duration, format_utc
from cronctl.core.runs import START_TRIGGER, RunRow
from cronctl.edge.awake import wait_awake
from cronctl.run.context import NOT_STARTED, REHEARSAL_DIR, RunContext, starts_at_once

CONDITION_TIMEOUT_S = 30.0

#: How long the run waits for a store across the network to answer with the pauses before
#: the tasks that need no store start by the pauses last read from it (docs/fleets-postgresql.md).
PAUSES_WAIT_S = 1.0
#: How often a task of a full group tries its group's slots again.
GROUP_POLL_S = 0.5
#: How often a claim waiting for a group's slot is renewed (a third of the store's lease).
RENEW_S = 5.0
#: When an occurrence another machine holds as a lease, not started, is asked for again:
#: soon at first (most such claims are marked started within milliseconds), then every few
#: seconds while it waits (a group's slot), up to ASK_FOR after the occurrence: with the
#: store's 20 s lease, a claimer that dies in the minute's first 20 s is taken over, and a
#: `run` from cron never waits into the next minute for work a live machine holds. `work`
#: asks on, every LATE_ASK_S, until the claim's run may no longer start: a claimer frozen
#: later is taken over within its lease and LATE_ASK_S (docs/fleets-postgresql.md).
FIRST_ASK_S = 0.5
ASK_S = 5.0
LATE_ASK_S = 10.0
ASK_FOR = timedelta(seconds=45)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Pauses:
    """The operator pauses a run goes by: the ones last read from the store when it was
    ``late`` or ``unreachable`` (the error is said; see RunState.recheck_pauses)."""

    names: Mapping[str, object]
    late: bool = False
    unreachable: bool = False


def paused(ctx: RunContext) -> Pauses:
    """The operator pauses. A store across the network is given PAUSES_WAIT_S: one that blocks
    must not hold back the tasks that need no store, which go by the pauses last read from
    it (docs/fleets-postgresql.md)."""
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

    if ctx.coord.may_be_unreachable:
        ctx.world.spawn(ask, "cronctl-pauses")
    else:
        ask()  # lock_dir answers at once; what it raises is raised below
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
    try:
        pauses = ctx.coord.paused_tasks()
    except StoreUnavailable as exc:
        kept = outbox.remembered_pauses(ctx.state_dir)
        also = f"; the pauses last read from it still hold ({', '.join(kept)})" if kept else ""
        ctx.world.warn(f"cronctl: error: {exc}; guarded tasks are not started this minute{also}")
        return Pauses(dict.fromkeys(kept), unreachable=True)
    if ctx.coord.may_be_unreachable:
        outbox.remember_pauses(ctx.state_dir, list(pauses))
    return Pauses(pauses)


def claims(task: Task, row: RunRow) -> bool:
    """Whether ``row`` takes an on_one_server claim: a start-up run takes none (a start is
    one machine's own, once.run_start_tasks)."""
    return task.on_one_server and row.trigger != START_TRIGGER


def batched(task: Task, row: RunRow, ctx: RunContext) -> bool:
    """Whether ``row`` is claimed with others, as a slot comes free (run_all's queue):
    on_one_server with neither conditions, which may hold on one machine only, nor jitter,
    after which it claims by itself (docs/guarantees.md). A rehearsal claims apart."""
    return claims(task, row) and not (task.when or task.skip or task.jitter or ctx.rehearsal)


def leased(task: Task) -> bool:
    """Whether a claim of ``task`` is a lease until its run is marked started (fence): when
    something may stand between the claim and the start; any other is marked started as it
    is won (docs/fleets-postgresql.md#claims-are-leases)."""
    return task.without_overlapping or not starts_at_once(task)


def claim_some(
    rows: Sequence[tuple[Task, RunRow]], ctx: RunContext, limit: int
) -> tuple[set[str], set[str]]:
    """Claim the rows in order until ``limit`` are won, in one round trip: the ids won, and
    those of the rows another machine holds as a lease still (they may yet be taken over)."""
    keys = {_key(row): row.id for _, row in rows}
    lease = {_key(row) for task, row in rows if leased(task)}
    until = {_key(row): wait_until(task, row, ctx) for task, row in rows}
    held: set[tuple[str, datetime]] = set()
    now = ctx.world.clock()
    won = ctx.coord.claim(list(keys), now=now, limit=limit, runs=keys, leased=lease, held=held,
                          until=until)  # fmt: skip
    return {keys[key] for key in won}, {keys[key] for key in held if key in keys}


def _key(row: RunRow) -> tuple[str, datetime]:
    return row.task, row.occurrence


def ask_until(task: Task, row: RunRow, ctx: RunContext) -> datetime:
    """Until when an occurrence held elsewhere as a lease is asked for again: its
    wait_until under `work`; under `run`, ASK_FOR after it if sooner. Past that, a claimer
    gone is found by every machine's next minute instead (the store's orphans)."""
    until = wait_until(task, row, ctx)
    return until if ctx.world.lives_on else min(until, row.occurrence + ASK_FOR)


def ask_again(row: RunRow, now: datetime, first: bool) -> float:
    """How long until an occurrence held elsewhere is asked for again (see ASK_S)."""
    if first:
        return FIRST_ASK_S
    return ASK_S if now < row.occurrence + ASK_FOR else LATE_ASK_S


def wait_until(task: Task, row: RunRow, ctx: RunContext) -> datetime:
    """Until when a claim's run may still start: as long as it may wait for a group's slot,
    misfire_grace (DEFAULT_GROUP_WAIT without one) after the occurrence, or for a chained
    task after its start, when its upstream ended (docs/chains.md); a claim taken over
    keeps its claimer's (planning.taken_over)."""
    since = ctx.world.clock() if task.chained else row.occurrence
    return ctx.run.deadlines.setdefault(row.id, since + (task.misfire_grace or DEFAULT_GROUP_WAIT))


def claim(task: Task, row: RunRow, ctx: RunContext, now: datetime) -> bool:
    """Whether this machine won `row`'s occurrence (taken with others by run_all's queue,
    or now: then asked again while another machine holds it as a lease, as the queue does)."""
    key = (task.name, row.occurrence)
    if ctx.rehearsal:
        # A claim taken for a pretended future occurrence would make the real one, when its
        # time comes, look run by another server: rehearsals claim among themselves, apart
        # (machines rehearsing the same future still run each occurrence once), in lock_dir
        # also when a coordination store holds the real claims.
        with closing(rehearsal_coordinator(ctx)) as apart:
            return key in apart.claim([key], now=now)
    won = ctx.run.claimed.pop(row.id, None)
    if won is not None:
        return won
    lease = {key} if leased(task) else frozenset()
    began, first = time.monotonic(), True
    until = {key: wait_until(task, row, ctx)}
    while True:
        held: set[tuple[str, datetime]] = set()
        found = ctx.coord.claim(
            [key], now=now, runs={key: row.id}, leased=lease, held=held, until=until
        )
        if key in found:
            return True
        asked = now + timedelta(seconds=time.monotonic() - began)
        left = (ask_until(task, row, ctx) - asked).total_seconds()
        if key not in held or left <= 0:
            return False
        ctx.world.sleep(min(ask_again(row, asked, first), left))  # ended early by a stop
        first = False
        if ctx.tracker.stopping:
            return False


def fence(task: Task, row: RunRow, ctx: RunContext) -> RunRow | None:
    """Mark a leased claim's run started before it starts: None, or the row's outcome when
    the claim was taken over meanwhile (this machine froze or lost the store past its lease:
    another ran it, and this one must not)."""
    if not claims(task, row) or ctx.rehearsal or not leased(task):
        return None
    if ctx.coord.keep_claim(_key(row), started=True):
        return None
    return replace(row, outcome="skipped: another server", message=TAKEN_OVER)


#: Why a claim this machine won was not run by it (guards.fence).
TAKEN_OVER = "its claim was taken over while this machine did not answer; another ran it"


def rehearsal_coordinator(ctx: RunContext) -> Coordinator:
    """The claims of rehearsals, apart from the real ones (see claim), in the directory
    once.coordinated made; the caller closes it."""
    return open_coordinator(None, ctx.lock_dir / REHEARSAL_DIR, host=ctx.host, pid=os.getpid())


def conditions_pass(task: Task, env: dict[str, str], ctx: RunContext) -> bool:
    """`when` holds and `skip` does not (each run as the task would be)."""

    def holds(command: str) -> bool:
        return ctx.world.condition(
            command, shell=task.shell, workdir=task.workdir, env=env, timeout_s=CONDITION_TIMEOUT_S
        )

    if task.when is not None and not holds(task.when):
        return False
    return not (task.skip is not None and holds(task.skip))


def acquire(
    task: Task, row: RunRow, ctx: RunContext, now: datetime
) -> tuple[RunRow | None, HeldLock | None]:
    """Take the claim and the overlap lock: (the row's skip outcome, None) when one is
    refused, else (None, the lock to hand to the task, or None when it needs none)."""
    # A start-up run takes the overlap lock whether or not its task sets
    # without_overlapping, as `cronctl exec` does (once.run_start_tasks).
    locks = task.without_overlapping or row.trigger == START_TRIGGER
    claimed = claims(task, row)
    if (claimed or locks) and ctx.run.recheck_pauses and task.name in ctx.coord.paused_tasks():
        return replace(row, outcome="skipped: paused"), None
    if claimed and not claim(task, row, ctx, now):
        return replace(row, outcome="skipped: another server"), None
    if not locks:
        return None, None
    attempt = ctx.coord.try_overlap(
        task.name, lease=task.overlap_lease, now=now, timeout=task.timeout
    )
    if not attempt.may_run:
        return still_running(row, attempt.holder, now), None
    if attempt.status == "overtaken":
        holder = attempt.holder.describe() if attempt.holder else "an unknown run"
        lease = format_duration(task.overlap_lease or timedelta(0))
        ctx.world.warn(
            f"cronctl: warning: task {task.name}: the run by {holder} has held its "
            f"overlap lock longer than the {lease} lease; treating it as stuck "
            "and running anyway"
        )
    return None, attempt.lock


def release(task: Task, lock: HeldLock, ctx: RunContext) -> None:
    """Let the overlap lock go; a store lock lost while the task ran says so."""
    lock.release()
    if lost := getattr(lock, "lost", None):
        ctx.world.warn(f"cronctl: warning: task {task.name}: {lost} while it ran")


@contextmanager
def group_slot(task: Task, row: RunRow, ctx: RunContext) -> Iterator[RunRow | None]:
    """Hold a slot of the task's group (if any) around the body, which is given None; or the
    row's ``skipped: group full`` outcome when the group stayed full until ``misfire_grace``
    after the occurrence (``interrupted`` when told to stop while waiting)."""
    if task.group is None:
        yield None
        return
    deadline = wait_until(task, row, ctx)
    began, began_s = ctx.world.clock(), time.monotonic()
    allowed = (deadline - began).total_seconds()
    coord = ctx.coord
    renewed = time.monotonic()
    while (slot := coord.try_group_slot(task.group, task.group_limit)) is None:
        if ctx.tracker.stopping:
            yield replace(row, outcome="interrupted", message=NOT_STARTED)
            return
        if claims(task, row) and not ctx.rehearsal and time.monotonic() - renewed > RENEW_S:
            # The claim is a lease while the run waits: renewed, or lost to another machine.
            if not coord.keep_claim(_key(row), started=False):
                yield replace(row, outcome="skipped: another server", message=TAKEN_OVER)
                return
            renewed = time.monotonic()
        # Time passes by either clock: `run --now T` pins the clock, a test's sleep moves it.
        waited = max((ctx.world.clock() - began).total_seconds(), time.monotonic() - began_s)
        if (left := allowed - waited) <= 0:
            until = format_utc(deadline)
            full = f"group {task.group} was full (max_running {task.group_limit}) until {until}"
            yield replace(row, outcome="skipped: group full", message=full)
            return
        ctx.world.sleep(min(GROUP_POLL_S, left))  # `work` and `run` end it early when told to stop
    try:
        yield None
    finally:
        slot.release()


#: A holder's own cronctl kills it at its timeout plus the kill grace (10 s): past this much
#: more, nobody is enforcing it (the holder's cronctl died, or the task escaped the group).
OVERDUE_SLACK = timedelta(seconds=70)


def still_running(row: RunRow, holder: HolderInfo | None, now: datetime) -> RunRow:
    """The skip for a held lock; a failure when the holder is long past its own timeout."""
    if holder is None:
        return replace(row, outcome="skipped: still running", message="holder unknown")
    if holder.overdue(now, OVERDUE_SLACK):
        timeout = format_duration(holder.timeout or timedelta(0))
        message = (
            f"did not run: the run by {holder.describe()} still holds the overlap lock, "
            f"long past its {timeout} timeout; stop it (kill the process group) or find "
            "what keeps it alive"
        )
        return replace(row, outcome="error", message=message)
    return replace(row, outcome="skipped: still running", message=holder.describe())
