"""`check`, `list`, `next`, `due` and `init`: the schedule itself, before anything runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from cronctl.cli.options import FileOpt, JsonOpt, MaybeNameArg, NowOpt, shared
from cronctl.cli.render.diff import diff_github, diff_json, diff_text
from cronctl.cli.render.runs import emit_json
from cronctl.cli.render.tables import check_json, render_check, render_due, render_list, render_next
from cronctl.cli.wiring import Where, host_name, load_cached, load_schedule, parse_instant
from cronctl.commands import schedule as service
from cronctl.coord.port import StoreUnavailable
from cronctl.core.model import DEFAULT_MISFIRE, MISFIRE_POLICIES, Schedule
from cronctl.core.warncodes import TASK_WARNINGS
from cronctl.edge import dirwarnings
from cronctl.edge.safefiles import verify_dir
from cronctl.edge.state.store import Store
from cronctl.errors import UsageError


def _recorded(where: Where, schedule: Schedule) -> tuple[dict[str, object], frozenset[str]]:
    """This machine's last run per task and the operator pauses; nothing is created."""
    states, locks = where.dirs(schedule)
    paused = frozenset(_operator_pauses(where, schedule, locks))
    if not (states / "state.db").is_file():
        return {}, paused
    verify_dir(states)  # a state.db another user could have planted is never read
    with Store.open(states) as store:
        found = {t.name: store.last_run(t.name) for t in schedule.tasks}
    return {name: run for name, run in found.items() if run is not None}, paused


@shared("file", "state_dir", "lock_dir")
def check(
    where: Where,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 on warnings too.")] = False,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="[text|json|github]",
            help="text, json, or github (workflow annotations).",
        ),
    ] = "text",
    now: NowOpt = None,
    diff: Annotated[
        str | None,
        typer.Option(
            "--diff",
            metavar="REF",
            help="Also compare with the files at git revision REF: tasks added, removed, "
            "renamed, changed, and the runs gained and lost in the next 14 days. If a file at "
            "REF has an error, no diff is shown and that is said (the exit code stays the "
            "work tree's).",
        ),
    ] = None,
) -> None:
    """Validate the schedule files; execute nothing. Exit 1 when problems are found.

    The files together may hold 10 MiB and 50,000 tasks (docs/schedule-file.md, Limits).

    \b
    Example:
      cronctl check --strict
      cronctl check --diff origin/main
    """
    if fmt not in ("text", "json", "github"):
        raise UsageError(f"--format {fmt!r}: use text, json or github")
    schedule = load_schedule(where.file)
    extra = dirwarnings.lock_dir_problems(schedule, where.state_dir, where.lock_dir, os.environ)
    extra += dirwarnings.metrics_file_problems(schedule)
    instant = parse_instant(now)
    result = service.check(schedule, instant, extra, strict)
    said: dict[str, object] = {}
    lines: list[str] = []
    if diff is not None:
        try:
            changes = service.diff_against(diff, where.file, schedule, instant)
        except service.UnreadableRevision as exc:
            # The work tree is checked as usual and its exit status stands: a broken old file
            # must not block the change that fixes it. Only the diff is refused, and said so.
            said, lines = {"diff": None, "diff_error": str(exc)}, [str(exc)]
        else:
            said = {"diff": diff_json(changes, diff)}
            lines = diff_github(changes) if fmt == "github" else diff_text(changes, diff)
    if fmt == "json":
        emit_json({**check_json(result), **said})
    else:
        render_check(result, fmt, schedule.tables, len(schedule.files))
        for line in lines:
            print(line)
    warned = any(p.severity == "warning" and p.code in TASK_WARNINGS for p in result.problems)
    if fmt == "text" and not result.ok and warned:
        # --strict failed on warnings: say how to accept the ones read, or CI fails for ever.
        print(
            "hint: a warning you have read and accept: add its code (in brackets) to the task's "
            "ignore_warnings, or to [defaults] for the whole file (docs/schedule-file.md#warnings)",
            file=sys.stderr,
        )
    named = any(p.message.startswith("'project'") for p in result.problems)
    if fmt == "text" and schedule.settings.project is None and schedule.tasks and not named:
        # A hint, not a warning: --strict must not fail every schedule written before projects.
        print(
            'hint: no project name; add project = "NAME" to [cronctl] so this schedule\'s state, '
            "history, locks and claims are its own on a machine or fleet shared with other "
            "schedules (docs/schedule-file.md#projects)",
            file=sys.stderr,
        )
    raise typer.Exit(0 if result.ok else 1)


@shared("file", "state_dir", "lock_dir", "host")
def list_(
    where: Where,
    as_json: JsonOpt = False,
    now: NowOpt = None,
    local: Annotated[
        bool, typer.Option("--local", help="Show times in each task's own zone, not UTC.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="Also print the warnings (as `check` does).")
    ] = False,
) -> None:
    """Show every task with its schedule, next run and guards; then the schedule's errors
    (and with -v its warnings: `cronctl check` is where they are reviewed).

    \b
    Example:
      cronctl list --local
    """
    schedule = load_cached(where.file)
    extra = dirwarnings.lock_dir_problems(schedule, where.state_dir, where.lock_dir, os.environ)
    last_runs, paused = _recorded(where, schedule)
    instant = parse_instant(now)
    result = service.list_tasks(schedule, instant, extra, last_runs, paused, host_name(where.host))
    render_list(result, as_json, instant, local, verbose)
    if schedule.errors:
        raise typer.Exit(2)


def next_(
    name: MaybeNameArg = None,
    count: Annotated[
        int, typer.Option("-n", "--count", metavar="N", min=1, max=1000, help="How many (1-1000).")
    ] = 5,
    after: Annotated[
        str | None,
        typer.Option(
            "--after", metavar="TIME", help="Start after this instant (ISO 8601). Default: now."
        ),
    ] = None,
    cron: Annotated[
        str | None, typer.Option("--cron", metavar="EXPR", help="An ad-hoc 5-field expression.")
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
    ] = DEFAULT_MISFIRE,
    file: FileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The next occurrences of a task, or of an expression given with --cron.

    \b
    Example:
      cronctl next backup -n 3
      cronctl next --cron '30 2 * * *' --tz Europe/Berlin
    """
    start = parse_instant(after, "--after")
    if (name is None) == (cron is None):
        raise UsageError("give a task NAME or --cron EXPR (one of them)")
    if cron is not None:
        if misfire not in MISFIRE_POLICIES:
            raise UsageError(f"--misfire {misfire!r}: use one of {', '.join(MISFIRE_POLICIES)}")
        result = service.next_for_expression(cron, tz, start, count, misfire)
    else:
        assert name is not None
        schedule = load_schedule(file)
        result = service.next_for_task(schedule, name, start, count)
        _say_if_paused(Where(file), schedule, name)
    render_next(result, as_json)


def _say_if_paused(where: Where, schedule: Schedule, name: str) -> None:
    """Say that a paused task runs at none of the times `next` lists."""
    task = schedule.task(name)
    if task.paused:
        how = f"paused = true at {task.source}:{task.line}"
    else:
        if name not in _operator_pauses(where, schedule, where.dirs(schedule)[1]):
            return
        how = f"paused by `cronctl pause`; `cronctl resume {name}` undoes it"
    print(f"note: {name} is paused ({how}): it runs at none of these times", file=sys.stderr)


def _operator_pauses(where: Where, schedule: Schedule, locks: Path) -> set[str]:
    """The tasks paused by `cronctl pause`; none when the store cannot be asked: these views
    only inform."""
    coord = where.coordinator(schedule, locks, reads_only=True)
    try:
        return set(coord.paused_tasks())
    except StoreUnavailable:
        return set()
    finally:
        coord.close()


def due(file: FileOpt = None, now: NowOpt = None, as_json: JsonOpt = False) -> None:
    """The tasks whose schedule names this minute (pure: no state, no locks).

    \b
    Example:
      cronctl due --now 2026-08-03T09:00:00Z
    """
    render_due(service.due(load_schedule(file), parse_instant(now)), as_json)


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
    """Write a commented starter schedule file.

    \b
    Example:
      cronctl init schedules.toml
    """
    written = service.init(path, force)
    print(f"wrote {written}; check it with: cronctl check -f {written}", file=sys.stderr)
