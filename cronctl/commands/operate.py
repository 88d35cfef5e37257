"""Operator use cases over the recorded state: status, history, logs (and --follow), pause,
resume, and the `--fleet` views of status and history (docs/fleets-postgresql.md)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from cronctl.commands.schedule import find_task
from cronctl.coord.history import fleet_history_of
from cronctl.coord.port import Coordinator, PauseInfo
from cronctl.core.model import Schedule, Task, runs_on
from cronctl.core.opskeys import overdue_since
from cronctl.core.runs import FAILED, LOG_RETENTION, UNFINISHED, RunRow
from cronctl.edge.process import procs
from cronctl.edge.process.logfiles import log_chunks_from, log_file, open_log, read_on, tail_start
from cronctl.edge.safefiles import ensure_private_dir
from cronctl.edge.state.store import DB_NAME, Store, TaskState
from cronctl.errors import UsageError


@dataclass(frozen=True)
class StatusRow:
    """One task in `cronctl status`; with --all, also one only this machine's history knows
    (`task` None: nothing next, paused or overdue)."""

    name: str
    task: Task | None
    last_run: RunRow | None
    consecutive_failures: int
    missed: int
    paused: bool = False
    pause_reason: str | None = None
    next_run: datetime | None = None
    note: str | None = None
    overdue: datetime | None = None  # since when (docs/operating.md)
    other_hosts: bool = False  # `hosts` leaves this machine out
    pause: PauseInfo | None = None  # the operator pause (who, since when, why), if any


@dataclass(frozen=True)
class StatusResult:
    """`cronctl status`; with --all, `unscheduled` holds the tasks only history knows."""

    rows: list[StatusRow]
    host: str | None = None
    unscheduled: list[StatusRow] = field(default_factory=list)

    @property
    def alarming(self) -> list[StatusRow]:
        """The tasks `status --check` fails on: failing (last run failed) or overdue."""
        return [r for r in self.rows if r.consecutive_failures or r.overdue is not None]


def reading_store(state_dir: Path) -> Store:
    """The store, for reading (where nothing has run yet, an empty one in memory): a typo'd
    --state-dir must not leave a directory or an empty store behind."""
    if os.path.lexists(state_dir):
        state_dir = ensure_private_dir(state_dir)  # it exists: only checked
        if os.path.lexists(state_dir / DB_NAME):
            return Store.open(state_dir, create=False)
    return Store.empty(state_dir)


def nothing_ran(state_dir: Path) -> bool:
    """No state database yet: the reading commands then name the directory they read."""
    return not os.path.lexists(state_dir / DB_NAME)


def _known_task(store: Store, schedule: Schedule | None, name: str) -> None:
    """Unknown means neither in the schedule nor in this machine's history."""
    if schedule is not None and any(t.name == name for t in schedule.tasks):
        return
    if store.history(name, 1):
        return
    raise UsageError(
        f"no such task {name!r}: it is not in the schedule and has no history in "
        f"{store.path.parent}; see `cronctl list` and `cronctl history`"
    )


def status(
    schedule: Schedule,
    state_dir: Path,
    coord: Coordinator,
    now: datetime,
    host: str | None = None,
    everything: bool = False,
) -> StatusResult:
    """Each task of the schedule (with `everything`, also those only history knows)."""
    paused = coord.paused_tasks()
    with reading_store(state_dir) as store:
        states = store.states()
        known = {t.name for t in schedule.tasks}
        names = sorted((set(states) | set(store.task_names())) - known) if everything else []
        facts = store.latest_facts([*known, *names])
    recorded: dict[str, StatusRow] = {}
    for name in [*known, *names]:
        fact, state = facts.get(name), states.get(name)
        last, failures = (fact.last_run, fact.consecutive_failures) if fact else (None, 0)
        missed = state.missed_total if state else 0
        recorded[name] = StatusRow(name, None, last, failures, missed)
    rows: list[StatusRow] = []
    for task in schedule.tasks:
        marker = paused.get(task.name)
        is_paused = task.paused or marker is not None
        elsewhere = host is not None and not runs_on(task, host)
        idle = is_paused or elsewhere  # nothing next, and never overdue
        row = recorded[task.name]
        fact = facts.get(task.name)
        anchor = None if idle or fact is None else fact.anchor
        rows.append(
            replace(
                row,
                task=task,
                paused=is_paused,
                pause_reason=pause_reason(task, marker),
                next_run=None if idle else task.next_run(now),
                other_hosts=elsewhere,
                pause=marker,
                note=_note(task, states.get(task.name), row.last_run),
                overdue=overdue_since(task, anchor, None, now),
            )
        )
    others = [replace(recorded[n], note="not in the loaded schedule") for n in names]
    return StatusResult(rows, host, others)


@dataclass(frozen=True)
class FleetRow:
    """One task on one machine: its latest finished run, and whether the task is paused."""

    task: str
    host: str | None
    last_run: RunRow | None
    paused: bool
    pause_reason: str | None


def fleet_status(schedule: Schedule, coord: Coordinator) -> list[FleetRow]:
    """`status --fleet`: every task, one row per machine that ran it (its latest run)."""
    latest = fleet_history_of(coord).fleet_latest()  # first: without a store, nothing else is read
    pauses = coord.paused_tasks()
    by_task: dict[str, list[RunRow | None]] = {}
    for run in sorted(latest, key=lambda r: r.host):
        by_task.setdefault(run.task, []).append(run)
    rows: list[FleetRow] = []
    for task in schedule.tasks:
        pause = pauses.get(task.name)
        paused, reason = task.paused or pause is not None, pause.reason if pause else None
        for r in by_task.get(task.name) or [None]:  # one row even where it never ran
            rows.append(FleetRow(task.name, r.host if r else None, r, paused, reason))
    return rows


def pause_reason(task: Task, pause: PauseInfo | None) -> str | None:
    given = pause.reason if pause is not None else None
    return given or ("paused = true in the schedule file" if task.paused else None)


def _note(task: Task, state: TaskState | None, last: RunRow | None) -> str | None:
    if task.at is None or state is None or not state.done:
        return None
    if last is not None and last.outcome not in ("skipped: paused", "missed"):
        return "one-shot: done"
    return "one-shot: its time passed without a run (paused or missed); it will not run"


@dataclass(frozen=True, slots=True)
class HistoryFilter:
    """What `history` shows, its filters combined (docs/commands.md)."""

    task: str | None = None
    everything: bool = False
    host: str | None = None
    failed: bool = False
    since: datetime | None = None


def history(
    state_dir: Path,
    limit: int,
    schedule: Schedule | None = None,
    which: HistoryFilter = HistoryFilter(),
) -> list[RunRow]:
    """Past runs, newest first, as `which` filters them: of the schedule's tasks only unless
    `which.everything` (tasks since removed, or another schedule's sharing the state dir)."""
    among = None if which.everything or schedule is None else [t.name for t in schedule.tasks]
    with reading_store(state_dir) as store:
        if which.task is not None:
            _known_task(store, schedule, which.task)
        return store.history(
            which.task,
            limit,
            among,
            host=which.host,
            outcomes=FAILED if which.failed else None,
            since=which.since,
        )


@dataclass(frozen=True)
class LogResult:
    """`cronctl logs`: which run, and the checked path of its captured output."""

    run: RunRow
    path: Path | None  # None: the run printed nothing, so no log file was kept

    def chunks(self, last_lines: int | None = None) -> Iterator[bytes]:
        """The output in chunks, in constant memory (only its last lines, with `last_lines`);
        a UsageError if the log was swept after `logs` found it."""
        if self.path is None:
            return
        try:
            yield from log_chunks_from(self.path, last_lines)
        except FileNotFoundError:
            raise _gone(self.run) from None


def logs(
    state_dir: Path,
    task: str,
    run_id: str | None,
    schedule: Schedule | None = None,
    unfinished: bool = False,
) -> LogResult | None:
    """The captured output of the task's last run (or of a given run); with `unfinished`,
    the newest run even while it waits to start (`logs --follow` waits with it). None: the
    task never ran here. No link on the way is followed; a FIFO or device planted where a log
    should be is refused, not read (docs/guarantees.md)."""
    with reading_store(state_dir) as store:
        _known_task(store, schedule, task)
        if run_id is not None:
            run = store.get_run(run_id)
            if run is None or run.task != task:
                raise UsageError(
                    f"no run {run_id!r} of task {task!r}; see `cronctl history {task}`"
                )
        else:
            # A run that printed nothing keeps no log file (log_path None): it is the answer.
            runs = store.history(task, 200)
            if not runs:
                return None
            waiting = unfinished and runs and runs[0].outcome in UNFINISHED
            with_logs = runs[:1] if waiting else [r for r in runs if r.log_path or r.started]
            if not with_logs:
                raise UsageError(f"task {task!r} has no recorded output on this machine yet")
            run = with_logs[0]
    return LogResult(run, None if run.log_path is None else checked_log(state_dir, run))


def checked_log(state_dir: Path, run: RunRow) -> Path:
    """Where the log of `run` (which names one) is, checked; a UsageError if it is gone."""
    assert run.log_path is not None
    path = log_file(state_dir, run.task, run.log_path)
    if path is None or not os.path.lexists(path):
        raise _gone(run)
    return path


def _gone(run: RunRow) -> UsageError:
    return UsageError(
        f"the log of run {run.id} ({run.log_path}) is gone (logs are kept "
        f"{LOG_RETENTION.days} days); its last lines were:\n{run.tail}"
    )


def pause(
    schedule: Schedule, coord: Coordinator, name: str, reason: str | None, now: datetime, user: str
) -> None:
    """Pause a task for every machine sharing lock_dir (or the coordination store)."""
    find_task(schedule, name)
    coord.set_pause(name, reason=reason, now=now, user=user)


def resume(schedule: Schedule, coord: Coordinator, name: str) -> bool:
    """Clear an operator pause; False if the task was not paused that way."""
    task = find_task(schedule, name)
    cleared = coord.clear_pause(name)
    if not cleared and task.paused:
        raise UsageError(
            f"task {name!r} is paused by `paused = true` in {task.source}; "
            "remove it there (it is under version control)"
        )
    return cleared


#: How long to wait for more output before looking again.
POLL_S = 0.2


@dataclass(slots=True)  # not frozen: it keeps the run as last read while it follows
class Follow:
    """`logs --follow`: the output of `result`'s run as it grows (with `last_lines`, only the
    last lines of what is there already), through one descriptor opened as `logs` opens it,
    until the run's row says it is over or its cronctl died (whose row stays "running" until
    the next `run` records it: following would never end); `run`: the run as last read."""

    state_dir: Path
    result: LogResult
    last_lines: int | None = None
    sleep: Callable[[float], None] = time.sleep
    owner_gone: bool = False  # the run's cronctl died before recording its end

    @property
    def run(self) -> RunRow:
        return self.result.run

    def chunks(self) -> Iterator[bytes]:
        if self.run.outcome not in UNFINISHED:
            yield from self.result.chunks(self.last_lines)
            return
        fd: int | None = None
        try:
            while True:
                fd = self._open() if fd is None else fd
                if fd is not None:
                    got = False
                    for chunk in read_on(fd):
                        got = True
                        yield chunk
                    if got:
                        continue
                if self._over():
                    fd = self._open() if fd is None else fd  # ended before its log was seen
                    if fd is not None:
                        yield from read_on(fd)  # what came between the last read and the end
                    return
                self.sleep(POLL_S)
        finally:
            if fd is not None:
                os.close(fd)

    def _open(self) -> int | None:
        """The log's descriptor at what is to be shown; None while the run has not created it."""
        run = self.run
        if run.log_path is None:
            return None
        if run.outcome not in UNFINISHED:
            path = checked_log(self.state_dir, run)
        else:
            found = log_file(self.state_dir, run.task, run.log_path)
            if found is None:
                raise UsageError(f"the log of run {run.id} ({run.log_path}) cannot be read here")
            path = found
        try:
            fd = open_log(path)
        except FileNotFoundError:
            return None  # not created yet; or an ended run's, swept just now: nothing to show
        if self.last_lines is not None:
            os.lseek(fd, tail_start(fd, self.last_lines), os.SEEK_SET)
        return fd

    def _over(self) -> bool:
        with reading_store(self.state_dir) as store:
            now = store.get_run(self.run.id)
        if now is None:  # removed from the history under us: nothing more will come
            return True
        self.result = LogResult(now, self.result.path)
        if now.outcome not in UNFINISHED:
            return True
        if now.pid is not None and not procs.alive(now.pid):
            self.owner_gone = True
            return True
        return False
