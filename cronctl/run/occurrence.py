"""Running the due occurrences: each task's in a worker thread, one occurrence at a time
through its guards to its command, and its result recorded (or kept aside, docs/guarantees.md)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, TypeAlias

from cronctl.coord.port import StoreUnavailable
from cronctl.core.model import Task
from cronctl.core.runs import START_TRIGGER, RunRow
from cronctl.edge.awake import join_awake
from cronctl.edge.state import unsaved
from cronctl.edge.state.store import Store
from cronctl.errors import CronctlError
from cronctl.run import attempts, guards
from cronctl.run.attempts import execute, task_env
from cronctl.run.context import (
    NOT_STARTED,
    RunContext,
    marked_early,
    result_fields,
    running_fields,
)

#: A task and its due rows, which one worker runs one after another.
Unit: TypeAlias = tuple[Task, list[RunRow]]


def run_all(
    store: Store, units: Sequence[Unit], ctx: RunContext, started: Callable[[], None] | None = None,
) -> list[RunRow]:  # fmt: skip
    """Each task's occurrences in a worker thread, at most max_parallel at once; `started` is
    called (here, never raising) once the rows planning marked "running" have started or
    ended, or after _FIRST_WAVE_S at most."""
    # Room for every result in case the disk fills up, reserved before anything starts.
    reserved = unsaved.reserve(ctx.state_dir, [r.id for _, rows in units for r in rows])
    queue = _Queue(units, ctx)
    results: list[RunRow] = []
    guard = threading.Lock()

    def worker() -> None:
        ahead: list[Unit] = []

        def take_ahead() -> Unit | None:
            if (unit := queue.take_ready()) is not None:
                ahead.append(unit)
            return unit

        unit = queue.take()
        while unit is not None:
            task, rows = unit
            try:
                done = run_task(store, task, rows, ctx, reserved, queue.settled, take_ahead)
            except Exception as exc:
                ctx.world.warn(f"cronctl: error: task {task.name}: could not record its run: {exc}")
                done = [replace(r, outcome="error", message=str(exc)) for r in rows]
            finally:
                queue.settled(rows[0].id)
                queue.finished()
            with guard:
                results.extend(done)
            unit = ahead.pop() if ahead else queue.take()

    try:
        threads = [ctx.world.spawn(worker, f"cronctl-run-{i}") for i in range(queue.workers)]
        try:
            if started is not None:
                queue.first_wave.wait(_FIRST_WAVE_S)
                started()
        finally:
            for thread in threads:
                join_awake(thread)  # in `run`, the main thread: a SIGTERM must wake it
    finally:
        if reserved is not None:
            reserved.close()
    return results


#: How long run_all waits at most for its first wave to start before it goes on (a start
#: takes milliseconds; this only bounds a start that hangs).
_FIRST_WAVE_S = 2.0


class _Queue:
    """The units of work (a task's due rows) handed to the workers, and the first wave: the
    rows planning marked "running" (``ctx.run.marked``), until each has started or ended."""

    def __init__(self, units: Sequence[Unit], ctx: RunContext) -> None:
        self._ctx = ctx
        # The rows claimed as slots come free go last (see take): the others start at once.
        self._units = sorted(units, key=self._batched)  # stable: False first
        self._next = 0
        self._lock = threading.Lock()
        self._turn = threading.Condition(self._lock)  # a claim's round trip ended
        self._busy = 0  # workers holding a unit
        self._claiming = False
        self._decided: set[str] = set()  # batched rows whose claim is decided (or failed)
        # Rows another machine holds as a lease, not started: asked again (see take) until
        # won, started there, or over (guards.ask_until), after guards.ask_again.
        self._held: set[str] = set()
        self._asked = 0.0  # when the last claim was made (time.monotonic)
        self._again_s = guards.FIRST_ASK_S
        self._began = (ctx.world.clock(), time.monotonic())
        self.workers = max(1, min(ctx.max_parallel, len(self._units)))
        # A claim waits (up to _GATHER_S) for this many free slots while others are busy.
        self._batch = -(-self.workers // 4)
        self._gather: float | None = None  # until when the free slots are gathered
        self._first = set(ctx.run.marked)
        self.first_wave = threading.Event()
        if not self._first:
            self.first_wave.set()

    def settled(self, row_id: str) -> None:
        """Row ``row_id``'s command has started, or its occurrence is over (see first_wave)."""
        with self._lock:
            if row_id in self._first:  # once each: Event.set is no cheap no-op
                self._first.remove(row_id)
                if not self._first:
                    self.first_wave.set()

    def _batched(self, unit: Unit) -> bool:
        return guards.batched(unit[0], unit[1][0], self._ctx)

    def take(self) -> Unit | None:
        """The next unit, or None when all are taken (docs/fleets-postgresql.md).

        A batched row (guards.batched) is handed out once its claim is decided: the worker
        that finds the next one undecided claims, in one round trip, as many of those left as
        there are workers free (see _gathering); the rows won go first, those lost end as
        "skipped: another server". Rows another machine holds as a lease, not started yet,
        go last and are asked for again (guards.ask_again) until won, started there, or
        guards.ask_until: `work` asks on while its next minutes start beside."""
        while True:
            with self._lock:
                while True:
                    if self._next >= len(self._units):
                        return None
                    if (unit := self._ready()) is not None:
                        return unit
                    unit = self._units[self._next]
                    if not self._claiming:
                        # Only held rows left (they go last): ask again when it is time.
                        if unit[1][0].id in self._held:
                            wait = self._asked + self._again_s - time.monotonic()
                        else:
                            wait = self._gathering()
                        if wait <= 0 or self._ctx.tracker.stopping:
                            break
                        self._turn.wait(min(wait, _STOP_POLL_S))
                        continue
                    self._turn.wait()
                self._claiming = True
                self._gather = None
                want = max(1, self._free())
                left = [(task, rows[0]) for task, rows in self._units[self._next :]]
            self._claim(left, want)

    def take_ready(self) -> Unit | None:
        """The next unit if it waits for no claim (see take), else None."""
        with self._lock:
            return self._ready()

    def _ready(self) -> Unit | None:
        # Holding self._lock.
        if self._next >= len(self._units):
            return None
        unit = self._units[self._next]
        if self._batched(unit) and unit[1][0].id not in self._decided:
            return None
        self._next += 1
        self._busy += 1
        self._ctx.tracker.hold(1)
        return unit

    def _free(self) -> int:
        # Slots the runs of earlier minutes still hold (`work`) are not free either.
        return min(self.workers - self._busy, self._ctx.max_parallel - self._ctx.tracker.hold(0))

    def _gathering(self) -> float:
        """How much longer to wait for more slots to come free before claiming (a batch of runs
        ends over a fraction of a second: a claim for each would cost a round trip); 0: now."""
        if self._busy == 0 or self._free() >= self._batch:
            return 0.0
        now = time.monotonic()
        if self._gather is None:
            self._gather = now + _GATHER_S
        return self._gather - now

    def _claim(self, left: list[tuple[Task, RunRow]], want: int) -> None:
        """Claim up to ``want`` of the undecided rows ``left`` (in order) and put the ones
        won first; told to stop, or the store failing, each row is left to its own claim."""
        undecided = [(t, r) for t, r in left if r.id not in self._decided]
        won: set[str] = set()
        held: set[str] = set()
        again = guards.FIRST_ASK_S
        decided = {r.id for _, r in undecided}
        stopping = self._ctx.tracker.stopping
        try:
            if not stopping:
                won, held = guards.claim_some(undecided, self._ctx, want)
        except Exception:  # noqa: S110  (each row meets the store's failure at its own claim)
            pass
        else:
            if not stopping:
                if len(won) >= want:  # the claims after the last won were not looked at
                    last = max(i for i, (_, r) in enumerate(undecided) if r.id in won)
                    decided = {r.id for _, r in undecided[: last + 1]}
                now = self._now()
                ctx = self._ctx
                asked = [
                    r for t, r in undecided if r.id in held and now < guards.ask_until(t, r, ctx)
                ]
                held = {r.id for r in asked}
                decided -= held
                # The soonest that any of them is due to be asked for again.
                asks = [guards.ask_again(r, now, r.id not in self._held) for r in asked]
                again = min(asks, default=again)
                self._ctx.run.claimed.update({i: i in won for i in decided})
        with self._lock:
            self._decided |= decided
            self._again_s = again
            self._held = held
            self._asked = time.monotonic()
            rest = self._units[self._next :]
            order = sorted(
                range(len(rest)),
                key=lambda i: (
                    rest[i][1][0].id not in won,
                    rest[i][1][0].id not in decided,
                    rest[i][1][0].id in held,
                ),
            )
            self._units[self._next :] = [rest[i] for i in order]
            self._claiming = False
            self._turn.notify_all()

    def finished(self) -> None:
        """A worker is done with its unit: its slot is free."""
        with self._lock:
            self._busy -= 1
            self._ctx.tracker.hold(-1)
            self._turn.notify_all()  # one gathering slots for a claim counts it

    def _now(self) -> datetime:
        """The run's time: `run --now T` pins the clock, so the time waited counts too."""
        clock, mono = self._began
        return max(self._ctx.world.clock(), clock + timedelta(seconds=time.monotonic() - mono))


#: How long a claim for fewer than a quarter of the workers waits for more to come free.
_GATHER_S = 0.25
#: How often a worker waiting to ask again looks whether it was told to stop.
_STOP_POLL_S = 0.5


def run_task(
    store: Store, task: Task, rows: list[RunRow], ctx: RunContext,
    reserved: unsaved.Reservation | None = None, started: Callable[[str], None] = lambda _id: None,
    take_ahead: Callable[[], Unit | None] | None = None,
) -> list[RunRow]:  # fmt: skip
    """The occurrences of one task, oldest first, one at a time (catch-up never overlaps),
    each recorded as it ends (see recorded); ``started`` hears each row whose command has
    started; ``take_ahead`` gives the worker's next unit as the last result is recorded."""
    done: list[RunRow] = []
    for i, row in enumerate(rows):
        try:
            result = run_occurrence(store, task, row, ctx, started)
        except Exception as exc:
            result = replace(row, outcome="error", message=f"cronctl: {exc}")
        last = i == len(rows) - 1
        done.extend(recorded(store, task, result, ctx, reserved, take_ahead if last else None))
    return done


def recorded(
    store: Store, task: Task, result: RunRow, ctx: RunContext,
    reserved: unsaved.Reservation | None = None,
    take_ahead: Callable[[], Unit | None] | None = None,
) -> list[RunRow]:  # fmt: skip
    """Commit ``result`` the moment its run ends, whatever else the run is still doing (or
    keep it aside: docs/guarantees.md), then report it and send it to the fleet store: its
    rows, the earlier attempts of its occurrence first, then what followed it. The "running"
    mark of the unit ``take_ahead`` gives shares that commit (not a followed task's: its
    followers come first)."""
    ctx.run.follow.record(task, result, ctx)
    fields = result_fields(result)
    updates = [(result.id, fields)]  # a retry's row has its own id
    nxt = take_ahead() if take_ahead is not None and not ctx.run.follow.leads(task) else None
    if nxt is not None and marked_early(nxt[0]):
        updates.append((nxt[1][0].id, running_fields(nxt[0], nxt[1][0], ctx)))
    error, *marks = store.update_runs(updates)
    if marks and marks[0] is None:
        ctx.run.marked.add(updates[1][0])
    if isinstance(error, CronctlError):
        result = _unsaved(result, fields, error, ctx, reserved)
    elif error is not None:
        raise error
    rows = [*attempts.earlier(store, result), result]
    ctx.listener.done(task, result, attempts.report_kind(store, task, result))
    ctx.run.records.send(rows)
    return rows + ctx.run.follow.start(store, task, result, ctx)


def _unsaved(
    result: RunRow, fields: dict[str, Any], exc: CronctlError, ctx: RunContext,
    reserved: unsaved.Reservation | None,
) -> RunRow:  # fmt: skip
    """Report once what is known of a run whose record could not be saved (docs/guarantees.md)."""
    if reserved is not None:
        why = reserved.keep(result.id, fields)
    else:
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
    ctx.world.warn(f"cronctl: error: task {result.task}: {ran}; {note}")
    return replace(result, message="; ".join(filter(None, (result.message, note))))


def jitter_offset(task: Task, host: str) -> float:
    """A stable delay in [0, jitter) seconds from host and task name: a hash, not random, so
    a machine's tasks keep their places minute after minute and machines spread apart."""
    if task.jitter is None:
        return 0.0
    import hashlib  # here: it loads OpenSSL, which only a task with jitter needs

    digest = hashlib.sha256(f"{host}\0{task.name}".encode()).digest()
    fraction = int.from_bytes(digest[:8], "big") / 2**64
    return fraction * task.jitter.total_seconds()


def run_occurrence(
    store: Store, task: Task, row: RunRow, ctx: RunContext,
    started: Callable[[str], None] = lambda _id: None,
) -> RunRow:  # fmt: skip
    """One occurrence through jitter, misfire grace, conditions and guards to its end
    (``started``: see attempts.execute). A start-up run (once.run_start_tasks) has no jitter and no
    misfire grace: it runs as `work` starts."""
    scheduled = row.trigger != START_TRIGGER
    if task.jitter is not None and scheduled:
        ctx.world.sleep(jitter_offset(task, ctx.host))  # `work` ends it early when told to stop
    if ctx.tracker.stopping:
        return replace(row, outcome="interrupted", message=NOT_STARTED)
    now = ctx.world.clock()
    # A chained task's grace counts from its upstream's end, judged by run/chains.py.
    late = task.misfire_grace is not None and now - row.occurrence > task.misfire_grace
    if late and scheduled and not task.chained:
        return replace(row, outcome="missed", message="older than misfire_grace when it came up")
    env = task_env(task, row, ctx)
    if not guards.conditions_pass(task, env, ctx):
        return replace(row, outcome="skipped: condition")
    if ctx.tracker.stopping:
        # Told to stop while a condition ran: take no claim that another server could use.
        return replace(row, outcome="interrupted", message=NOT_STARTED)
    try:
        return _guarded(store, task, row, env, ctx, now, started)
    except StoreUnavailable as exc:
        if ctx.tracker.stopping:
            # The store's answer was cut short by the stop: not started, as any other row.
            return replace(row, outcome="interrupted", message=NOT_STARTED)
        return replace(row, outcome="error", message=str(exc))


def _guarded(
    store: Store, task: Task, row: RunRow, env: dict[str, str], ctx: RunContext, now: datetime,
    started: Callable[[str], None],
) -> RunRow:  # fmt: skip
    skipped, lock = guards.acquire(task, row, ctx, now)
    if skipped is not None:
        return skipped
    try:
        with guards.group_slot(task, row, ctx) as full:
            if full is not None:
                return full
            if (taken := guards.fence(task, row, ctx)) is not None:
                return taken
            return execute(store, task, row, env, ctx, lock, started)
    finally:
        if lock is not None:
            guards.release(task, lock, ctx)
