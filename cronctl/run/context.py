"""A run in three parts: what it is (RunContext's own fields), how it reaches the world (World,
real or fake, with the Tracker and the Listener), and what it owns while it goes (RunState)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from cronctl.coord.port import Coordinator
from cronctl.core.due import Plan
from cronctl.core.model import MAX_PARALLEL, Task
from cronctl.core.runs import FAILED, RunRow
from cronctl.edge.notify import RunPings
from cronctl.edge.process import runner

NOT_STARTED = "not started: cronctl was told to stop"
#: `run --now T` with T this far ahead of the machine's clock is a rehearsal (RunContext).
REHEARSAL_AHEAD = timedelta(minutes=5)
#: Where a rehearsal keeps its windows, history and logs: inside state_dir, apart.
REHEARSAL_DIR = "rehearsal"
RESULT_FIELDS = ("outcome", "exit_code", "started", "ended", "duration_s", "log_path", "tail",
                 "message")  # fmt: skip


def result_fields(row: RunRow) -> dict[str, Any]:
    """What ``row``'s end sets, for Store.update_run."""
    return {k: getattr(row, k) for k in RESULT_FIELDS}


def real_clock() -> datetime:
    return datetime.now(UTC)


class Running(Protocol):
    """As runner.start returns it."""

    def wait(self) -> runner.CommandResult: ...
    def signal(self, sig: int) -> None: ...


class Joinable(Protocol):
    """A started thread, or a job on a pooled one (World.spawn)."""

    def join(self, timeout: float | None = None) -> None: ...
    def is_alive(self) -> bool: ...


def new_thread(target: Callable[[], None], name: str) -> Joinable:
    thread = threading.Thread(target=target, name=name)
    thread.start()
    return thread


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class World:
    """How a run reaches the world, real by default; tests pass fakes."""

    clock: Callable[[], datetime] = real_clock
    # Waits (jitter, retry delays, polls); `run` and `work` end them early when told to stop.
    sleep: Callable[[float], None] = time.sleep
    start: Callable[[runner.RunSpec], Running] = runner.start
    condition: Callable[..., bool] = runner.run_condition
    # Each worker on a thread of its own (`run`), or on one `work` keeps (run/pool.py).
    spawn: Callable[[Callable[[], None], str], Joinable] = new_thread
    warn: Callable[[str], None] = lambda message: print(message, file=sys.stderr)
    # `work`, whose process outlives its minute: it asks for a claim held elsewhere for as
    # long as that claim's run may start, not only in its minute (guards.ask_until).
    lives_on: bool = False


def _hear_nothing(*_args: object) -> None:
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Listener:
    """What the caller hears as a run goes (cli/wiring.py), by default nothing: the due rows
    (`work -v`), each final row with what to report, where each task's output lines go (`work
    --output`; None: only to its log)."""

    starting: Callable[[datetime, list[RunRow]], None] = _hear_nothing
    done: Callable[[Task, RunRow, str | None], None] = _hear_nothing
    output: Callable[[str], Callable[[str], None] | None] = lambda _task: None


class Tracker:
    """The commands running now, for `work` and `run` to forward a signal to."""

    def __init__(self) -> None:
        # Re-entrant: stop() runs in a signal handler, in the main thread, which may hold it.
        self._lock = threading.RLock()
        self._running: set[Running] = set()
        self._stop_signal: int | None = None
        self._stopped = threading.Event()
        self._on_stop: list[Callable[[], None]] = []  # called by stop() outside the lock
        self._held = 0  # worker slots in use, by every minute's run of `work` (see hold)

    @property
    def stopping(self) -> bool:
        """Whether cronctl was told to stop: nothing more may start."""
        return self._stop_signal is not None

    def stop(self, sig: int) -> int:
        """Start nothing more, end every pause and on_stop's waits, forward ``sig``: how many."""
        with self._lock:
            self._stop_signal = sig
            callbacks = list(self._on_stop)
        self._stopped.set()
        for callback in callbacks:
            callback()
        return self.signal_all(sig)

    def pause(self, seconds: float) -> None:
        """Sleep `seconds`, or less: until told to stop."""
        self._stopped.wait(seconds)

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Call `callback` when told to stop (at once if that happened already)."""
        with self._lock:
            self._on_stop.append(callback)
        if self._stopped.is_set():
            callback()

    def forget_stop(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._on_stop:
                self._on_stop.remove(callback)

    def hold(self, slots: int) -> int:
        """Take or give back worker slots: how many are in use, by all of `work`'s minutes."""
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
        with self._lock:
            self._running.discard(command)

    def signal_all(self, sig: int) -> int:
        """Send `sig` to every running command's process group; return how many."""
        with self._lock:
            running = list(self._running)
        for command in running:
            command.signal(sig)
        return len(running)


class Follow:
    """What follows a task's occurrence as it ends (chains.RunChains); here, nothing."""

    def record(self, task: Task, result: RunRow, ctx: RunContext) -> None:
        pass

    def start(self, store: Any, task: Task, result: RunRow, ctx: RunContext) -> list[RunRow]:
        return []

    def leads(self, task: Task) -> bool:
        """Whether tasks follow ``task`` (their starts may come after its end)."""
        return False


class Records(Protocol):
    """coord/outbox.py's Records."""

    def send(self, rows: Sequence[RunRow]) -> None: ...
    def finish(self, store: Any, rows: Sequence[RunRow], state_dir: Path) -> Exception | None: ...


class _NoRecords:
    """No fleet store, or a rehearsal: nothing is sent."""

    def send(self, rows: Sequence[RunRow]) -> None:
        pass

    def finish(self, store: Any, rows: Sequence[RunRow], state_dir: Path) -> Exception | None:
        return None


@dataclass(eq=False, repr=False)
class RunState:
    """What one run owns while it goes (once.coordinated makes it), shared by its workers."""

    records: Records = field(default_factory=_NoRecords)
    # In the background: a slow endpoint holds neither a worker nor a record.
    pings: RunPings = field(default_factory=RunPings)
    # By run id: whether this machine won the row's claim (guards.claim_some, guards.claim).
    claimed: dict[str, bool] = field(default_factory=dict)
    # By run id: until when the row's run may still start (guards.wait_until).
    deadlines: dict[str, datetime] = field(default_factory=dict)
    # Rows planning recorded "running" already: their workers need no commit of their own.
    marked: set[str] = field(default_factory=set)
    follow: Follow = field(default_factory=Follow)
    # The pauses were not read in time (tasks that need no store went by the last ones):
    # guarded tasks read them before their claim (guards.acquire).
    recheck_pauses: bool = False


@dataclass(frozen=True, eq=False, repr=False)
class RunContext:
    state_dir: Path
    lock_dir: Path
    host: str
    env: Mapping[str, str]
    coord: Coordinator
    dry_run: bool = False
    # A --now ahead of the clock (REHEARSAL_AHEAD): recorded apart, no claim, so it cannot
    # touch present-day runs or data.
    rehearsal: bool = False
    max_parallel: int = MAX_PARALLEL
    world: World = World()
    tracker: Tracker = field(default_factory=Tracker)
    listener: Listener = Listener()
    run: RunState = field(default_factory=RunState)


@dataclass(frozen=True, eq=False, repr=False)
class RunReport:
    """`cronctl run`: every occurrence dealt with in this run, in order."""

    now: datetime
    runs: list[RunRow]
    dry_run: bool = False
    # Every task's decision, by name (not for a dry run), for run/quiet.py's hint.
    plans: Mapping[str, Plan] | None = None
    # By task that missed occurrences: how many, and where the window started.
    missed: Mapping[str, tuple[int, datetime | None]] = field(default_factory=dict)

    @property
    def failed(self) -> list[RunRow]:
        """The runs that failed, timed out or could not start, each its occurrence's last
        attempt (a failure that a retry made good is history, not a failure of this run)."""
        last: dict[tuple[str, datetime], int] = {}
        for r in self.runs:
            last[r.task, r.occurrence] = max(last.get((r.task, r.occurrence), 0), r.attempt)
        return [
            r for r in self.runs if r.outcome in FAILED and r.attempt == last[r.task, r.occurrence]
        ]

    @property
    def interrupted(self) -> list[RunRow]:
        return [r for r in self.runs if r.outcome == "interrupted"]


def new_run_id(occurrence: datetime) -> str:
    """Sortable and unique: the occurrence's minute and 64 random bits, so that ids of one
    minute never collide, in one run (state.db's key) nor across a fleet (the store's)."""
    return f"{occurrence:%Y%m%dT%H%MZ}-{os.urandom(8).hex()}"


def log_path(task: Task, row: RunRow, ctx: RunContext) -> str:
    # Text, as the "running" mark records it and the runner opens it: no Path per task.
    return os.path.normpath(f"{ctx.state_dir}/logs/{task.name}/{row.id}.log")


def running_fields(task: Task, row: RunRow, ctx: RunContext) -> dict[str, Any]:
    """What the "running" mark of ``row`` records: when, and where its log goes."""
    started = ctx.world.clock()
    return {"outcome": "running", "started": started, "log_path": log_path(task, row, ctx)}


def marked_early(task: Task) -> bool:
    """Whether a row of ``task`` may be marked "running" in a commit before its worker starts
    it (docs/guarantees.md, The "running" mark): nothing but the overlap lock stands between."""
    return not task.on_one_server and starts_at_once(task)


def starts_at_once(task: Task) -> bool:
    """Whether nothing stands between a due row of ``task`` and its start but a claim and
    the overlap lock: no jitter, no condition, no retries or hooks around the command, no
    group whose slot it may wait for."""
    plain = task.jitter is None and not task.when and not task.skip and task.group is None
    return plain and not task.reports_outside
