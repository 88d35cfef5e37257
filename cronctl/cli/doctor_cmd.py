"""`cronctl doctor`: check this machine's set-up; exit 1 when anything needs attention."""

from __future__ import annotations

import os

import typer

from cronctl.cli.options import NowOpt, shared
from cronctl.cli.wiring import Where, host_name, parse_instant
from cronctl.commands.doctor import doctor as run_doctor
from cronctl.edge import dirs, dirwarnings

_MARK = {"ok": "ok     ", "note": "note   ", "warning": "WARN   ", "problem": "PROBLEM"}


@shared("file", "state_dir", "lock_dir", "host", "coordination")
def doctor(where: Where, now: NowOpt = None) -> None:
    """Check the schedule (as `check` does), directories, lock sharing, metrics_file's path,
    the schedule cache, the coordination store, the clock, and what runs cronctl here
    (crontabs, systemd units).
    Exit 1 when anything needs attention.

    \b
    Example:
      cronctl doctor -f schedules.toml
    """
    schedule, states, locks = where.load()
    url = dirs.coordination_url(schedule, where.coordination, os.environ)
    lock_problems = dirwarnings.lock_dir_problems(
        schedule, where.state_dir, where.lock_dir, os.environ
    )
    result = run_doctor(schedule, (states, locks), lock_problems, url, parse_instant(now))
    print(f"ok      this machine is {host_name(where.host)!r} in claims, locks and history")
    for finding in result.findings:
        print(f"{_MARK[finding.level]} {finding.subject}: {finding.message}")
        if finding.advice and finding.level != "ok":
            print(f"        -> {finding.advice}")
    raise typer.Exit(0 if result.ok else 1)
