"""What the commands share, with no typer import: `cronctl run` starts 1,440 times a day.

cronctl.cli.main serves a plain `cronctl run ...` from here directly; the typer app
uses the same functions, so both paths behave the same.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cronctl.errors import CronctlError, UsageError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from cronctl.core.model import Schedule, Task
    from cronctl.core.runs import RunRow
    from cronctl.run.once import RunContext, Tracker


def parse_instant(text: str | None, flag: str = "--now") -> datetime:
    """An aware UTC datetime from ISO 8601 with an offset; the real clock when None."""
    if text is None:
        return datetime.now(UTC)
    try:
        value = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not ISO 8601, e.g. 2026-08-03T09:00:00Z") from None
    if value.tzinfo is None:
        raise UsageError(f"{flag} {text!r} has no offset; add Z or +HH:MM")
    from cronctl.core.values import instant_problem

    if problem := instant_problem(value):
        raise UsageError(f"{flag} {text!r} {problem}; give a time in that range")
    return value.astimezone(UTC)


#: Options whose value names a file or directory: an empty value is never meant.
_PATH_OPTIONS = ("--state-dir", "--lock-dir", "--file", "-f")


def reject_empty_paths(argv: Sequence[str]) -> None:
    """A usage error for ``--state-dir ""`` and the like, before anything reads them.

    Typer turns an empty value into ``Path("")``, which is the current directory: a state
    directory would silently land wherever cron started the command.
    """
    for index, arg in enumerate(argv):
        name, eq, inline = arg.partition("=")
        if arg == "--":
            return
        if name not in _PATH_OPTIONS:
            continue
        empty = inline == "" if eq else index + 1 < len(argv) and argv[index + 1] == ""
        if empty:
            raise UsageError(f"{name} was given an empty value; give a path, or leave {name} out")


def host_name(flag: str | None = None) -> str:
    """This machine's name in history, claims and locks: --host, $CRONCTL_HOST, or the node name."""
    for value, source in ((flag, "--host"), (os.environ.get("CRONCTL_HOST"), "CRONCTL_HOST")):
        if value is None:
            continue
        name = value.strip()
        if not name or any(ch.isspace() or not ch.isprintable() for ch in name) or len(name) > 253:
            raise UsageError(
                f"{source} {value!r} is not a usable host name: give a non-empty name without "
                "spaces or control characters, at most 253 characters"
            )
        return name
    return os.uname().nodename


def load_schedule(files: list[Path] | None) -> Schedule:
    """Read the schedule files the flags (or CRONCTL_FILE, or the default) name (`run` and
    `list` read them through the schedule cache instead: see load_cached)."""
    from cronctl.edge.paths import schedule_paths
    from cronctl.edge.schedfiles import load_paths

    return load_paths(schedule_paths(files, os.environ))


def load_cached(files: list[Path] | None) -> Schedule:
    """The schedule `list` shows: from `run`'s cache entry when nothing the parse read has
    changed (the very values parsing gives), else parsed and kept when it has no errors.
    `check` never uses it: it is the gate a schedule passes before it is deployed."""
    from cronctl.edge import schedentry
    from cronctl.edge.paths import schedule_paths

    return schedentry.load(schedule_paths(files, os.environ), os.environ)


def fail_on_errors(schedule: Schedule) -> None:
    """For run/list/work: a schedule with errors stops the command (exit 2) after saying why."""
    from cronctl.cli.render.tables import render_problems

    if schedule.errors:
        render_problems(schedule.errors)
        count = len(schedule.errors)
        raise CronctlError(
            f"{count} error{'s' * (count != 1)} in the schedule; nothing was run. "
            "Fix them (see `cronctl check`) and try again"
        )


def run_context(
    schedule: Schedule,
    state_dir: Path | None,
    lock_dir: Path | None,
    strict: bool,
    dry_run: bool,
    verbose: bool = False,
    host: str | None = None,
    coordination: str | None = None,
) -> RunContext:
    """Where the run's data lives and how it behaves; refuses a local lock_dir if asked."""
    from cronctl.coord import open_coordinator
    from cronctl.edge import dirs
    from cronctl.run.once import RunContext, real_clock

    states, locks = dirs.data_dirs(schedule, state_dir, lock_dir, os.environ)
    url = dirs.coordination_url(schedule, coordination, os.environ)
    # With a coordination store, claims do not live in lock_dir: whether it is shared is moot.
    warning = None if url else dirs.lock_dir_warning(schedule, locks)
    if warning is not None:
        production = os.environ.get("CRONCTL_ENV") == "production"
        if strict or production:
            from cronctl.errors import LockDirNotSharedError

            why = "--strict" if strict else "CRONCTL_ENV=production"
            raise LockDirNotSharedError(f"refusing to run ({why}): {warning.message}")
        # Once a day, not every minute: cron mails whatever `run` prints. -v: every time.
        if verbose:
            print(f"cronctl: warning: {warning.message}", file=sys.stderr)
        elif dirs.daily_notice(states, "lock-dir-not-shared"):
            print(f"cronctl: warning: {warning.message} (repeated once a day)", file=sys.stderr)
    me = host_name(host)
    return RunContext(
        state_dir=states,
        lock_dir=locks,
        host=me,
        pid=os.getpid(),
        env=dict(os.environ),
        clock=real_clock,
        dry_run=dry_run,
        max_parallel=schedule.settings.max_parallel,
        coord=open_coordinator(url, locks, host=me, pid=os.getpid()),
    )


def pretended(ctx: RunContext, instant: datetime, dry_run: bool) -> RunContext:
    """The context of `run --now TIME`: a time ahead of the clock is a rehearsal (SPEC 3)."""
    from cronctl.run.once import REHEARSAL_AHEAD, REHEARSAL_DIR

    if instant - datetime.now(UTC) > REHEARSAL_AHEAD:
        # A dry run ahead of the clock reads the rehearsal's state too: it then says what the
        # rehearsal at the same --now would run, not hundreds of occurrences "missed" between
        # the real state's last minute and a pretended future.
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
    return replace(ctx, clock=lambda: instant)


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
) -> int:
    """`cronctl run`: the exit code (0, or 1 when a task failed).

    A minute with nothing due is dealt with by cronctl.run.quiet when the last planned
    minute left it the proof; otherwise the schedule is loaded (from its cache entry if the
    files did not change), planned and run, and a new proof is kept."""
    from cronctl.edge import schedcache
    from cronctl.edge.paths import schedule_paths
    from cronctl.run import quiet

    look = schedcache.Lookup(schedule_paths(files, os.environ), os.environ)
    instant = parse_instant(now)
    status = quiet.SPENT
    if not dry_run and not as_json:
        status = quiet.deal(
            look,
            os.environ,
            instant=instant,
            pretended=now is not None,
            host=host_name(host),
            state_dir=state_dir,
            lock_dir=lock_dir,
            coordination=coordination,
        )
        if status == quiet.DONE:
            return 0

    from cronctl.cli.render.tables import render_run
    from cronctl.edge import schedentry
    from cronctl.run.once import run_once

    everything = schedentry.load(look.paths, os.environ, look)
    fail_on_errors(everything)
    ctx = run_context(everything, state_dir, lock_dir, strict, dry_run, verbose, host, coordination)
    if now is not None:
        ctx = pretended(ctx, instant, dry_run)
    schedule = this_host(everything, ctx.host)
    live = None
    if not dry_run:
        live = LiveReports()
        ctx = replace(ctx, on_done=live)
    stop = _StopOnSignal()
    report = run_once(schedule, instant, stop.install(ctx))
    render_run(report, as_json, verbose, live.handled if live else frozenset())
    if stop.signum is not None:
        return 128 + stop.signum  # 143 for SIGTERM, 130 for SIGINT, as a shell reports them
    if status == quiet.SPENT:
        quiet.keep(look, everything, schedule, report, ctx, os.environ)
    return 1 if report.failed else 0


#: How long `run` waits, once told to stop, for its tasks to end before killing them (SPEC 4.4).
STOP_GRACE_S = 30.0


class _StopOnSignal:
    """SIGTERM/SIGINT to `run`: stop starting tasks, forward the signal, SIGKILL after the grace.

    The handler only sets flags and sends signals, so the main thread carries on waiting for
    the tasks and records every outcome (``interrupted``) before `run` exits 143 / 130.
    """

    def __init__(self, grace_s: float = STOP_GRACE_S) -> None:
        self.signum: int | None = None
        self._grace_s = grace_s
        self._tracker: Tracker | None = None

    def install(self, ctx: RunContext) -> RunContext:
        """Handle SIGTERM and SIGINT from now on; return ``ctx`` with a tracker to signal."""
        import signal

        from cronctl.run.once import Tracker

        self._tracker = Tracker()
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, self._handle)
        return replace(ctx, tracker=self._tracker)

    def _handle(self, signum: int, _frame: object) -> None:
        import signal
        import threading

        tracker = self._tracker
        assert tracker is not None
        first = self.signum is None
        self.signum = signum
        tracker.stop(signum)
        if first:
            timer = threading.Timer(self._grace_s, tracker.signal_all, (signal.SIGKILL,))
            timer.daemon = True
            timer.start()


def this_host(schedule: Schedule, host: str) -> Schedule:
    """The schedule without the tasks whose `hosts` leave this machine out (SPEC 9.2)."""
    if not any(task.hosts for task in schedule.tasks):
        return schedule
    from cronctl.core.opskeys import runs_on

    return replace(schedule, tasks=tuple(t for t in schedule.tasks if runs_on(t, host)))


def work_reporting(
    ctx: RunContext, verbose: bool, output: bool
) -> tuple[RunContext, Callable[[Any], None]]:
    """`work`: failures reported as each task ends; with --output, every task's lines on
    stdout as `TASK | line` (what `journalctl -u cronctl` then shows)."""
    from cronctl.cli.render.tables import render_run

    live = LiveReports()
    ctx = replace(ctx, on_done=live)
    if output:
        from cronctl.edge.process.stream import printer

        ctx = replace(ctx, output=lambda task: printer(f"{task} | "))

    def report(result: Any) -> None:
        render_run(result, False, verbose, live.handled)
        live.forget(r.id for r in result.runs)  # `work` runs for months: keep the set small

    return ctx, report


# Failure reports printed as each task ends, not when the slowest task of the minute ends:
# a 0.1 s failure used to wait behind a sleeper, so cron's mails came late and out of order.
class LiveReports:
    """The `on_done` of a run: prints what each ending occurrence calls for."""

    def __init__(self) -> None:
        """Nothing reported yet."""
        import threading  # here: a quiet minute (execution/quiet.py) never makes one

        self._lock = threading.Lock()
        self.handled: set[str] = set()  # run ids already dealt with (printed or silenced)

    def __call__(self, task: Task, result: RunRow, kind: str | None) -> None:
        """Print a failure report or a recovery line for `result` (`kind`), or nothing."""
        with self._lock:
            if kind is not None or result.outcome in ("failed", "timeout", "error"):
                self.handled.add(result.id)  # printed now, or silenced by notify = "change"
            if kind == "failure":
                from cronctl.cli.render.tables import _failure

                _failure(result)
            elif kind == "recovered":
                from cronctl.core.model import format_utc

                print(
                    f"cronctl: task {task.name} recovered: ok for {format_utc(result.occurrence)}",
                    file=sys.stderr,
                    flush=True,
                )

    def forget(self, run_ids: Iterable[str]) -> None:
        """Drop ids whose tick has been rendered."""
        with self._lock:
            self.handled.difference_update(run_ids)
