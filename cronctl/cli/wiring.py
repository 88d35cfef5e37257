"""The composition root, with no typer import: loading a schedule and building a run's
context, for the typer commands and for cli/main.py's plain `run` alike."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cronctl.cli.fastpath import Minute, host_name, parse_instant, quiet_minute
from cronctl.cli.render.runs import (
    render_failure,
    render_problems,
    render_run,
    run_line,
    starting_line,
)
from cronctl.coord import open_coordinator
from cronctl.coord.port import Coordinator
from cronctl.core.model import Schedule, Task, format_utc, runs_on
from cronctl.core.runs import FAILED, RunRow
from cronctl.edge import dirs, dirwarnings, schedentry
from cronctl.edge.process.stream import printer
from cronctl.edge.schedpaths import schedule_paths
from cronctl.errors import CronctlError, LockDirNotSharedError
from cronctl.run import quiet
from cronctl.run.context import REHEARSAL_AHEAD, REHEARSAL_DIR, Listener, RunContext, Tracker
from cronctl.run.once import run_once

__all__ = ["host_name", "parse_instant"]  # the commands take them from here with the rest


def load_schedule(files: list[Path] | None) -> Schedule:
    """Read the schedule files --file (or CRONCTL_FILE, or the default) names."""
    return schedentry.load_uncached(schedule_paths(files, os.environ))


def load_cached(files: list[Path] | None) -> Schedule:
    """`list`'s schedule, from `run`'s cache entry when its files did not change (never for
    `check`: the gate a schedule passes before it is deployed)."""
    return schedentry.load(schedule_paths(files, os.environ), os.environ)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Where:
    """The schedule files and the state and lock directories, coordination store and host
    name a command was given (what it was not offered stays None: the default)."""

    file: list[Path] | None = None
    state_dir: Path | None = None
    lock_dir: Path | None = None
    host: str | None = None
    coordination: str | None = None

    def load(self) -> tuple[Schedule, Path, Path]:
        schedule = load_schedule(self.file)
        return (schedule, *self.dirs(schedule))

    def dirs(self, schedule: Schedule) -> tuple[Path, Path]:
        return dirs.data_dirs(schedule, self.state_dir, self.lock_dir, os.environ)

    def coordinator(self, schedule: Schedule, locks: Path, reads_only: bool = False) -> Coordinator:
        """The coordination store if one is configured, else files in `locks`."""
        url = dirs.coordination_url(schedule, self.coordination, os.environ)
        me, project = host_name(self.host), schedule.settings.project
        return open_coordinator(
            url, locks, host=me, pid=os.getpid(), project=project, reads_only=reads_only
        )


def fail_on_errors(schedule: Schedule) -> Schedule:
    """`schedule`; one with errors stops the command (exit 2) after saying why."""
    if schedule.errors:
        render_problems(schedule.errors)
        count = len(schedule.errors)
        raise CronctlError(
            f"{count} error{'s' * (count != 1)} in the schedule; nothing was run. "
            f"Fix {'them' if count != 1 else 'it'} (see `cronctl check`) and try again"
        )
    return schedule


def run_context(
    schedule: Schedule, where: Where, strict: bool, dry_run: bool, at_start: bool = False
) -> RunContext:
    """Where the run's data lives and how it behaves; refuses a local lock_dir if asked."""
    states, locks = where.dirs(schedule)
    url = dirs.coordination_url(schedule, where.coordination, os.environ)
    # With a coordination store, claims do not live in lock_dir: whether it is shared is moot.
    warning = None if url else dirwarnings.lock_dir_warning(schedule, locks)
    if warning is not None:
        if strict or os.environ.get("CRONCTL_ENV") == "production":
            why = "--strict" if strict else "CRONCTL_ENV=production"
            raise LockDirNotSharedError(f"refusing to run ({why}): {warning.message}")
        # Once a day (-v too), not every minute: cron mails whatever `run` prints, and
        # `check` and `doctor` show it any time. `work` (`at_start`) says it as it starts.
        if at_start:
            print(f"cronctl: warning: {warning.message}", file=sys.stderr)
        elif dirwarnings.daily_notice(states, "lock-dir-not-shared"):
            print(f"cronctl: warning: {warning.message} (repeated once a day)", file=sys.stderr)
    host, project = host_name(where.host), schedule.settings.project
    return RunContext(
        state_dir=states,
        lock_dir=locks,
        host=host,
        env=dict(os.environ),
        dry_run=dry_run,
        max_parallel=schedule.settings.max_parallel,
        coord=open_coordinator(url, locks, host=host, pid=os.getpid(), project=project),
    )


def pretended(ctx: RunContext, instant: datetime, dry_run: bool) -> RunContext:
    """The context of `run --now TIME`; ahead of the clock, a rehearsal (docs/commands.md)."""
    if instant - datetime.now(UTC) > REHEARSAL_AHEAD:
        # A dry run reads the rehearsal's state too: it says what the rehearsal would run, not
        # hundreds of occurrences "missed" between the real state and a pretended future.
        what = (
            "shows what a rehearsal would run then, from the rehearsal's state in "
            f"{ctx.state_dir / REHEARSAL_DIR}, and changes nothing"
            if dry_run
            else f"runs what is due then, records it in {ctx.state_dir / REHEARSAL_DIR} (not "
            f"in the real history), claims in {ctx.lock_dir / REHEARSAL_DIR} and changes no "
            "real window"
        )
        print(
            f"cronctl: note: --now is ahead of this machine's clock: a rehearsal. It {what}",
            file=sys.stderr,
        )
        return replace(ctx, rehearsal=True)
    # A pretended time holds for the whole run: leases and grace are judged by it too.
    return replace(ctx, world=replace(ctx.world, clock=lambda: instant))


def run_command(
    files: list[Path] | None,
    now: str | None,
    dry_run: bool,
    verbose: bool,
    strict: bool,
    as_json: bool,
    state_dir: Path | None,
    lock_dir: Path | None,
    host: str | None = None,
    coordination: str | None = None,
    minute: Minute | None = None,
) -> int:
    """`cronctl run`: the exit code (0, or 1 when a task failed). A quiet minute ends in
    cronctl.run.quiet (`minute`: that check, if cli/main.py made it already); otherwise the
    schedule is loaded (cached), planned and run, and a new proof is kept."""
    if minute is None:
        minute = quiet_minute(
            files, now, dry_run, verbose, as_json, state_dir, lock_dir, host, coordination
        )
    if minute.status == quiet.DONE:
        return 0
    look, instant = minute.look, minute.instant
    everything = schedentry.load(look.paths, os.environ, look)
    fail_on_errors(everything)
    where = Where(files, state_dir, lock_dir, host, coordination)
    ctx = run_context(everything, where, strict, dry_run)
    if now is not None:
        ctx = pretended(ctx, instant, dry_run)
    schedule = this_host(everything, ctx.host)
    live = None if dry_run else LiveReports()
    if live is not None:
        ctx = replace(ctx, listener=Listener(done=live))
    stop = _StopOnSignal()
    report = run_once(schedule, instant, stop.install(ctx))
    render_run(report, as_json, verbose, live.handled if live else frozenset())
    if stop.signum is not None:
        # 143 for SIGTERM, 130 for SIGINT, 129 for SIGHUP, as a shell reports them.
        return 128 + stop.signum
    if minute.status == quiet.SPENT:
        quiet.keep(look, everything, schedule, report, ctx, os.environ)
    return 1 if report.failed else 0


class _StopOnSignal:
    """SIGTERM/SIGINT/SIGHUP to `run`: stop starting tasks, forward the signal, SIGKILL after
    the grace (docs/commands.md, Signals). The handler only sets flags and sends signals:
    the main thread still waits for the tasks and records every outcome before `run` exits."""

    def __init__(self, grace_s: float = 30.0) -> None:
        self.signum: int | None = None
        self._grace_s = grace_s
        self._tracker = Tracker()

    def install(self, ctx: RunContext) -> RunContext:
        """Handle the signals from now on; ``ctx`` with a tracker to signal."""
        # SIGHUP too, as under `work`: its default action killed `run` outright, leaving the
        # running task unsignalled and its row "running" (docs/commands.md, Signals).
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._handle)
        # A jitter or retry delay ends at once when told to stop, as under `work`.
        world = replace(ctx.world, sleep=self._tracker.pause)
        return replace(ctx, tracker=self._tracker, world=world)

    def _handle(self, signum: int, _frame: object) -> None:
        first = self.signum is None
        self.signum = signum
        self._tracker.stop(signum)
        if first:
            timer = threading.Timer(self._grace_s, self._tracker.signal_all, (signal.SIGKILL,))
            timer.daemon = True
            timer.start()


def this_host(schedule: Schedule, host: str) -> Schedule:
    """The schedule without the tasks whose `hosts` leave this machine out."""
    if not any(task.hosts for task in schedule.tasks):
        return schedule
    kept = tuple(t for t in schedule.tasks if runs_on(t, host))
    # A follower left out here may run on another machine after a task that runs here.
    here = {t.name for t in kept}
    followed = frozenset(n for t in schedule.tasks if t.name not in here for n in t.after)
    return replace(schedule, tasks=kept, followed_elsewhere=followed)


def work_reporting(
    ctx: RunContext, verbose: bool, output: bool
) -> tuple[RunContext, Callable[[Any], None]]:
    """`work`: failures reported as each task ends (with -v, every outcome); with --output,
    every task's lines on stdout as `TASK | line` (what `journalctl -u cronctl` then shows)."""
    live = LiveReports(lines=verbose)
    listener = Listener(done=live)
    if output:
        listener = replace(listener, output=lambda task: printer(f"{task} | "))
    if verbose:
        # A line as the minute's tasks start; what ran nothing as its tick ends (render_run).
        listener = replace(
            listener, starting=lambda now, rows: print(starting_line(now, rows), flush=True)
        )
    ctx = replace(ctx, listener=listener)

    def report(result: Any) -> None:
        render_run(result, False, verbose, live.handled, live.shown)
        live.forget(r.id for r in result.runs)  # `work` runs for months: keep the set small

    return ctx, report


class LiveReports:
    """A run's `Listener.done`: what each ending occurrence calls for, printed as it ends (not
    behind the minute's slowest task: cron's mails would come late and out of order);
    `lines`: each outcome's `-v` line too (`work -v`)."""

    def __init__(self, lines: bool = False) -> None:
        self._lock = threading.Lock()
        self._lines = lines
        self.handled: set[str] = set()  # run ids already dealt with (printed or silenced)
        self.shown: set[str] = set()  # run ids whose -v line is printed

    def __call__(self, task: Task, result: RunRow, kind: str | None) -> None:
        with self._lock:
            if self._lines:
                print(run_line(result), flush=True)
                self.shown.add(result.id)
            if kind is not None or result.outcome in FAILED:
                self.handled.add(result.id)  # printed now, or silenced by notify = "change"
            if kind == "failure":
                render_failure(result)
            elif kind == "recovered":
                print(
                    f"cronctl: task {task.name} recovered: ok for {format_utc(result.occurrence)}",
                    file=sys.stderr,
                    flush=True,
                )

    def forget(self, run_ids: Iterable[str]) -> None:
        with self._lock:
            ids = set(run_ids)
            self.handled -= ids
            self.shown -= ids
