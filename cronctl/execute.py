"""`cronctl run`: plan the window, then for each due occurrence, in this order (SPEC 4.1):
paused, when/skip conditions, on_one_server claim, without_overlapping lock, run.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cronctl.core.due import Plan, Previous, plan
from cronctl.core.model import Schedule, Task, format_duration, format_utc
from cronctl.edge import locks
from cronctl.edge.coord import Coordinator, HeldLock, StoreUnavailable, open_coordinator
from cronctl.edge.paths import ensure_private_dir
from cronctl.edge.store import RunRow, Store, TaskState
from cronctl.errors import CronctlError

if TYPE_CHECKING:
    from cronctl.edge import runner

CONDITION_TIMEOUT_S = 30.0
#: `run --now T` with T this far ahead of the machine's clock is a rehearsal (RunContext).
REHEARSAL_AHEAD = timedelta(minutes=5)
#: Where a rehearsal keeps its windows, history and logs: inside state_dir, apart.
REHEARSAL_DIR = "rehearsal"
LOG_RETENTION = timedelta(days=14)
HISTORY_RETENTION = timedelta(days=90)
FAILED = ("failed", "timeout", "error")


def start_command(spec: runner.RunSpec) -> Running:
    """runner.start, imported on first use: a run with nothing due never needs subprocess."""
    from cronctl.edge import runner

    return runner.start(spec)


def check_condition(command: str, **options: Any) -> bool:
    """runner.run_condition, imported on first use."""
    from cronctl.edge import runner

    return runner.run_condition(command, **options)


class Running(Protocol):
    """A started command, as runner.start returns it (tests may inject their own)."""

    def wait(self) -> runner.CommandResult:
        """Block until it ends; its result."""
        ...

    def signal(self, sig: int) -> None:
        """Forward a signal to its process group."""
        ...


class Tracker:
    """The commands running right now, so `work` and `run` can forward a signal to them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[Running] = set()
        self._stop_signal: int | None = None

    @property
    def stopping(self) -> bool:
        """Whether cronctl was told to stop: nothing more may start."""
        return self._stop_signal is not None

    def stop(self, sig: int) -> int:
        """Start nothing more and forward ``sig`` to every running command; return how many."""
        with self._lock:
            self._stop_signal = sig
        return self.signal_all(sig)

    def add(self, command: Running) -> None:
        """Remember a started command; one started as the stop came is signalled at once."""
        with self._lock:
            self._running.add(command)
            sig = self._stop_signal
        if sig is not None:
            command.signal(sig)

    def discard(self, command: Running) -> None:
        """Forget a finished command."""
        with self._lock:
            self._running.discard(command)

    def signal_all(self, sig: int) -> int:
        """Send `sig` to every running command's process group; return how many."""
        with self._lock:
            running = list(self._running)
        for command in running:
            command.signal(sig)
        return len(running)


@dataclass(frozen=True)
class RunContext:
    """Where and as whom a run happens, and how to tell the time."""

    state_dir: Path
    lock_dir: Path
    host: str
    pid: int
    env: Mapping[str, str]
    clock: Callable[[], datetime]
    dry_run: bool = False
    # A --now ahead of the machine's clock (see REHEARSAL_AHEAD): it runs what is due then, but
    # records it apart and takes no claim, so it cannot touch present-day runs or data.
    rehearsal: bool = False
    max_parallel: int = 8
    tracker: Tracker | None = None
    # The process edge, injectable so the soak test can drive weeks of ticks in process.
    start: Callable[[runner.RunSpec], Running] = start_command
    condition: Callable[..., bool] = check_condition
    warn: Callable[[str], None] = field(default=lambda message: print(message, file=sys.stderr))
    # Claims, overlap locks, pauses, fleet records (edge/coord); None: files in lock_dir.
    coord: Coordinator | None = None
    # Claims decided in one round trip before the tasks start, by run id (see _preclaim).
    claimed: dict[str, bool] = field(default_factory=dict)
    # Issue 11: waits (jitter, retry delays) go through `sleep` so tests can pin the clock;
    # `on_done` hears each occurrence's final row as its task ends (live failure reports);
    # `output` gives a task's output lines to a sink (`work --output`).
    sleep: Callable[[float], None] = time.sleep
    on_done: Callable[[Task, RunRow, str | None], None] | None = None
    output: Callable[[str], Callable[[str], None]] | None = None


@dataclass(frozen=True)
class RunReport:
    """`cronctl run`: every occurrence dealt with in this run, in order."""

    now: datetime
    runs: list[RunRow]
    dry_run: bool = False

    @property
    def failed(self) -> list[RunRow]:
        """The runs that failed, timed out or could not start (an occurrence's last attempt:
        a failure that a retry made good is history, not a failure of this run)."""
        last: dict[tuple[str, datetime], int] = {}
        for r in self.runs:
            last[_key(r)] = max(last.get(_key(r), 0), r.attempt)
        return [r for r in self.runs if r.outcome in FAILED and r.attempt == last[_key(r)]]

    @property
    def interrupted(self) -> list[RunRow]:
        """The runs cronctl stopped (or did not start) because it was told to stop."""
        return [r for r in self.runs if r.outcome == "interrupted"]


def _key(row: RunRow) -> tuple[str, datetime]:
    return row.task, row.occurrence


def new_run_id(occurrence: datetime) -> str:
    """Sortable and unique: the occurrence's minute and six random hex digits."""
    return f"{occurrence:%Y%m%dT%H%MZ}-{os.urandom(3).hex()}"


def run_once(schedule: Schedule, now: datetime, ctx: RunContext) -> RunReport:
    """Plan every task's window at `now`, record it, then run what is due."""
    if ctx.rehearsal:
        ctx = replace(ctx, state_dir=ensure_private_dir(ctx.state_dir) / REHEARSAL_DIR)
    ensure_private_dir(ctx.state_dir)
    ensure_private_dir(ctx.lock_dir)
    ctx = replace(ctx, coord=ctx.coord or open_coordinator(None, ctx.lock_dir), claimed={})
    try:
        return _run_once(schedule, now, ctx)
    finally:
        _coord(ctx).close()


def _coord(ctx: RunContext) -> Coordinator:
    assert ctx.coord is not None, "run_once sets the coordinator"
    return ctx.coord


def _run_once(schedule: Schedule, now: datetime, ctx: RunContext) -> RunReport:
    paused = _paused(ctx)
    with Store.open(ctx.state_dir) as store:
        if ctx.dry_run:
            try:
                _plan_all(store, schedule, now, paused, ctx)
            except _DryRunRollback as dry:
                runs = [_dry_outcome(row, dry.plans[row.task].task, ctx) for row in dry.rows]
                return RunReport(now, runs, dry_run=True)
        recovered = _recover(store, ctx, schedule)
        plans, rows = _plan_all(store, schedule, now, paused, ctx)
        pending = [r for r in rows if r.outcome == "pending"]
        by_task: dict[str, list[RunRow]] = {}
        for row in pending:
            by_task.setdefault(row.task, []).append(row)
        results: dict[str, RunRow] = {r.id: r for r in recovered + rows}
        _preclaim(plans, by_task, ctx, now)
        for row in _run_all(store, plans, by_task, ctx):
            results[row.id] = row
        if _coord(ctx).kind != "files" and not ctx.rehearsal:  # a store keeps fleet history
            from cronctl.edge.coord.outbox import publish

            publish(store, _coord(ctx), list(results.values()), ctx.state_dir)
        if now.minute == 0 and not ctx.rehearsal:
            # Never by a pretended future time: that would delete present-day data.
            _sweep(store, ctx, min(now, real_clock()))
        if schedule.settings.metrics_file is not None and not ctx.rehearsal:
            from cronctl.edge.metrics import write_metrics

            write_metrics(schedule, store, now, ctx)
    return RunReport(now, list(results.values()))


def _paused(ctx: RunContext) -> Mapping[str, object]:
    """The operator pauses; none known when the store is unreachable (guarded tasks then
    fail at their claim or lock, the others run: SPEC 8.2)."""
    try:
        return _coord(ctx).paused_tasks()
    except StoreUnavailable as exc:
        ctx.warn(f"cronctl: error: {exc}; guarded tasks are not started this minute")
        return {}


def _preclaim(
    plans: Mapping[str, Plan], by_task: Mapping[str, list[RunRow]], ctx: RunContext, now: datetime
) -> None:
    """Claim the next occurrence of every on_one_server task without conditions in one round
    trip. Tasks with when/skip claim after their conditions pass (SPEC 4.1): a condition may
    hold on one machine only. A rehearsal never claims in the store (see _claim)."""
    if ctx.rehearsal:
        return
    first = [
        rows[0]
        for name, rows in by_task.items()
        if (task := plans[name].task).on_one_server and not task.when and not task.skip
    ]
    if not first:
        return
    try:
        won = _coord(ctx).claim(
            [(r.task, r.occurrence) for r in first], host=ctx.host, pid=ctx.pid, now=now
        )
    except StoreUnavailable:
        return  # each task then meets the store's failure at its own claim
    ctx.claimed.update({r.id: (r.task, r.occurrence) in won for r in first})


def _claim(task: Task, row: RunRow, ctx: RunContext, now: datetime) -> bool:
    if ctx.rehearsal:
        # A claim taken for a pretended future occurrence would make the real one, when its
        # time comes, look run by another server: rehearsals claim among themselves, apart
        # (machines rehearsing the same future still run each occurrence once), in lock_dir
        # also when a coordination store holds the real claims.
        lock_dir = ensure_private_dir(ctx.lock_dir / REHEARSAL_DIR, within=ctx.lock_dir)
        return locks.claim_occurrence(
            lock_dir, task.name, row.occurrence, host=ctx.host, pid=ctx.pid, now=now
        )
    won = ctx.claimed.pop(row.id, None)
    if won is None:
        claim = (task.name, row.occurrence)
        won = claim in _coord(ctx).claim([claim], host=ctx.host, pid=ctx.pid, now=now)
    return won


def _plan_all(
    store: Store, schedule: Schedule, now: datetime, paused: Mapping[str, object], ctx: RunContext
) -> tuple[dict[str, Plan], list[RunRow]]:
    """One transaction: read each task's window, decide, record the decisions."""
    plans: dict[str, Plan] = {}
    rows: list[RunRow] = []
    with store.transaction() as tx:
        states = tx.states()
        for task in schedule.tasks:
            state = states.get(task.name)
            previous = (
                Previous(state.fingerprint, state.last_occurrence, state.done) if state else None
            )
            decided = plan(task, previous, now)
            plans[task.name] = decided
            if decided.clock_behind and decided.clock_behind > timedelta(minutes=5):
                ctx.warn(
                    f"cronctl: warning: task {task.name}: the clock is "
                    f"{decided.clock_behind} behind the last occurrence dealt with "
                    f"({format_utc(decided.last_occurrence or now)}); nothing runs twice, so it "
                    "waits for the clock to catch up"
                )
            outcome = "skipped: paused" if task.paused or task.name in paused else "pending"
            task_rows = [_row(task, when, "missed", ctx) for when in decided.missed]
            task_rows += [_row(task, when, outcome, ctx) for when in decided.run]
            rows.extend(task_rows)
            if ctx.dry_run:
                continue
            for row in task_rows:
                tx.add_run(row)
            if decided.last_occurrence is not None:
                missed_total = state.missed_total if state and not decided.restarted else 0
                tx.put_state(
                    TaskState(
                        task.name,
                        task.fingerprint,
                        decided.last_occurrence,
                        missed_total + decided.missed_count,
                        decided.done,
                    )
                )
        if ctx.dry_run:
            raise _DryRunRollback(plans, rows)
    return plans, rows


class _DryRunRollback(Exception):
    """Leaves the planning transaction without writing anything (for --dry-run)."""

    def __init__(self, plans: dict[str, Plan], rows: list[RunRow]) -> None:
        super().__init__("dry run")
        self.plans = plans
        self.rows = rows


def _run_all(
    store: Store, plans: Mapping[str, Plan], by_task: Mapping[str, list[RunRow]], ctx: RunContext
) -> list[RunRow]:
    """Each task's occurrences in a worker thread, at most max_parallel at once."""
    units = iter(list(by_task.items()))
    results: list[RunRow] = []
    guard = threading.Lock()

    def worker() -> None:
        while True:
            with guard:
                unit = next(units, None)
            if unit is None:
                return
            name, rows = unit
            try:
                done = _run_task(store, plans[name].task, rows, ctx)
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
    return results


def _row(task: Task, when: datetime, outcome: str, ctx: RunContext) -> RunRow:
    return RunRow(
        id=new_run_id(when),
        task=task.name,
        occurrence=when,
        outcome=outcome,
        host=ctx.host,
        pid=ctx.pid,
    )


def _run_task(store: Store, task: Task, rows: list[RunRow], ctx: RunContext) -> list[RunRow]:
    """The occurrences of one task, oldest first, one at a time (catch-up never overlaps)."""
    from cronctl.edge import unsaved

    done: list[RunRow] = []
    for row in rows:
        unsaved.reserve(ctx.state_dir, row.id)  # room for the result if the disk fills up
        try:
            result = _run_occurrence(store, task, row, ctx)
        except Exception as exc:
            result = replace(row, outcome="error", message=f"cronctl: {exc}")
        fields = {k: getattr(result, k) for k in _RESULT_FIELDS}
        try:
            store.update_run(result.id, **fields)  # a retry's row has an id of its own
        except CronctlError as exc:
            result = _unsaved(result, fields, exc, ctx)
        else:
            unsaved.forget(ctx.state_dir, row.id)
        if result.attempt > 1 or task.notify != "always" or ctx.on_done is not None:
            from cronctl import attempts

            done.extend(attempts.earlier(store, result))
            attempts.finished(store, task, result, ctx)
        done.append(result)
    return done


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


_RESULT_FIELDS = (
    "outcome",
    "exit_code",
    "started",
    "ended",
    "duration_s",
    "log_path",
    "tail",
    "message",
)


def _run_occurrence(store: Store, task: Task, row: RunRow, ctx: RunContext) -> RunRow:
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
    env = _task_env(task, row, ctx)
    if not _conditions_pass(task, env, ctx):
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
    from cronctl.outcomes import still_running

    if task.on_one_server and not _claim(task, row, ctx, now):
        return replace(row, outcome="skipped: another server")
    lock = None
    if task.without_overlapping:
        attempt = _coord(ctx).try_overlap(
            task.name,
            lease=task.overlap_lease,
            now=now,
            host=ctx.host,
            pid=ctx.pid,
            timeout=task.timeout,
        )
        if not attempt.may_run:
            return still_running(row, attempt.holder, now)
        if attempt.status == "overtaken":
            holder = attempt.holder.describe() if attempt.holder else "an unknown run"
            lease = format_duration(task.overlap_lease or timedelta(0))
            ctx.warn(
                f"cronctl: warning: task {task.name}: the run by {holder} has held its "
                f"overlap lock longer than the {lease} lease; treating it as stuck "
                "and running anyway"
            )
        lock = attempt.lock
    try:
        if task.reports_outside:
            from cronctl import attempts

            return attempts.execute(store, task, row, env, ctx, lock)
        return _execute(store, task, row, env, ctx, lock)
    finally:
        if lock is not None:
            lock.release()
            # A store lock whose session was lost under the task and not taken back says so.
            if lost := getattr(lock, "lost", None):
                ctx.warn(f"cronctl: warning: task {task.name}: {lost} while it ran")


def _execute(
    store: Store,
    task: Task,
    row: RunRow,
    env: dict[str, str],
    ctx: RunContext,
    lock: HeldLock | None,
) -> RunRow:
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


def _task_env(task: Task, row: RunRow, ctx: RunContext) -> dict[str, str]:
    env = dict(ctx.env)
    env.update(task.env)
    env["CRONCTL_TASK"] = task.name
    env["CRONCTL_OCCURRENCE"] = format_utc(row.occurrence)
    env["CRONCTL_RUN_ID"] = row.id
    return env


def _conditions_pass(task: Task, env: dict[str, str], ctx: RunContext) -> bool:
    def holds(command: str) -> bool:
        return ctx.condition(
            command, shell=task.shell, workdir=task.workdir, env=env, timeout_s=CONDITION_TIMEOUT_S
        )

    if task.when is not None and not holds(task.when):
        return False
    return not (task.skip is not None and holds(task.skip))


def _dry_outcome(row: RunRow, task: Task, ctx: RunContext) -> RunRow:
    """What would happen, found without running anything or taking any claim or lock."""
    if row.outcome != "pending":
        return row
    try:
        if task.on_one_server and _coord(ctx).claimed(task.name, row.occurrence):
            return replace(row, outcome="skipped: another server")
        if task.without_overlapping and _coord(ctx).overlap_held(task.name):
            return replace(row, outcome="skipped: still running")
    except StoreUnavailable as exc:
        return replace(row, outcome="error", message=str(exc))
    # Printed as "would run (when/skip not evaluated)": the outcome already says "dry run".
    note = "when/skip not evaluated" if task.when or task.skip else ""
    return replace(row, outcome="would run", message=note)


def _recover(store: Store, ctx: RunContext, schedule: Schedule) -> list[RunRow]:
    """Rows left pending/running by a cronctl process that died are closed honestly.

    They are reported as errors of this run, so cron's mail says what was interrupted.
    """
    closed: list[RunRow] = []
    for row in store.unfinished_runs(None):
        if _apply_unsaved(store, row, ctx):
            continue  # ended and reported when it ran; now recorded, not reported again
        # A live owner is still at work: another `run`, or this very process (`work` ticks
        # in threads, so a slow task from the last minute shares our pid).
        if row.host != ctx.host and not _foreign_row_is_old(row, schedule):
            continue
        if row.pid is not None and _alive(row.pid):
            continue
        message = "cronctl died before this run finished; its outcome is unknown"
        if row.outcome == "pending":
            message = "cronctl died before starting this run; it did not run"
        if row.host != ctx.host:
            message += f" (left open under the host name {row.host!r})"
        # Conditional: an owner that recorded its end since the read above keeps it.
        if store.close_unfinished(row, outcome="error", message=message):
            closed.append(replace(row, outcome="error", message=message))
        _forget_unsaved(ctx, row)
    return closed


def _forget_unsaved(ctx: RunContext, row: RunRow) -> None:
    from cronctl.edge import unsaved

    unsaved.forget(ctx.state_dir, row.id)  # the reservation a crash left behind


def _apply_unsaved(store: Store, row: RunRow, ctx: RunContext) -> bool:
    from cronctl.edge import unsaved

    fields = unsaved.take(ctx.state_dir, row.id)
    if fields is None:
        return False
    fields = {k: v for k, v in fields.items() if k in _RESULT_FIELDS}
    try:
        store.close_unfinished(row, **fields)
    except (ValueError, TypeError):
        return False  # not a result cronctl wrote: recover the row as usual
    unsaved.forget(ctx.state_dir, row.id)
    return True


#: A row left open under another host name is judged only after this long (or the longest
#: task timeout, if longer): state_dir belongs to one machine, so such a row was left by this
#: machine under an earlier name (a renamed container), but its pid means nothing until no run
#: of the old name can still be going (say a state_dir wrongly shared for a while).
FOREIGN_HOST_AGE = timedelta(hours=24)


def _foreign_row_is_old(row: RunRow, schedule: Schedule) -> bool:
    longest = max((t.timeout for t in schedule.tasks if t.timeout), default=timedelta(0))
    since = row.started or row.occurrence
    return real_clock() - since > max(FOREIGN_HOST_AGE, longest)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep(store: Store, ctx: RunContext, now: datetime) -> None:
    """Hourly housekeeping: old claims, logs and history rows."""
    from cronctl.edge import runner

    with suppress(StoreUnavailable):  # housekeeping waits for the next hour
        _coord(ctx).sweep(now)
    runner.sweep_logs(ctx.state_dir / "logs", now=now, max_age=LOG_RETENTION)
    store.prune(now - HISTORY_RETENTION)


def real_clock() -> datetime:
    """The machine's clock, in UTC."""
    return datetime.now(UTC)
