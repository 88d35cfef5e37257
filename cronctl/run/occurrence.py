"""Running the due occurrences: each task's in a worker thread, one occurrence at a time
through its guards to its command, and its result recorded (or kept aside, docs/guarantees.md)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

from cronctl.coord.port import HeldLock, StoreUnavailable
from cronctl.core.due import Plan
from cronctl.core.model import Task, format_utc
from cronctl.core.opskeys import jitter_offset
from cronctl.core.runs import RunRow
from cronctl.edge import secrets
from cronctl.edge.awake import join_awake
from cronctl.edge.notify import Pings
from cronctl.edge.paths import ensure_private_dir
from cronctl.edge.process import runner
from cronctl.edge.state import unsaved
from cronctl.edge.state.store import Store
from cronctl.errors import CronctlError, EnvFileError
from cronctl.run import attempts, guards
from cronctl.run.context import (
    RESULT_FIELDS,
    RunContext,
    log_path,
    running_fields,
    starts_at_once,
)
from cronctl.run.outcomes import NOT_STARTED, record_command, result_message


def run_all(
    store: Store,
    plans: Mapping[str, Plan],
    by_task: Mapping[str, list[RunRow]],
    ctx: RunContext,
    started: Callable[[], None] | None = None,
) -> list[RunRow]:
    """Each task's occurrences in a worker thread, at most max_parallel at once.

    `started` is called (in this thread, never raising) once the first wave, the rows
    planning marked "running", has started (or ended: a guard refused), or after
    _FIRST_WAVE_S at most."""
    # Room for every result in case the disk fills up, reserved before anything starts.
    slots = unsaved.reserve(ctx.state_dir, [r.id for rows in by_task.values() for r in rows])
    pings = None
    if any(plans[name].task.ping_url is not None for name in by_task):
        pings = Pings()
        ctx = replace(ctx, pings=pings)
        if ctx.tracker is not None:
            ctx.tracker.on_stop(pings.stop)
    try:
        return _run_all(store, plans, by_task, ctx, slots, started)
    finally:
        if slots is not None:
            slots.close()
        if pings is not None:
            # After every result is recorded: the pings delay the run's end, never a record.
            pings.settle()
            if ctx.tracker is not None:
                ctx.tracker.forget_stop(pings.stop)


def _run_all(
    store: Store,
    plans: Mapping[str, Plan],
    by_task: Mapping[str, list[RunRow]],
    ctx: RunContext,
    slots: unsaved.Slots | None,
    started: Callable[[], None] | None = None,
) -> list[RunRow]:
    queue = _Queue(store, plans, by_task, ctx, slots)
    results: list[RunRow] = []
    guard = threading.Lock()

    def worker() -> None:
        quick: bool | None = None  # None: the first wave, which starts at once
        while (unit := queue.take()) is not None:
            name, rows = unit
            try:
                done = run_task(store, plans[name].task, rows, ctx, queue, quick)
            except Exception as exc:
                ctx.warn(f"cronctl: error: task {name}: could not record its run: {exc}")
                done = [replace(r, outcome="error", message=str(exc)) for r in rows]
            finally:
                queue.settled(rows[0].id)
            quick = _quick(done)
            with guard:
                results.extend(done)

    threads = [ctx.spawn(worker, f"cronctl-run-{i}") for i in range(queue.workers)]
    try:
        if started is not None:
            queue.first_wave.wait(_FIRST_WAVE_S)
            started()
    finally:
        for thread in threads:
            join_awake(thread)  # in `run`, the main thread: a SIGTERM must wake it
    return results


#: How long run_all waits at most for its first wave to start before it goes on (a start
#: takes milliseconds; this only bounds a start that hangs).
_FIRST_WAVE_S = 2.0


#: A worker whose last command ended within this many seconds marks the next rows with its
#: own (see _Queue): the queue is moving, so they will start right away.
_QUICK_S = 1.0


def _quick(done: list[RunRow]) -> bool:
    last = done[-1].duration_s if done else None
    return last is not None and last < _QUICK_S


class Marker(Protocol):
    """How execute makes its row durably "running" (run_all's queue; None: by itself)."""

    def __call__(self) -> None:
        """Before the start: return once the row's mark is committed."""

    def started(self) -> None:
        """After the start: the command runs; nothing may raise from here."""


class _Mark:
    """One commit of "running" marks, and each row's error once it is done."""

    __slots__ = ("done", "errors")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.errors: dict[str, BaseException] = {}


class _Queue:
    """The units of work (a task's due rows) handed to the workers, and their "running" marks.

    A command never starts before its row is durably marked "running" (a crash from then on is
    reported as an unknown outcome, never as "did not run"). One commit per start would make
    100 quick tasks wait for ~100 commits, so a worker that commits its own mark also marks the
    first rows of the next units (at most max_parallel - 1), which the next workers take: the
    first wave shares one commit, and later waves do while commands end quickly (_QUICK_S).
    A worker whose command has just started (and would only wait for it now) also commits
    the marks of the next rows when a wave or less is marked and not yet taken, so that
    the next workers find theirs committed (mark_next). Only rows that start at once are
    marked ahead (no jitter, no condition, no retries or hooks, a claim already won), at most
    two waves beyond those taken. A crash between such a mark and the start reports that row as
    of unknown outcome though it may not have started: never as run twice.
    """

    def __init__(
        self,
        store: Store,
        plans: Mapping[str, Plan],
        by_task: Mapping[str, list[RunRow]],
        ctx: RunContext,
        slots: unsaved.Slots | None = None,
    ) -> None:
        self._store = store
        self.slots = slots
        self._plans = plans
        self._ctx = ctx
        self._units = list(by_task.items())
        self._next = 0
        self._lock = threading.Lock()
        self._marks: dict[str, _Mark] = {}  # row id -> the commit carrying its mark
        if ctx.marked:  # committed "running" by the planning transaction
            planned = _Mark()
            planned.done.set()
            self._marks = dict.fromkeys(ctx.marked, planned)
        self.workers = max(1, min(ctx.max_parallel, len(self._units)))
        # The first wave (rows marked by planning) not yet started nor ended; then set.
        self._first = set(ctx.marked)
        self.first_wave = threading.Event()
        if not self._first:
            self.first_wave.set()

    def settled(self, row_id: str) -> None:
        """Row ``row_id``'s command has started, or its occurrence is over (see first_wave)."""
        with self._lock:
            self._first.discard(row_id)
            if not self._first:
                self.first_wave.set()

    def take(self) -> tuple[str, list[RunRow]] | None:
        """The next unit, or None when all are taken."""
        with self._lock:
            if self._next >= len(self._units):
                return None
            self._next += 1
            return self._units[self._next - 1]

    def mark(self, task: Task, row: RunRow, ahead: bool) -> None:
        """Return once ``row`` is durably "running", committing its mark (with the next
        rows' when ``ahead``) unless another worker's commit carries it.

        :raises KeyError: the row is gone (pruned); other errors of the commit.
        """
        with self._lock:
            mark = self._marks.get(row.id)
            batch: list[tuple[Task, RunRow]] = []
            if mark is None:
                mark = self._marks[row.id] = _Mark()  # first: _ahead must not take it again
                batch = [(task, row), *(self._ahead() if ahead else ())]
                for _, r in batch:
                    self._marks[r.id] = mark
        if batch:
            self._commit(batch, mark)
        else:
            mark.done.wait()
        if (error := mark.errors.get(row.id)) is not None:
            raise error

    def mark_next(self) -> None:
        """Commit the marks of the next rows, up to two waves marked and not yet taken, once
        a wave or less is left: called by a worker whose command has just started. Never
        raises: an error is the error of each row it was for, met by its worker at mark().

        Each such commit carries a wave of marks or more, and the next workers find theirs
        committed: refilling sooner, with less than a wave, would make more commits, each
        with its CPU cost."""
        with self._lock:
            upcoming = self._units[self._next : self._next + 2 * self.workers]
            waiting = sum(1 for _, rows in upcoming if rows[0].id in self._marks)
            if waiting > self.workers:
                return
            batch = self._unmarked(upcoming, 2 * self.workers - waiting)
            if not batch:
                return
            mark = _Mark()
            for _, r in batch:
                self._marks[r.id] = mark
        with suppress(Exception):  # kept in mark.errors for the rows' own workers
            self._commit(batch, mark)

    def _commit(self, batch: list[tuple[Task, RunRow]], mark: _Mark) -> None:
        try:
            changes = [(r.id, running_fields(t, r, self._ctx)) for t, r in batch]
            # Only rows still pending: a row marked ahead may meet a refusing guard and have
            # its skip recorded first; the mark must not overwrite it.
            errors = self._store.update_runs(changes, pending_only=True)
            mark.errors = {r.id: e for (_, r), e in zip(batch, errors, strict=True) if e}
        except BaseException as exc:
            mark.errors = {r.id: exc for _, r in batch}
            raise
        finally:
            mark.done.set()

    def _ahead(self) -> list[tuple[Task, RunRow]]:
        """Up to max_parallel - 1 unmarked first rows that start at once, of the units just
        taken by other workers (about to ask for their own mark) and of the next ones."""
        window = self._units[max(0, self._next - self.workers) : self._next + self.workers]
        return self._unmarked(window, self._ctx.max_parallel - 1)

    def _unmarked(
        self, units: list[tuple[str, list[RunRow]]], limit: int
    ) -> list[tuple[Task, RunRow]]:
        """Up to ``limit`` first rows of ``units``, not marked yet, that start at once."""
        found: list[tuple[Task, RunRow]] = []
        for name, rows in units:
            if len(found) >= limit:
                break
            task = self._plans[name].task
            if rows[0].id not in self._marks and _starts_at_once(task, rows[0], self._ctx):
                found.append((task, rows[0]))
        return found


class _RowMark:
    """One row's mark through the queue (the ``mark`` that execute is handed).

    ``quick``: whether the worker's last command ended quickly (None: it has had none, this
    row is in the first wave). The first wave and a quick worker carry the next rows' marks
    with their own; only a quick worker marks more once its command has started.
    """

    __slots__ = ("_queue", "_quick", "_row", "_task")

    def __init__(self, queue: _Queue, task: Task, row: RunRow, quick: bool | None) -> None:
        self._queue, self._task, self._row, self._quick = queue, task, row, quick

    def __call__(self) -> None:
        """Before the start: return once the row is durably "running"."""
        self._queue.mark(self._task, self._row, self._quick is not False)

    def started(self) -> None:
        """After the start: the worker would only wait now, so it marks the next rows."""
        self._queue.settled(self._row.id)
        if self._quick:
            self._queue.mark_next()


def _starts_at_once(task: Task, row: RunRow, ctx: RunContext) -> bool:
    """Whether nothing but the overlap lock stands between ``row`` and its start."""
    if not starts_at_once(task):
        return False
    return not task.on_one_server or ctx.claimed.won(row.id)


def run_task(
    store: Store,
    task: Task,
    rows: list[RunRow],
    ctx: RunContext,
    queue: _Queue | None = None,
    quick: bool | None = False,
) -> list[RunRow]:
    """The occurrences of one task, oldest first, one at a time (catch-up never overlaps),
    each recorded as it ends (see recorded)."""
    slots = queue.slots if queue is not None else None
    done: list[RunRow] = []
    for i, row in enumerate(rows):
        mark = None
        if queue is not None:
            # Catch-up rows after the first follow their own command: marked one at a time.
            mark = _RowMark(queue, task, row, quick if i == 0 else False)
        try:
            result = run_occurrence(store, task, row, ctx, mark)
        except Exception as exc:
            result = replace(row, outcome="error", message=f"cronctl: {exc}")
        done.extend(recorded(store, task, result, ctx, slots))
    return done


def recorded(
    store: Store, task: Task, result: RunRow, ctx: RunContext, slots: unsaved.Slots | None = None
) -> list[RunRow]:
    """Commit ``result`` the moment its run ends, whatever else the run is still doing (or
    keep it aside: docs/guarantees.md), then report it (``on_done``) and send it to the fleet
    store: its rows, the earlier attempts of its occurrence first."""
    fields = {k: getattr(result, k) for k in RESULT_FIELDS}
    try:
        store.update_run(result.id, **fields)  # a retry's row has its own id
    except CronctlError as exc:
        result = _unsaved(result, fields, exc, ctx, slots)
    rows = [*attempts.earlier(store, result), result]
    attempts.finished(store, task, result, ctx)
    if ctx.records is not None:
        ctx.records.send(rows)
    return rows


def _unsaved(
    result: RunRow,
    fields: dict[str, Any],
    exc: CronctlError,
    ctx: RunContext,
    slots: unsaved.Slots | None = None,
) -> RunRow:
    """Report once what is known of a run whose record could not be saved (docs/guarantees.md)."""
    if slots is not None:
        why = slots.keep(result.id, fields)
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
    ctx.warn(f"cronctl: error: task {result.task}: {ran}; {note}")
    return replace(result, message="; ".join(filter(None, (result.message, note))))


def run_occurrence(
    store: Store,
    task: Task,
    row: RunRow,
    ctx: RunContext,
    mark: Marker | None = None,
) -> RunRow:
    """One occurrence through jitter, misfire grace, conditions and guards to its end.

    ``mark`` makes the row durably "running" (run_all's queue); None: execute commits it."""
    if task.jitter is not None:
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
        return _guarded(store, task, row, env, ctx, now, mark)
    except StoreUnavailable as exc:
        if ctx.tracker is not None and ctx.tracker.stopping:
            # The store's answer was cut short by the stop: not started, as any other row.
            return replace(row, outcome="interrupted", message=NOT_STARTED)
        return replace(row, outcome="error", message=str(exc))


def _guarded(
    store: Store,
    task: Task,
    row: RunRow,
    env: dict[str, str],
    ctx: RunContext,
    now: datetime,
    mark: Marker | None,
) -> RunRow:
    skipped, lock = guards.acquire(task, row, ctx, now)
    if skipped is not None:
        return skipped
    try:
        with guards.group_slot(task, row, ctx) as full:
            if full is not None:
                return full
            if task.reports_outside:
                return attempts.execute(store, task, row, env, ctx, lock, execute)
            return execute(store, task, row, env, ctx, lock, mark)
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
    mark: Marker | None = None,
) -> RunRow:
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
    path = log_path(task, row, ctx)
    ensure_private_dir(path.parent, within=ctx.state_dir)
    # Recorded before the start: a cronctl killed from here on leaves "running", which
    # recovery reports as an unknown outcome, never as "did not run".
    if mark is None:
        store.update_run(row.id, **running_fields(task, row, ctx))
    else:
        mark()
    spec = runner.RunSpec(
        command=task.command,
        shell=task.shell,
        workdir=task.workdir,
        env=env,
        timeout=task.timeout,
        log_path=path,
        pass_fds=(lock.fd,) if lock is not None else (),
        stream=ctx.output(task.name) if ctx.output is not None else None,
        mask=mask,
        max_output=task.max_output or 0,
        memory_max=task.memory_max,
        cpu_max=task.cpu_max,
        nice=task.nice,
        ionice=task.ionice,
    )
    if ctx.tracker is not None and ctx.tracker.stopping:
        return replace(row, outcome="interrupted", message=NOT_STARTED, log_path=None)
    running = ctx.start(spec)
    if ctx.tracker is not None:
        ctx.tracker.add(running)
    try:
        record_command(task, lock, getattr(running, "pid", None), ctx.warn)
        if mark is not None:
            # After the holder record names the command: a commit here must not widen the
            # moment in which a lock whose descriptor the task closes is not yet recognised.
            mark.started()
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
        log_path=str(path) if getattr(result, "log_kept", True) else None,
        tail=result.tail,
        message=result_message(result),
    )


#: cronctl's own secrets, never handed to a task through the environment it inherits
#: (docs/guarantees.md): the store's URL (it may carry a password) and `serve`'s token. A
#: task's `env` table may still set one on purpose. libpq's PGPASSWORD and the like are not
#: cronctl's: tasks of their own use them.
SECRET_VARIABLES = ("CRONCTL_COORDINATION", "CRONCTL_SERVE_TOKEN")


def task_env(task: Task, row: RunRow, ctx: RunContext) -> dict[str, str]:
    """The environment of the task's command (and its hooks and conditions): cronctl's
    without its secrets, the task's, and CRONCTL_*."""
    env = {k: v for k, v in ctx.env.items() if k not in SECRET_VARIABLES}
    env.update(task.env)
    env["CRONCTL_TASK"] = task.name
    env["CRONCTL_OCCURRENCE"] = format_utc(row.occurrence)
    env["CRONCTL_RUN_ID"] = row.id
    # Every attempt, the first too: a script testing it must not meet an unset variable.
    env["CRONCTL_ATTEMPT"] = str(row.attempt)
    return env
