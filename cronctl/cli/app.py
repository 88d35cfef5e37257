"""The typer commands: flags in, a service call, a renderer out.

The console entry point is cronctl.cli.main:main, which maps errors to exit codes and
serves the every-minute `cronctl run` without building this app at all.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cronctl import __version__
from cronctl.cli.common import (
    fail_on_errors,
    load_schedule,
    parse_instant,
    run_command,
    run_context,
)
from cronctl.errors import UsageError

if TYPE_CHECKING:
    from cronctl.core.model import Problem, Schedule

__all__ = ["app", "fail_on_errors", "load_schedule", "parse_instant"]

app = typer.Typer(
    name="cronctl",
    help="Scheduled jobs in version control: one TOML file, one crontab line, locks that hold.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

FileOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--file",
        "-f",
        help="Schedule file or directory of *.toml (repeatable). Default: $CRONCTL_FILE or "
        "./schedules.toml.",
        show_default=False,
    ),
]
NowOpt = Annotated[
    str | None,
    typer.Option(
        "--now", help="Pretend it is this instant (ISO 8601 with offset or Z).", show_default=False
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (stable keys, UTC times).")]
VerboseOpt = Annotated[bool, typer.Option("-v", "--verbose", help="Print every run.")]
StrictOpt = Annotated[
    bool, typer.Option("--strict", help="Refuse on_one_server over a local lock_dir.")
]
StateOpt = Annotated[
    Path | None,
    typer.Option(
        "--state-dir", help="History and scheduler state (default: see README).", show_default=False
    ),
]
LockOpt = Annotated[
    Path | None,
    typer.Option(
        "--lock-dir",
        help="Locks, claims and pauses (default: STATE_DIR/locks).",
        show_default=False,
    ),
]
HostOpt = Annotated[
    str | None,
    typer.Option(
        "--host",
        help="This machine's name in history, claims and locks (default: $CRONCTL_HOST, then "
        "the node name).",
        show_default=False,
    ),
]
CoordOpt = Annotated[
    str | None,
    typer.Option(
        "--coordination",
        help="postgresql:// URL of the fleet's coordination store (default: "
        "$CRONCTL_COORDINATION, then [cronctl] coordination; none: files in lock_dir).",
        show_default=False,
    ),
]


def _version(value: bool) -> None:
    if value:
        print(f"cronctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """cronctl: run the tasks of a schedule file from one crontab line."""


def _lock_dir_problems(
    schedule: Schedule, state_dir: Path | None, lock_dir: Path | None
) -> list[Problem]:
    from cronctl import dirs

    _, locks = dirs.data_dirs(schedule, state_dir, lock_dir, os.environ)
    warning = dirs.lock_dir_warning(schedule, locks, only_if_present=True)
    return [warning] if warning else []


def _recorded(
    schedule: Schedule, state_dir: Path | None, lock_dir: Path | None
) -> tuple[dict[str, object], frozenset[str]]:
    """This machine's last run per task and the operator pauses; nothing is created."""
    from cronctl import dirs
    from cronctl.edge.locks import paused_tasks

    states, locks = dirs.data_dirs(schedule, state_dir, lock_dir, os.environ)
    paused = frozenset(paused_tasks(locks))
    if not (states / "state.db").is_file():
        return {}, paused
    from cronctl.edge.paths import verify_dir
    from cronctl.edge.store import Store

    verify_dir(states)  # a state.db another user could have planted is never read

    with Store.open(states) as store:
        found = {t.name: store.last_run(t.name) for t in schedule.tasks}
    return {name: run for name, run in found.items() if run is not None}, paused


@app.command()
def check(
    file: FileOpt = None,
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings as errors.")] = False,
    fmt: Annotated[
        str, typer.Option("--format", help="text, json or github (workflow annotations).")
    ] = "text",
    now: NowOpt = None,
    state_dir: StateOpt = None,
    lock_dir: LockOpt = None,
) -> None:
    """Validate the schedule files; execute nothing. Exit 1 when problems are found."""
    from cronctl import service
    from cronctl.cli.render import render_check

    if fmt not in ("text", "json", "github"):
        raise UsageError(f"--format {fmt!r}: use text, json or github")
    schedule = load_schedule(file)
    extra = _lock_dir_problems(schedule, state_dir, lock_dir)
    result = service.check(schedule, parse_instant(now), extra, strict)
    render_check(result, fmt, len(schedule.tasks), len(schedule.files))
    raise typer.Exit(0 if result.ok else 1)


@app.command("list")
def list_(
    file: FileOpt = None,
    as_json: JsonOpt = False,
    now: NowOpt = None,
    state_dir: StateOpt = None,
    lock_dir: LockOpt = None,
) -> None:
    """Show every task with its schedule, next run and guards; then the problems."""
    from cronctl import service
    from cronctl.cli.render import render_list

    schedule = load_schedule(file)
    extra = _lock_dir_problems(schedule, state_dir, lock_dir)
    last_runs, paused = _recorded(schedule, state_dir, lock_dir)
    result = service.list_tasks(schedule, parse_instant(now), extra, last_runs, paused)
    render_list(result, as_json)
    if schedule.errors:
        raise typer.Exit(2)


@app.command("next")
def next_(
    name: Annotated[str | None, typer.Argument(help="Task name.", show_default=False)] = None,
    count: Annotated[int, typer.Option("-n", "--count", min=1, max=1000)] = 5,
    after: Annotated[str | None, typer.Option("--after", help="Start after this instant.")] = None,
    cron: Annotated[str | None, typer.Option("--cron", help="An ad-hoc expression.")] = None,
    tz: Annotated[str, typer.Option("--tz", help="Time zone for --cron.")] = "UTC",
    file: FileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The next occurrences of a task, or of an expression given with --cron."""
    from cronctl import service
    from cronctl.cli.render import render_next

    start = parse_instant(after, "--after")
    if (name is None) == (cron is None):
        raise UsageError("give a task NAME or --cron EXPR (one of them)")
    if cron is not None:
        result = service.next_for_expression(cron, tz, start, count)
    else:
        assert name is not None
        result = service.next_for_task(load_schedule(file), name, start, count)
    render_next(result, as_json, local=True)


@app.command()
def due(file: FileOpt = None, now: NowOpt = None, as_json: JsonOpt = False) -> None:
    """The tasks whose schedule names this minute (pure: no state, no locks)."""
    from cronctl import service
    from cronctl.cli.render import render_due

    render_due(service.due(load_schedule(file), parse_instant(now)), as_json)


@app.command()
def init(
    path: Annotated[Path, typer.Argument(help="Where to write it.")] = Path("schedules.toml"),
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Write a commented starter schedule file."""
    from cronctl import service

    written = service.init(path, force)
    print(f"wrote {written}; check it with: cronctl check -f {written}", file=sys.stderr)


@app.command()
def run(
    file: FileOpt = None,
    now: NowOpt = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would run and why not; run nothing.")
    ] = False,
    verbose: VerboseOpt = False,
    strict: StrictOpt = False,
    as_json: JsonOpt = False,
    state_dir: StateOpt = None,
    lock_dir: LockOpt = None,
    host: HostOpt = None,
    coordination: CoordOpt = None,
) -> None:
    """Run what is due now (call it from cron every minute). Exit 1 if a task failed."""
    raise typer.Exit(
        run_command(
            file, now, dry_run, verbose, strict, as_json, state_dir, lock_dir, host, coordination
        )
    )


@app.command()
def work(
    file: FileOpt = None,
    grace: Annotated[
        float, typer.Option("--grace", help="Seconds to wait for running tasks on SIGTERM.")
    ] = 30.0,
    verbose: VerboseOpt = False,
    strict: StrictOpt = False,
    state_dir: StateOpt = None,
    lock_dir: LockOpt = None,
    host: HostOpt = None,
    coordination: CoordOpt = None,
) -> None:
    """Stay in the foreground and run what is due at the start of every minute."""
    from cronctl.cli.render import render_run
    from cronctl.edge.files import load_paths, schedule_paths
    from cronctl.work import Worker

    schedule = load_schedule(file)
    fail_on_errors(schedule)
    ctx = run_context(
        schedule, state_dir, lock_dir, strict, False, True, host=host, coordination=coordination
    )

    def paths() -> list[Path]:
        return schedule_paths(file, os.environ)

    worker = Worker(
        load=lambda: load_paths(paths()),
        paths=paths,
        ctx=ctx,
        report=lambda report: render_run(report, False, verbose),
        grace_s=grace,
    )
    raise typer.Exit(worker.serve())
