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

from cronctl._version import __version__
from cronctl.cli.complete import task_names
from cronctl.cli.wiring import (
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
    epilog="Environment: CRONCTL_FILE (schedule files, ':'-separated), CRONCTL_STATE_DIR, "
    "CRONCTL_LOCK_DIR, CRONCTL_HOST (this machine's name), CRONCTL_ENV=production (run refuses "
    "on_one_server over a local lock_dir), NO_COLOR, CRONCTL_DEBUG=1 (tracebacks).",
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
        metavar="FILE",
        help="Schedule file or directory of *.toml (repeatable). Default: $CRONCTL_FILE "
        "(':'-separated), else ./schedules.toml.",
        show_default=False,
    ),
]
NowOpt = Annotated[
    str | None,
    typer.Option(
        "--now",
        metavar="TIME",
        help="Pretend it is this instant (ISO 8601 with offset or Z). Default: the clock.",
        show_default=False,
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
        "--state-dir",
        metavar="DIR",
        help="History and scheduler state. Default: $CRONCTL_STATE_DIR, else [cronctl] "
        "state_dir, else /var/lib/cronctl for root or $XDG_STATE_HOME/cronctl "
        "(~/.local/state/cronctl).",
        show_default=False,
    ),
]
LockOpt = Annotated[
    Path | None,
    typer.Option(
        "--lock-dir",
        metavar="DIR",
        help="Locks, claims and pauses. Default: $CRONCTL_LOCK_DIR, else [cronctl] lock_dir, "
        "else STATE_DIR/locks.",
        show_default=False,
    ),
]
HostOpt = Annotated[
    str | None,
    typer.Option(
        "--host",
        metavar="NAME",
        help="This machine's name in history, claims and locks (default: $CRONCTL_HOST, then "
        "the node name).",
        show_default=False,
    ),
]
CoordOpt = Annotated[
    str | None,
    typer.Option(
        "--coordination",
        metavar="URL",
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
    from cronctl.edge import dirs

    _, locks = dirs.data_dirs(schedule, state_dir, lock_dir, os.environ)
    # A named lock_dir (flag, environment, file) may be a mount this machine (a CI runner)
    # lacks: judge it only where it exists. The default, STATE_DIR/locks, is local on every
    # machine: judge it even before `run` creates it, by the file system it would be on.
    named = (
        lock_dir is not None
        or bool(os.environ.get("CRONCTL_LOCK_DIR"))
        or schedule.settings.lock_dir is not None
    )
    warning = dirs.lock_dir_warning(schedule, locks, only_if_present=named)
    return [warning] if warning else []


def _recorded(
    schedule: Schedule, state_dir: Path | None, lock_dir: Path | None
) -> tuple[dict[str, object], frozenset[str]]:
    """This machine's last run per task and the operator pauses; nothing is created."""
    from cronctl.coord.files.locks import paused_tasks
    from cronctl.edge import dirs

    states, locks = dirs.data_dirs(schedule, state_dir, lock_dir, os.environ)
    paused = frozenset(paused_tasks(locks))
    if not (states / "state.db").is_file():
        return {}, paused
    from cronctl.edge.paths import verify_dir
    from cronctl.edge.state.store import Store

    verify_dir(states)  # a state.db another user could have planted is never read

    with Store.open(states) as store:
        found = {t.name: store.last_run(t.name) for t in schedule.tasks}
    return {name: run for name, run in found.items() if run is not None}, paused


@app.command()
def check(
    file: FileOpt = None,
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings as errors.")] = False,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="[text|json|github]",
            help="text, json, or github (workflow annotations).",
        ),
    ] = "text",
    now: NowOpt = None,
    state_dir: StateOpt = None,
    lock_dir: LockOpt = None,
    diff: Annotated[
        str | None,
        typer.Option(
            "--diff",
            metavar="REF",
            help="Also compare with the files at git revision REF: tasks added, removed, "
            "renamed, changed, and the runs gained and lost in the next 14 days. If a file at "
            "REF has an error, no diff is shown and that is said (the exit code stays the "
            "work tree's).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Validate the schedule files; execute nothing. Exit 1 when problems are found."""
    from cronctl.cli.render.tables import render_check
    from cronctl.commands import schedule as service

    if fmt not in ("text", "json", "github"):
        raise UsageError(f"--format {fmt!r}: use text, json or github")
    schedule = load_schedule(file)
    extra = _lock_dir_problems(schedule, state_dir, lock_dir)
    result = service.check(schedule, parse_instant(now), extra, strict)
    if diff is not None:
        from cronctl.cli.view_cmds import check_with_diff

        check_with_diff(result, schedule, file, diff, parse_instant(now), fmt)
    else:
        render_check(result, fmt, len(schedule.tasks), len(schedule.files))
    raise typer.Exit(0 if result.ok else 1)


@app.command("list")
def list_(
    file: FileOpt = None,
    as_json: JsonOpt = False,
    now: NowOpt = None,
    state_dir: StateOpt = None,
    lock_dir: LockOpt = None,
    local: Annotated[
        bool, typer.Option("--local", help="Show times in each task's own zone, not UTC.")
    ] = False,
    host: HostOpt = None,
) -> None:
    """Show every task with its schedule, next run and guards; then the problems."""
    from cronctl.cli.render.tables import render_list
    from cronctl.cli.wiring import host_name, load_cached
    from cronctl.commands import schedule as service

    schedule = load_cached(file)
    extra = _lock_dir_problems(schedule, state_dir, lock_dir)
    last_runs, paused = _recorded(schedule, state_dir, lock_dir)
    result = service.list_tasks(
        schedule, parse_instant(now), extra, last_runs, paused, host_name(host)
    )
    render_list(result, as_json, local)
    if schedule.errors:
        raise typer.Exit(2)


@app.command("next")
def next_(
    name: Annotated[
        str | None,
        typer.Argument(
            metavar="[NAME]", help="Task name.", show_default=False, autocompletion=task_names
        ),
    ] = None,
    count: Annotated[
        int, typer.Option("-n", "--count", metavar="N", min=1, max=1000, help="How many (1-1000).")
    ] = 5,
    after: Annotated[
        str | None,
        typer.Option(
            "--after",
            metavar="TIME",
            help="Start after this instant (ISO 8601). Default: now.",
            show_default=False,
        ),
    ] = None,
    cron: Annotated[
        str | None,
        typer.Option(
            "--cron", metavar="EXPR", help="An ad-hoc 5-field expression.", show_default=False
        ),
    ] = None,
    tz: Annotated[
        str,
        typer.Option(
            "--tz", metavar="ZONE", help="Time zone for --cron: UTC, +HH:MM or an IANA name."
        ),
    ] = "UTC",
    misfire: Annotated[
        str,
        typer.Option(
            "--misfire",
            metavar="POLICY",
            help="Policy for --cron: coalesce, catch-up or skip (how many runs after a DST gap).",
        ),
    ] = "coalesce",
    file: FileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The next occurrences of a task, or of an expression given with --cron."""
    from cronctl.cli.render.tables import render_next
    from cronctl.commands import schedule as service

    start = parse_instant(after, "--after")
    if (name is None) == (cron is None):
        raise UsageError("give a task NAME or --cron EXPR (one of them)")
    if cron is not None:
        from cronctl.core.model import MISFIRE_POLICIES

        if misfire not in MISFIRE_POLICIES:
            raise UsageError(f"--misfire {misfire!r}: use one of {', '.join(MISFIRE_POLICIES)}")
        result = service.next_for_expression(cron, tz, start, count, misfire)
    else:
        assert name is not None
        schedule = load_schedule(file)
        result = service.next_for_task(schedule, name, start, count)
        _say_if_paused(schedule, name)
    render_next(result, as_json, local=True)


def _say_if_paused(schedule: Schedule, name: str) -> None:
    """`next` lists the times a paused task would run; say on stderr that it will not."""
    task = schedule.task(name)
    if task.paused:
        where = f"paused = true at {task.source}:{task.line}"
    else:
        from cronctl.coord.files.locks import paused_tasks

        _, locks = _data_dirs(schedule)
        if name not in paused_tasks(locks):
            return
        where = f"paused by `cronctl pause`; `cronctl resume {name}` undoes it"
    print(f"note: {name} is paused ({where}): it runs at none of these times", file=sys.stderr)


def _data_dirs(schedule: Schedule) -> tuple[Path, Path]:
    from cronctl.edge import dirs

    return dirs.data_dirs(schedule, None, None, os.environ)


@app.command()
def due(file: FileOpt = None, now: NowOpt = None, as_json: JsonOpt = False) -> None:
    """The tasks whose schedule names this minute (pure: no state, no locks)."""
    from cronctl.cli.render.tables import render_due
    from cronctl.commands import schedule as service

    render_due(service.due(load_schedule(file), parse_instant(now)), as_json)


@app.command()
def init(
    path: Annotated[
        Path, typer.Argument(metavar="[FILE]", help="Where to write it (parents are created).")
    ] = Path("schedules.toml"),
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Replace an existing file (a link there is replaced, not followed)."
        ),
    ] = False,
) -> None:
    """Write a commented starter schedule file."""
    from cronctl.commands import schedule as service

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
    output: Annotated[
        bool,
        typer.Option("--output", help="Print each task's output lines, prefixed with its name."),
    ] = False,
) -> None:
    """Stay in the foreground and run what is due at the start of every minute."""
    from cronctl.edge.paths import schedule_paths
    from cronctl.edge.schedfiles import load_paths
    from cronctl.run.work import Worker

    schedule = load_schedule(file)
    fail_on_errors(schedule)
    ctx = run_context(
        schedule, state_dir, lock_dir, strict, False, True, host=host, coordination=coordination
    )

    def paths() -> list[Path]:
        return schedule_paths(file, os.environ)

    from cronctl.cli.wiring import this_host, work_reporting

    ctx, report = work_reporting(ctx, verbose, output)
    worker = Worker(
        load=lambda: this_host(load_paths(paths()), ctx.host),
        paths=paths,
        ctx=ctx,
        report=report,
        grace_s=grace,
    )
    raise typer.Exit(worker.serve())
