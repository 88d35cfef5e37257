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
from typing import TYPE_CHECKING

from cronctl.errors import CronctlError, UsageError

if TYPE_CHECKING:
    from cronctl.core.model import Schedule
    from cronctl.execute import RunContext


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
    """Read the schedule files the flags (or CRONCTL_FILE, or the default) name."""
    from cronctl.edge.files import load_paths, schedule_paths

    return load_paths(schedule_paths(files, os.environ))


def fail_on_errors(schedule: Schedule) -> None:
    """For run/list/work: a schedule with errors stops the command (exit 2) after saying why."""
    from cronctl.cli.render import render_problems

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
    from cronctl import dirs
    from cronctl.edge.coord import open_coordinator
    from cronctl.execute import RunContext, real_clock

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
        # Once a day, not every minute: cron mails whatever `run` prints.
        if verbose or dirs.daily_notice(states, "lock-dir-not-shared"):
            print(f"cronctl: warning: {warning.message} (repeated once a day)", file=sys.stderr)
    return RunContext(
        state_dir=states,
        lock_dir=locks,
        host=host_name(host),
        pid=os.getpid(),
        env=dict(os.environ),
        clock=real_clock,
        dry_run=dry_run,
        max_parallel=schedule.settings.max_parallel,
        coord=open_coordinator(url, locks),
    )


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
    """`cronctl run`: the exit code (0, or 1 when a task failed)."""
    from cronctl.cli.render import render_run
    from cronctl.execute import run_once

    schedule = load_schedule(files)
    fail_on_errors(schedule)
    instant = parse_instant(now)
    ctx = run_context(schedule, state_dir, lock_dir, strict, dry_run, verbose, host, coordination)
    if now is not None:
        # A pretended time holds for the whole run: leases and grace are judged by it too.
        ctx = replace(ctx, clock=lambda: instant)
    report = run_once(schedule, instant, ctx)
    render_run(report, as_json, verbose)
    return 1 if report.failed else 0
