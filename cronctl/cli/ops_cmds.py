"""Commands over recorded state: status, history, logs, pause, resume."""

from __future__ import annotations

import codecs
import os
import pwd
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from cronctl.cli.options import AllOpt, FleetOpt, JsonOpt, MaybeNameArg, NameArg, NowOpt, shared
from cronctl.cli.render.runs import render_problems, visible
from cronctl.cli.render.tables import render_fleet_status, render_history, render_status
from cronctl.cli.wiring import Where, host_name, parse_instant
from cronctl.commands import operate
from cronctl.coord.history import fleet_history_of
from cronctl.core.runs import UNFINISHED
from cronctl.errors import UsageError


@shared("file", "state_dir", "lock_dir", "coordination", "host")
def status(
    where: Where,
    as_json: JsonOpt = False,
    now: NowOpt = None,
    fleet: FleetOpt = False,
    check: Annotated[
        bool, typer.Option("--check", help="Exit 1 when a task is failing or overdue.")
    ] = False,
    everything: AllOpt = False,
) -> None:
    """Per task of the loaded schedule (--all: also those only history knows): last run,
    outcome (a manual run or a retry says so), duration, next run, failures in a row, missed,
    and in NOTE the pause (who, since when, why) or since when it is overdue.

    \b
    Example:
      cronctl status --check
    """
    schedule, states, locks = where.load()
    coord = where.coordinator(schedule, locks, reads_only=True)
    if fleet:
        render_fleet_status(operate.fleet_status(schedule, coord), as_json)
        return
    instant = parse_instant(now)
    result = operate.status(schedule, states, coord, instant, host_name(where.host), everything)
    render_status(result, as_json, instant)
    # A probe must not pass on a directory nothing ever ran with: a wrong --state-dir.
    fresh = _say_if_nothing_ran(states, ": --check fails until something has" if check else "")
    if schedule.errors:  # as `list`: the good tasks shown, but a broken file never exits 0
        render_problems(schedule.errors)
        raise typer.Exit(2)
    if check and fresh:
        raise typer.Exit(1)
    if check and result.alarming:
        names = ", ".join(r.name for r in result.alarming)
        print(f"cronctl: failing or overdue: {names}", file=sys.stderr)
        raise typer.Exit(1)


@shared("file", "state_dir", "lock_dir", "coordination")
def history(
    name: MaybeNameArg = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", metavar="N", min=1, max=100000, help="At most N runs.")
    ] = 20,
    *,
    where: Where,
    as_json: JsonOpt = False,
    fleet: FleetOpt = False,
    task: Annotated[
        str | None,
        typer.Option("--task", metavar="NAME", help="Only this task (the same as NAME)."),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(
            "--host",
            metavar="NAME",
            help="Only the runs machine NAME recorded (with --fleet: in the store).",
        ),
    ] = None,
    failed: Annotated[
        bool,
        typer.Option("--failed", help="Only failures: failed, timeout, error (as FAILS counts)."),
    ] = False,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="TIME",
            help="Only occurrences at or after TIME (ISO 8601 with an offset or Z, e.g. "
            "2026-08-03T09:00:00Z).",
        ),
    ] = None,
    everything: AllOpt = False,
) -> None:
    """Past runs on this machine (--fleet: on every machine), newest first; only of the
    loaded schedule's tasks unless --all. The filters combine, with --json and --fleet too.

    \b
    Example:
      cronctl history backup --failed --since 2026-08-01T00:00:00Z
    """
    if name is not None and task is not None and name != task:
        raise UsageError(f"history was given two tasks, {name!r} and --task {task!r}: give one")
    which = operate.HistoryFilter(
        task=task if task is not None else name,
        everything=everything,
        host=host,
        failed=failed,
        since=None if since is None else parse_instant(since, "--since"),
    )
    schedule, states, locks = where.load()
    now = parse_instant(None)  # short times on a narrow terminal are said against today
    zones = {task.name: task.zone for task in schedule.tasks}
    if fleet:
        reader = fleet_history_of(where.coordinator(schedule, locks, reads_only=True))
        runs = reader.fleet_history(which.task, host, limit, failed=failed, since=which.since)
        render_history(runs, as_json, now, zones, hosts=True)
        return
    render_history(operate.history(states, limit, schedule, which), as_json, now, zones)
    _say_if_nothing_ran(states)


def _say_if_nothing_ran(states: Path, then: str = "") -> bool:
    """Say so (and True) when nothing has run with the state dir: a wrong --state-dir looks
    the same (docs/commands.md#cronctl-status-history-logs)."""
    if not operate.nothing_ran(states):
        return False
    print(f"cronctl: nothing has run with state dir {states} yet{then}", file=sys.stderr)
    return True


@shared("file_long", "state_dir", "lock_dir")
def logs(
    name: NameArg,
    run: Annotated[
        str | None,
        typer.Option("--run", metavar="ID", help="A run id from `history`. Default: the last run."),
    ] = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="While the run is going, print its output as it comes; stop when it ends "
            "(or on Ctrl-C).",
        ),
    ] = False,
    tail: Annotated[
        int | None, typer.Option("--tail", "-n", metavar="N", min=0, help="Only the last N lines.")
    ] = None,
    *,
    where: Where,
) -> None:
    """The captured output of the task's last run (or of --run ID).

    -f is --follow, as in tail -f; --file has no short name here.

    \b
    Example:
      cronctl logs backup --tail 20
      cronctl logs backup -f
    """
    schedule, states, _ = where.load()
    result = operate.logs(states, name, run, schedule, unfinished=follow and run is None)
    if result is None:
        fresh = operate.nothing_ran(states)
        why = f"nothing has run with state dir {states} yet" if fresh else f"none in {states}"
        print(f"cronctl: {name} never ran: {why}", file=sys.stderr)
        return
    going = follow and result.run.outcome in UNFINISHED
    state = f"{result.run.outcome}; following, Ctrl-C to stop" if going else result.run.outcome
    print(f"# {result.run.task} {result.run.id} {state}", file=sys.stderr)
    if result.path is None and not going:
        print("# the run printed nothing (no log file is kept for a quiet run)", file=sys.stderr)
    sys.stdout.flush()
    follower = operate.Follow(states, result, tail) if going else None
    chunks = follower.chunks() if follower else result.chunks(tail)
    try:
        whole = _copy_out(chunks, flush=going)
    except KeyboardInterrupt:
        print(file=sys.stderr)
        raise typer.Exit(130) from None
    if follower is not None and whole:
        print(f"# {_ending(follower)}", file=sys.stderr)


def _copy_out(chunks: Iterator[bytes], flush: bool) -> bool:
    """`chunks` to stdout: escapes shown, not obeyed, on a terminal (docs/guarantees.md), the
    exact bytes to a pipe; False when the reader closed the pipe first."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace") if sys.stdout.isatty() else None
    try:
        for chunk in chunks:  # streamed: a huge log never sits in memory whole
            if decoder is None:
                sys.stdout.buffer.write(chunk)
            else:
                sys.stdout.write(visible(decoder.decode(chunk)))
            if flush:
                sys.stdout.flush()  # its buffer too
        sys.stdout.flush()
    except BrokenPipeError:
        # `cronctl logs NAME | head`: done, like cat; stdout to /dev/null, or the final flush
        # fails on it again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return False
    return True


def _ending(follower: operate.Follow) -> str:
    run = follower.run
    if follower.owner_gone:
        return (
            f"run {run.id}: the cronctl running it (pid {run.pid}) is gone; its outcome is "
            "unknown until the next `cronctl run` records it"
        )
    code = f" (exit {run.exit_code})" if run.exit_code not in (None, 0) else ""
    return f"run {run.id} ended: {run.outcome}{code}"


@shared("file", "state_dir", "lock_dir", "host", "coordination")
def pause(
    name: NameArg,
    reason: Annotated[
        str | None, typer.Option("--reason", metavar="TEXT", help="Why; shown by status.")
    ] = None,
    *,
    where: Where,
) -> None:
    """Pause a task on every machine that shares the lock directory (or coordination store).

    \b
    Example:
      cronctl pause backup --reason 'storage migration'
    """
    schedule, _, locks = where.load()
    coord = where.coordinator(schedule, locks)
    # Who pauses: cron, `sudo -i` and containers often set neither variable.
    user = os.environ.get("USER") or os.environ.get("LOGNAME") or account(os.getuid())
    operate.pause(schedule, coord, name, reason, parse_instant(None), user)
    print(f"paused {name} ({coord.describe()}); `cronctl resume {name}` undoes it", file=sys.stderr)


def account(uid: int) -> str:
    """The name of account `uid`, or the number of one with none (a container's --user 12345)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@shared("file", "state_dir", "lock_dir", "coordination")
def resume(name: NameArg, *, where: Where) -> None:
    """Resume a paused task; it realigns to its next occurrence, nothing is caught up.

    \b
    Example:
      cronctl resume backup
    """
    schedule, _, locks = where.load()
    if operate.resume(schedule, where.coordinator(schedule, locks), name):
        print(f"resumed {name}", file=sys.stderr)
    else:
        print(f"{name} was not paused", file=sys.stderr)
