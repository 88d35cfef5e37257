"""Commands over recorded state: status, history, logs, pause, resume."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cronctl.cli.app import (
    FileOpt,
    HostOpt,
    JsonOpt,
    LockOpt,
    NowOpt,
    StateOpt,
    app,
    load_schedule,
    parse_instant,
)

if TYPE_CHECKING:
    from cronctl.core.model import Schedule

NameArg = Annotated[str, typer.Argument(help="Task name.", show_default=False)]


def _dirs(
    file: list[Path] | None, state_dir: Path | None, lock_dir: Path | None
) -> tuple[Schedule, Path, Path]:
    from cronctl import dirs

    schedule = load_schedule(file)
    states, locks = dirs.data_dirs(schedule, state_dir, lock_dir, os.environ)
    return schedule, states, locks


@app.command()
def status(
    file: FileOpt = None,
    as_json: JsonOpt = False,
    now: NowOpt = None,
    state_dir: StateOpt = None,
    lock_dir: LockOpt = None,
    host: HostOpt = None,
    check: Annotated[
        bool, typer.Option("--check", help="Exit 1 when a task is failing or overdue.")
    ] = False,
) -> None:
    """Per task: last run, outcome, duration, next run, paused, failures in a row, missed,
    overdue."""
    from cronctl import operate
    from cronctl.cli.common import host_name
    from cronctl.cli.render import render_status

    schedule, states, locks = _dirs(file, state_dir, lock_dir)
    result = operate.status(schedule, states, locks, parse_instant(now), host_name(host))
    render_status(result, as_json)
    if check and result.alarming:
        names = ", ".join(r.task.name for r in result.alarming)
        print(f"cronctl: failing or overdue: {names}", file=sys.stderr)
        raise typer.Exit(1)


@app.command()
def history(
    name: Annotated[str | None, typer.Argument(help="Only this task.", show_default=False)] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=100000)] = 20,
    file: FileOpt = None,
    as_json: JsonOpt = False,
    state_dir: StateOpt = None,
    lock_dir: LockOpt = None,
) -> None:
    """Past runs on this machine, newest first."""
    from cronctl import operate
    from cronctl.cli.render import render_history

    _, states, _ = _dirs(file, state_dir, lock_dir)
    render_history(operate.history(states, name, limit), as_json)


@app.command()
def logs(
    name: NameArg,
    run: Annotated[str | None, typer.Option("--run", help="A run id from `history`.")] = None,
    file: FileOpt = None,
    state_dir: StateOpt = None,
    lock_dir: LockOpt = None,
) -> None:
    """The captured output of the task's last run (or of --run ID)."""
    from cronctl import operate

    _, states, _ = _dirs(file, state_dir, lock_dir)
    result = operate.logs(states, name, run)
    print(f"# {result.run.task} {result.run.id} {result.run.outcome}", file=sys.stderr)
    sys.stdout.flush()
    try:
        for chunk in result.chunks():  # streamed: a huge log never sits in memory whole
            sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        # `cronctl logs NAME | head` closed the pipe: done, like cat. Point stdout at
        # /dev/null so the interpreter's final flush does not fail on it again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


@app.command()
def pause(
    name: NameArg,
    reason: Annotated[str | None, typer.Option("--reason", help="Why; shown by status.")] = None,
    file: FileOpt = None,
    state_dir: StateOpt = None,
    lock_dir: LockOpt = None,
) -> None:
    """Pause a task on every machine that shares the lock directory."""
    from cronctl import operate

    schedule, _, locks = _dirs(file, state_dir, lock_dir)
    user = os.environ.get("USER") or os.environ.get("LOGNAME") or str(os.getuid())
    operate.pause(schedule, locks, name, reason, parse_instant(None), os.uname().nodename, user)
    print(f"paused {name} (lock_dir {locks}); `cronctl resume {name}` undoes it", file=sys.stderr)


@app.command()
def resume(
    name: NameArg,
    file: FileOpt = None,
    state_dir: StateOpt = None,
    lock_dir: LockOpt = None,
) -> None:
    """Resume a paused task; it realigns to its next occurrence, nothing is caught up."""
    from cronctl import operate

    schedule, _, locks = _dirs(file, state_dir, lock_dir)
    if operate.resume(schedule, locks, name):
        print(f"resumed {name}", file=sys.stderr)
    else:
        print(f"{name} was not paused", file=sys.stderr)
