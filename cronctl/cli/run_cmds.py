"""`run` and `work` (a plain `cronctl run` skips typer: cli/main.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from cronctl.cli.options import JsonOpt, NowOpt, StrictOpt, VerboseOpt, shared
from cronctl.cli.wiring import (
    Where,
    fail_on_errors,
    load_schedule,
    run_command,
    run_context,
    this_host,
    work_reporting,
)
from cronctl.edge.health import parse_address
from cronctl.edge.schedfiles import load_paths
from cronctl.edge.schedpaths import schedule_paths
from cronctl.errors import UsageError
from cronctl.run.work import Worker


@shared("file", "state_dir", "lock_dir", "host", "coordination")
def run(
    where: Where,
    now: NowOpt = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would run and why not; run nothing.")
    ] = False,
    verbose: VerboseOpt = False,
    strict: StrictOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Run what is due now (call it from cron every minute). Exit 1 if a task failed.

    SIGTERM, SIGINT or SIGHUP: start nothing more, forward the signal to the running tasks,
    record them interrupted, exit 128 + the signal's number (143, 130, 129).

    \b
    Example:
      * * * * * cd /srv/app && cronctl run      (the crontab line)
      cronctl run --dry-run --now 2026-08-03T09:00:00Z
    """
    places = (where.state_dir, where.lock_dir, where.host, where.coordination)
    raise typer.Exit(run_command(where.file, now, dry_run, verbose, strict, as_json, *places))


@shared("file", "state_dir", "lock_dir", "host", "coordination")
def work(
    where: Where,
    grace: Annotated[
        float, typer.Option("--grace", help="Seconds to wait for running tasks on SIGTERM.")
    ] = 30.0,
    verbose: VerboseOpt = False,
    strict: StrictOpt = False,
    output: Annotated[
        bool,
        typer.Option("--output", help="Print each task's output lines, prefixed with its name."),
    ] = False,
    health: Annotated[
        str | None,
        typer.Option(
            "--health",
            metavar="ADDR",
            help="Serve GET /healthz (200 while the minute loop is on time, 503 once it is "
            "90s late) and GET /metrics (Prometheus) on ADDR: PORT (127.0.0.1), HOST:PORT or "
            "[IPV6]:PORT. Needs the 'health' extra.",
        ),
    ] = None,
    health_file: Annotated[
        Path | None,
        typer.Option(
            "--health-file",
            metavar="PATH",
            help="Touch PATH at start and every minute (for an exec probe); removed at stop.",
        ),
    ] = None,
) -> None:
    """Stay in the foreground and run what is due at the start of every minute.

    Tasks with on_start = true run once as it starts. SIGTERM, SIGINT or SIGHUP: start
    nothing more, forward the signal to the running tasks, record them interrupted, exit 0.

    \b
    Example:
      cronctl work --output -v
    """
    address = parse_address(health) if health is not None else None
    if health_file is not None and not str(health_file).strip():
        raise UsageError("--health-file is empty; give a file path")
    ctx = run_context(fail_on_errors(load_schedule(where.file)), where, strict, False, True)

    def paths() -> list[Path]:
        return schedule_paths(where.file, os.environ)

    ctx, report = work_reporting(ctx, verbose, output)
    worker = Worker(
        load=lambda: this_host(load_paths(paths()), ctx.host),
        paths=paths,
        ctx=ctx,
        report=report,
        grace_s=grace,
        health=address,
        health_file=health_file.absolute() if health_file is not None else None,
    )
    raise typer.Exit(worker.serve())
