"""`cronctl work`: one foreground process that does what `run` does at every minute boundary."""

from __future__ import annotations

import functools
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType

from cronctl.core.minutes import minute_floor
from cronctl.core.model import Schedule
from cronctl.edge import metrics
from cronctl.edge.awake import join_awake, wait_awake
from cronctl.edge.health import Address, HealthFile, HealthServer, check_prometheus_client
from cronctl.edge.metrics import Sample
from cronctl.edge.safefiles import ensure_private_dir
from cronctl.edge.state.dbfile import file_id
from cronctl.edge.state.store import DB_NAME, Store, StoreUnusableError
from cronctl.errors import CronctlError, UnsafeDirectoryError
from cronctl.run.context import RunContext, RunReport, Tracker
from cronctl.run.once import run_once, run_start_tasks, start_tasks
from cronctl.run.planning import Ahead, plan_ahead
from cronctl.run.pool import Job, Pool

_MINUTE = timedelta(minutes=1)
# How long before a boundary the loop wakes to reload a changed schedule and work out every
# task's decision for that boundary (plan_ahead, whose cost grows with the schedule), so
# that at the boundary itself only the states are read again and the due tasks started.
_LEAD = timedelta(seconds=1)
#: The longest sleep of the loop before it reads the clock again (see wait_until).
_LONGEST_SLEEP_S = 10.0
#: `--health` answers 503 once the minute the loop waits for is this late (a tick missed,
#: with room for a slow reload or a clock slewed back).
STALL = timedelta(seconds=90)


@dataclass
class _Watched:
    """The schedule now in force and the file stamps it was read from."""

    schedule: Schedule
    stamps: dict[Path, tuple[int, int]]


def file_stamps(paths: Sequence[Path]) -> dict[Path, tuple[int, int]]:
    """(mtime_ns, size) per path; a file that vanished counts as a change."""
    stamps: dict[Path, tuple[int, int]] = {}
    for path in paths:
        try:
            info = path.stat()
            stamps[path] = (info.st_mtime_ns, info.st_size)
        except OSError:
            stamps[path] = (-1, -1)
    return stamps


class Worker:
    """The loop: sleep to the boundary, reload if changed, start `run` in the background."""

    def __init__(
        self, load: Callable[[], Schedule], paths: Callable[[], list[Path]], ctx: RunContext,
        report: Callable[[RunReport], None], grace_s: float = 30.0,
        clock: Callable[[], datetime] | None = None, wait: Callable[[float], bool] | None = None,
        health: Address | None = None, health_file: Path | None = None,
    ) -> None:  # fmt: skip
        self._load = load
        self._paths = paths
        self._stop = threading.Event()
        # Each tick and its workers run on threads kept for reuse (run/pool.py).
        self._pool = Pool()
        # A jitter or retry delay ends early when `work` is told to stop; nothing starts after.
        world = replace(
            ctx.world, sleep=self._sleep_unless_stopped, spawn=self._pool.spawn, lives_on=True
        )
        self._ctx = replace(ctx, tracker=Tracker(), world=world)
        self._report = report
        self._grace_s = grace_s
        self._stop_signal: int | None = None
        self._threads: list[Job] = []
        self._exit_code = 0
        # The loop's clock and its sleep between ticks (True: told to stop): a test's drive
        # many minutes in seconds.
        self._clock = clock or (lambda: datetime.now(UTC))
        self._wait = wait or functools.partial(wait_awake, self._stop)  # see edge/awake
        self._said: str | None = None  # the last reload warning, so it is said once
        self._wal_holder: tuple[Store, tuple[int, int]] | None = None  # see _hold_wal
        self._health = health
        self._health_file = HealthFile(health_file, _say) if health_file is not None else None
        self._server: HealthServer | None = None
        self._due: datetime | None = None
        self._watched: _Watched | None = None

    def _sleep_unless_stopped(self, seconds: float) -> None:
        self._stop.wait(seconds)

    def request_stop(self, signum: int, _frame: FrameType | None = None) -> None:
        """Signal handler: stop starting tasks; the loop then forwards the signal."""
        self._stop_signal = signum
        self._stop.set()

    def serve(self) -> int:
        """Run until SIGTERM/SIGINT/SIGHUP; return the exit code."""
        watched = self._watched = self.watch()
        self.check_store()
        self._due = minute_floor(self._clock()) + _MINUTE
        self._start_health()
        # A thread for the first tick and one for each of its workers, before it comes.
        self._pool.warm(self._ctx.max_parallel + 1)  # the start-up runs make their own
        # SIGHUP too: its default action killed `work` outright, leaving the running task
        # unsignalled and its row "running"; a closed terminal or a supervisor's hangup
        # stops it as SIGTERM does (docs/commands.md, Signals).
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self.request_stop)
        count = len(watched.schedule.tasks)
        _say(f"cronctl work: {count} task{'s' * (count != 1)}; waiting for the next minute")
        if start_tasks(watched.schedule):
            self._start_up(watched.schedule)
        last_boundary: datetime | None = None
        while not self._stop.is_set():
            boundary = minute_floor(self._clock()) + _MINUTE
            if boundary == last_boundary:
                # The clock stepped back a hair after the last tick (a slew): that minute is done.
                boundary += _MINUTE
            self._due = boundary
            if self._wait_until(boundary - _LEAD):
                break
            watched = self.refresh(watched)
            ahead = self._plan_ahead(watched.schedule, boundary)
            if self._wait_until(boundary):
                if ahead is not None:
                    ahead.close()
                break
            last_boundary = boundary
            watched = self._watched = self.refresh(watched)  # an edit in the last second
            self._start(watched.schedule, boundary, ahead)
            if self._health_file is not None:
                self._health_file.touch()
        return self._shutdown()

    def _start_health(self) -> None:
        """--health and --health-file (edge/health.py), before anything runs: a bad one stops
        `work` (exit 2)."""
        if self._health_file is not None:
            self._health_file.start()
        if self._health is None:
            return
        server = HealthServer(self._health, self.liveness, self._samples)
        try:
            check_prometheus_client()
            server.start()
        except CronctlError:
            if self._health_file is not None:
                self._health_file.remove()  # `work` never ran: nothing may look alive
            raise
        self._server = server
        reach = "" if self._health.loopback else " (reachable from other machines)"
        _say(f"cronctl work: health on http://{self._health}/healthz and /metrics{reach}")

    def liveness(self) -> tuple[bool, str]:
        """Healthy while the loop is on time: the minute it waits for came less than STALL
        ago, or has not come yet (docs/containers.md)."""
        due = self._due
        if self._stop.is_set():
            return False, "stopping"
        if due is None:
            return True, "starting"
        late = (self._clock() - due).total_seconds()
        if late > STALL.total_seconds():
            return False, (
                f"stalled: the minute loop is {late:.0f}s late for {due:%Y-%m-%dT%H:%M:%SZ}"
            )
        return True, f"ok: next minute {due:%Y-%m-%dT%H:%M:%SZ}"

    def _samples(self) -> list[Sample]:
        """/metrics: those of `metrics_file`, read now from the state database."""
        watched = self._watched
        if watched is None:
            return []
        with Store.open(self._ctx.state_dir, create=False) as store:
            return metrics.samples(watched.schedule, store, self._clock())

    def _wait_until(self, instant: datetime) -> bool:
        return wait_until(instant, self._clock, self._wait, self._stop.is_set)

    def _plan_ahead(self, schedule: Schedule, boundary: datetime) -> Ahead | None:
        """Every task's decision at `boundary` from the states as they are now (see Ahead);
        None if they cannot be read: the tick then meets and reports the problem itself."""
        if self._ctx.rehearsal or self._ctx.dry_run:
            return None

        def passed() -> bool:  # the boundary came: what is left is decided there
            return self._clock() >= boundary

        try:
            state_dir = ensure_private_dir(self._ctx.state_dir)
            before = file_id(state_dir / DB_NAME)
            store = Store.open(state_dir, create=False)
        except Exception:  # anything: see the docstring
            return None
        try:
            with suppress(Exception):  # a checkpoint not made only makes the commit slower
                store.checkpoint()
            stored, version = store.snapshot()
            ahead = plan_ahead(schedule, stored, store.parse_state, boundary, stop=passed)
        except Exception:  # anything: see the docstring
            store.close()
            return None
        if before is not None and store.file_id() == before:  # the file it opened is that one
            ahead.keep(store, version, before)
            self._hold_wal(state_dir, before)
        else:
            store.close()
        self._make_log_dirs(state_dir, ahead)
        return ahead

    @staticmethod
    def _make_log_dirs(state_dir: Path, ahead: Ahead) -> None:
        """The log directories of the tasks due at the boundary, made now, not at its start."""
        if ahead.decisions is None:
            return
        for task, decided in ahead.decisions.active:
            if decided.run:
                with suppress(Exception):  # anything: the start meets it and says so
                    ensure_private_dir(f"{state_dir}/logs/{task.name}", within=state_dir)

    def _hold_wal(self, state_dir: Path, opened: tuple[int, int]) -> None:
        """Keep an idle connection to state.db (the file `opened`) between ticks: the last one
        to close deletes the WAL, and the next tick's first commit, which its starts wait for,
        then wrote a new file (its fsync blocks far longer than a write in place)."""
        if self._wal_holder is not None and self._wal_holder[1] == opened:
            return
        self._release_wal()
        try:
            holder = Store.open(state_dir, create=False)
        except Exception:  # anything: the tick's own open meets it and says so
            return
        if holder.file_id() == opened:
            self._wal_holder = (holder, opened)
        else:
            holder.close()

    def _release_wal(self) -> None:
        holder, self._wal_holder = self._wal_holder, None
        if holder is not None:
            with suppress(Exception):
                holder[0].close()

    def watch(self) -> _Watched:
        """Load the schedule to start with; a broken one stops `work` before it starts."""
        schedule = self._load()
        if schedule.errors:
            raise CronctlError(
                f"{len(schedule.errors)} error(s) in the schedule; fix them (cronctl check) first"
            )
        return _Watched(schedule, file_stamps(self._paths()))

    def check_store(self) -> None:
        """An unusable state database stops `work` now (exit 2), not at the next minute."""
        Store.open(ensure_private_dir(self._ctx.state_dir)).close()

    def refresh(self, watched: _Watched) -> _Watched:
        """A changed file is read again. Whatever a load raises, `work` keeps the last good
        schedule (one bad edit must not stop every task on the machine), and says so once."""
        try:
            stamps = file_stamps(self._paths())
        except Exception as exc:  # anything: see the docstring
            self._say_once(f"cronctl work: warning: {_why(exc)}; keeping the last good schedule")
            return watched
        self._said = None
        if stamps == watched.stamps:
            return watched
        try:
            schedule = self._load()
        except Exception as exc:  # anything: see the docstring
            return self._keep(watched, stamps, _why(exc))
        if schedule.errors:
            problem = "; ".join(p.describe() for p in schedule.errors[:5])
            return self._keep(watched, stamps, problem)
        _say(f"cronctl work: schedule reloaded: {len(schedule.tasks)} tasks")
        return _Watched(schedule, stamps)

    def _say_once(self, message: str) -> None:
        if message != self._said:
            _say(message)
        self._said = message

    @staticmethod
    def _keep(watched: _Watched, stamps: dict[Path, tuple[int, int]], problem: str) -> _Watched:
        _say(
            f"cronctl work: schedule change not applied: {problem}; keeping the last good schedule"
        )
        return _Watched(watched.schedule, stamps)

    def _start(self, schedule: Schedule, boundary: datetime, ahead: Ahead | None = None) -> None:
        self._threads = [t for t in self._threads if t.is_alive()]
        tick = f"tick-{boundary:%H%M}"
        self._spawn(lambda: run_once(schedule, boundary, self._ctx, ahead), boundary, tick)

    def _start_up(self, schedule: Schedule) -> None:
        """The on_start tasks, once, beside the minute loop (see run/once.py)."""
        started = self._clock()
        self._spawn(lambda: run_start_tasks(schedule, started, self._ctx), started, "start-up")

    def _spawn(self, body: Callable[[], RunReport], at: datetime, name: str) -> None:
        """Run a tick (or the start-up runs) and report it; an error is said, not raised."""

        def reporting() -> None:
            try:
                self._report(body())
            except (StoreUnusableError, UnsafeDirectoryError) as exc:
                self._fail(f"cronctl work: stopping: {exc}")
            except (CronctlError, OSError) as exc:  # a full disk: say so, keep ticking
                _say(f"cronctl work: error at {at:%H:%M}: {exc}")

        self._threads.append(self._pool.spawn(reporting, name))

    def _fail(self, message: str) -> None:
        """A state database no retry can fix: say it once and exit 2 (a supervisor notices)."""
        if not self._stop.is_set():
            _say(message)
        self._exit_code = 2
        self._stop.set()

    def _shutdown(self) -> int:
        tracker = self._ctx.tracker
        sig = self._stop_signal or signal.SIGTERM
        count = tracker.stop(sig)
        busy = any(t.is_alive() for t in self._threads)
        if count:
            _say(
                f"cronctl work: stopping; signalled {count} running task(s), waiting up to "
                f"{self._grace_s:g}s"
            )
        elif busy:  # a minute still planning or recording: no task to signal
            _say("cronctl work: stopping; no task running, finishing this minute's records")
        else:
            _say("cronctl work: stopping; nothing was running")
        deadline = time.monotonic() + self._grace_s
        for thread in self._threads:
            join_awake(thread, max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in self._threads):
            killed = tracker.signal_all(signal.SIGKILL)
            _say(f"cronctl work: grace period over; killed {killed} task(s)")
            for thread in self._threads:
                join_awake(thread, 5.0)
        self._release_wal()
        if self._server is not None:
            self._server.close()
        if self._health_file is not None:
            self._health_file.remove()
        return self._exit_code


def wait_until(
    instant: datetime, clock: Callable[[], datetime], wait: Callable[[float], bool],
    stopped: Callable[[], bool],
) -> bool:  # fmt: skip
    """Sleep until `clock` reads `instant` (never a hair early), each sleep computed from the
    clock and at most _LONGEST_SLEEP_S (a clock stepped forward is noticed soon); True when
    a stop was requested (`wait` returned True, or `stopped()` says so)."""
    while not stopped():
        left = (instant - clock()).total_seconds()
        if left <= 0:
            return False
        if wait(min(left, _LONGEST_SLEEP_S)):
            return True
    return True


def _why(exc: Exception) -> str:
    """A load failure for the log: cronctl's own errors as they are, anything else named."""
    if isinstance(exc, CronctlError):
        return str(exc)
    return f"the schedule could not be loaded ({type(exc).__name__}: {exc})"


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
