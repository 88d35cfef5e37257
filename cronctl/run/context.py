"""Where and as whom a run happens (RunContext), what it reports (RunReport), and the
commands running right now (Tracker)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, TypedDict

from cronctl.coord import outbox
from cronctl.coord.port import Coordinator
from cronctl.core.due import Plan
from cronctl.core.model import MAX_PARALLEL, Task
from cronctl.core.runs import FAILED, Outcome, RunRow
from cronctl.edge.notify import RunPings
from cronctl.edge.process import runner

CONDITION_TIMEOUT_S = 30.0
#: `run --now T` with T this far ahead of the machine's clock is a rehearsal (RunContext).
REHEARSAL_AHEAD = timedelta(minutes=5)
#: Where a rehearsal keeps its windows, history and logs: inside state_dir, apart.
REHEARSAL_DIR = "rehearsal"
#: The fields of a run row that its end sets.
RESULT_FIELDS = (
    "outcome",
    "exit_code",
    "started",
    "ended",
    "duration_s",
    "log_path",
    "tail",
    "message",
)


def start_command(spec: runner.RunSpec) -> Running:
    """Start the command (runner.start; tests inject their own through RunContext.start)."""
    return runner.start(spec)


def check_condition(command: str, **options: Any) -> bool:
    """Run a `when`/`skip` condition (runner.run_condition; tests inject their own)."""
    return runner.run_condition(command, **options)


class Running(Protocol):
    """A started command, as runner.start returns it (tests may inject their own)."""

    def wait(self) -> runner.CommandResult:
        """Block until it ends; its result."""
        ...

    def signal(self, sig: int) -> None:
        """Forward a signal to its process group."""
        ...


class Joinable(Protocol):
    """A started thread, or a job on a pooled one (RunContext.spawn)."""

    def join(self, timeout: float | None = None) -> None:
        """Wait until it has returned."""
        ...

    def is_alive(self) -> bool:
        """Whether it has not returned yet."""
        ...


def new_thread(target: Callable[[], None], name: str) -> Joinable:
    """A thread of its own for `target`, started (RunContext.spawn's default); a daemon if
    the calling thread is one, as threads are."""
    thread = threading.Thread(target=target, name=name)
    thread.start()
    return thread


class Tracker:
    """The commands running right now, so `work` and `run` can forward a signal to them."""

    def __init__(self) -> None:
        # Re-entrant: stop() runs in a signal handler, in the main thread, which may hold it.
        self._lock = threading.RLock()
        self._running: set[Running] = set()
        self._stop_signal: int | None = None
        self._stopped = threading.Event()
        # What else must stop at once (pings in flight), called by stop() outside the lock.
        self._on_stop: list[Callable[[], None]] = []
        self._held = 0  # worker slots in use, by every minute's run of `work` (see hold)

    @property
    def stopping(self) -> bool:
        """Whether cronctl was told to stop: nothing more may start."""
        return self._stop_signal is not None

    def stop(self, sig: int) -> int:
        """Start nothing more, end every wait (pause) and what was handed to on_stop, and
        forward ``sig`` to every running command; return how many."""
        with self._lock:
            self._stop_signal = sig
            callbacks = list(self._on_stop)
        self._stopped.set()
        for callback in callbacks:
            callback()
        return self.signal_all(sig)

    def pause(self, seconds: float) -> None:
        """Sleep `seconds` (a jitter or a retry delay), or less: until told to stop."""
        self._stopped.wait(seconds)

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Call `callback` when told to stop (at once if that happened already)."""
        with self._lock:
            self._on_stop.append(callback)
        if self._stopped.is_set():
            callback()

    def forget_stop(self, callback: Callable[[], None]) -> None:
        """No longer call `callback` when told to stop."""
        with self._lock:
            if callback in self._on_stop:
                self._on_stop.remove(callback)

    def hold(self, slots: int) -> int:
        """Take (``slots`` > 0) or give back worker slots; return how many are in use in this
        process, also by the runs of earlier minutes that `work` still has going."""
        with self._lock:
            self._held += slots
            return self._held

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


class Follow(Protocol):
    """What follows a task's occurrence as it ends (run/chains.py's RunChains)."""

    def record(self, task: Task, result: RunRow, ctx: RunContext) -> None:
        """Record how it ended, before its result is committed (a crash between the two
        leaves the end, which a later run follows)."""
        ...

    def start(self, store: Any, task: Task, result: RunRow, ctx: RunContext) -> list[RunRow]:
        """Run what is ready to follow it now; the rows of those runs."""
        ...


class Preclaims:
    """The claims run_all's queue decided with others in one round trip (guards.claim_some),
    by run id, for each row's own claim to take."""

    def __init__(self) -> None:
        self._won: dict[str, bool] = {}
        self._lock = threading.Lock()

    def answered(self, won: Mapping[str, bool]) -> None:
        """Decided: ``won`` by run id."""
        with self._lock:
            self._won.update(won)

    def take(self, row_id: str) -> bool | None:
        """Whether this machine won ``row_id``; None: not decided ahead, the row claims by
        itself."""
        with self._lock:
            return self._won.pop(row_id, None)

    def won(self, row_id: str) -> bool:
        """Whether ``row_id`` is known won."""
        with self._lock:
            return self._won.get(row_id) is True


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
    max_parallel: int = MAX_PARALLEL
    tracker: Tracker | None = None
    # The process edge, injectable so the soak test can drive weeks of ticks in process.
    start: Callable[[runner.RunSpec], Running] = start_command
    condition: Callable[..., bool] = check_condition
    warn: Callable[[str], None] = field(default=lambda message: print(message, file=sys.stderr))
    # Claims, overlap locks, pauses, fleet records (edge/coord); None: files in lock_dir.
    coord: Coordinator | None = None
    # Claims decided with others as slots come free, by run id (see guards.claim_some).
    claimed: Preclaims = field(default_factory=Preclaims)
    # The store had not answered with the pauses when the tasks that need no store started
    # (they went by the pauses last read): guarded tasks, which wait for it anyway, look at
    # its own pauses before their claim (guards.paused).
    recheck_pauses: bool = False
    # The fleet records of this run, each sent as its run ends (coord/outbox.py); None: no
    # fleet store, or a rehearsal.
    records: outbox.Records | None = None
    # Rows the planning transaction recorded "running" already (the first wave: see
    # planning.plan_all), so their workers start them without a commit of their own.
    marked: set[str] = field(default_factory=set)
    # Waits (jitter, retry delays) go through `sleep` so tests can pin the clock;
    # `on_done` hears each occurrence's final row as its task ends (live failure reports);
    # `output` gives a task's output lines to a sink (`work --output`).
    sleep: Callable[[float], None] = time.sleep
    on_done: Callable[[Task, RunRow, str | None], None] | None = None
    # `starting` hears a minute's due rows once planned, before any starts (`work -v`'s line
    # for the minute: its outcomes follow, each as its run ends, through `on_done`).
    starting: Callable[[datetime, list[RunRow]], None] | None = None
    output: Callable[[str], Callable[[str], None]] | None = None
    # How run_all starts its worker threads: each a thread of its own (`run`), or a thread
    # `work` keeps for reuse (run/pool.py), which starts without a new thread's wait.
    spawn: Callable[[Callable[[], None], str], Joinable] = new_thread
    # The pings of this run still in flight (run_all sets it when a due task pings): sent in
    # the background, so a slow endpoint holds neither a worker nor a run's record.
    pings: RunPings | None = None
    # What follows a task's ended occurrence (run/chains.py); None: the schedule has no chains.
    follow: Follow | None = None


@dataclass(frozen=True)
class RunReport:
    """`cronctl run`: every occurrence dealt with in this run, in order."""

    now: datetime
    runs: list[RunRow]
    dry_run: bool = False
    # Every task's decision, by name (not for a dry run): what a quiet minute's hint is made
    # from (run/quiet.py).
    plans: Mapping[str, Plan] | None = None
    # By task, for the tasks that missed occurrences: how many (recorded one by one up to 100)
    # and where the window started, so the text output can say it in one line.
    missed: Mapping[str, tuple[int, datetime | None]] = field(default_factory=dict)

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
    """Sortable and unique: the occurrence's minute and 64 random bits (16 hex digits).

    Ids of one minute must not collide, in one run (state.db's key: a collision fails the
    whole planning transaction) nor across a fleet (the store's history is keyed by id).
    Six hex digits, as before, collided in about one run of 100 tasks in 3,400 (n^2 / 2^25;
    it happened in a benchmark), 3 % of the runs of 1,000, and surely among 50 machines'
    rows of one minute; with 64 bits, 50,000 ids a minute collide once in ~10^10 minutes.
    """
    return f"{occurrence:%Y%m%dT%H%MZ}-{os.urandom(8).hex()}"


def log_dir(state_dir: Path, task: str) -> Path:
    """``STATE_DIR/logs/TASK``: where the logs of task ``task`` go."""
    return Path(os.path.normpath(f"{state_dir}/logs/{task}"))


def log_path(task: Task, row: RunRow, ctx: RunContext) -> Path:
    """``STATE_DIR/logs/TASK/RUN_ID.log`` (its directory is made by execute, or in
    `work`'s lead)."""
    return log_dir(ctx.state_dir, task.name) / f"{row.id}.log"


class RunningMark(TypedDict):
    """The fields a run's "running" mark sets."""

    outcome: Outcome
    started: datetime
    log_path: str


def running_fields(task: Task, row: RunRow, ctx: RunContext) -> RunningMark:
    """What the "running" mark of ``row`` records: when, and where its log goes."""
    return {"outcome": "running", "started": ctx.clock(), "log_path": str(log_path(task, row, ctx))}


def starts_at_once(task: Task) -> bool:
    """Whether nothing stands between a due row of ``task`` and its start but a claim and
    the overlap lock: no jitter, no condition, no retries or hooks around the command, no
    group whose slot it may wait for."""
    plain = task.jitter is None and not task.when and not task.skip and task.group is None
    return plain and not task.reports_outside


def coord_of(ctx: RunContext) -> Coordinator:
    """The run's coordinator (run_once sets it before anything asks)."""
    assert ctx.coord is not None, "run_once sets the coordinator"
    return ctx.coord


def real_clock() -> datetime:
    """The machine's clock, in UTC."""
    return datetime.now(UTC)
