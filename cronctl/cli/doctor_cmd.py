"""`cronctl doctor`: check this machine's set-up; exit 1 when anything needs attention."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from cronctl.cli.options import CoordOpt, FileOpt, HostOpt, LockOpt, NowOpt, StateOpt
from cronctl.cli.wiring import host_name, load_schedule, parse_instant
from cronctl.commands.doctor import doctor as run_doctor
from cronctl.edge import dirs, dirwarnings

_MARK = {"ok": "ok     ", "note": "note   ", "warning": "WARN   ", "problem": "PROBLEM"}


def doctor(
    file: FileOpt = None,
    state_dir: StateOpt = None,
    lock_dir: LockOpt = None,
    host: HostOpt = None,
    coordination: CoordOpt = None,
    now: NowOpt = None,
) -> None:
    """Check the schedule (as `check` does), directories, lock sharing, metrics_file's path,
    the schedule cache, the coordination store, the clock, and what runs cronctl here
    (crontabs, systemd units).
    Exit 1 when anything needs attention.

    \b
    Example:
      cronctl doctor -f schedules.toml
    """
    schedule = load_schedule(file)
    states, locks = dirs.data_dirs(schedule, state_dir, lock_dir, os.environ)
    url = dirs.coordination_url(schedule, coordination, os.environ)
    lock_problems = dirwarnings.lock_dir_problems(schedule, state_dir, lock_dir, os.environ)
    result = run_doctor(
        schedule, (Path(states), Path(locks)), lock_problems, url, parse_instant(now)
    )
    print(f"ok      this machine is {host_name(host)!r} in claims, locks and history")
    for finding in result.findings:
        print(f"{_MARK[finding.level]} {finding.subject}: {finding.message}")
        if finding.advice and finding.level != "ok":
            print(f"        -> {finding.advice}")
    raise typer.Exit(0 if result.ok else 1)
