"""`cronctl timeline` and `cronctl export`: the schedule as a picture, or another tool's files.

Registered on the typer app like `import` (cronctl.cli.import_cmd); nothing here is on
the path of `cronctl run`.
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cronctl.cli.app import FileOpt, NowOpt
from cronctl.cli.wiring import load_schedule, parse_instant
from cronctl.errors import UsageError

if TYPE_CHECKING:
    from cronctl.commands.schedule import CheckResult
    from cronctl.core.model import Schedule


def register(app: typer.Typer) -> None:
    """Add `timeline` and `export` to `app`."""
    app.command("timeline")(timeline_command)
    from cronctl.cli.export_cmds import export_command

    app.command("export")(export_command)


def timeline_command(
    days: Annotated[
        int, typer.Option("--days", min=1, max=31, help="How many days, from today (UTC), 1-31.")
    ] = 7,
    svg: Annotated[
        Path | None,
        typer.Option(
            "--svg",
            metavar="FILE",
            help="Also write the picture as SVG to FILE ('-' for stdout).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON.")] = False,
    file: FileOpt = None,
    now: NowOpt = None,
) -> None:
    """When tasks fire over the next days: runs per hour as a heat map, then a row per task."""
    from cronctl.cli.render.tables import emit_json
    from cronctl.cli.render.timeline import (
        render_timeline_text,
        timeline_json,
        timeline_svg,
        use_colour,
    )
    from cronctl.core.calendar import build_timeline

    schedule = load_schedule(file)
    timeline = build_timeline(schedule.tasks, parse_instant(now), days)
    if svg is not None:
        picture = timeline_svg(timeline)
        if str(svg) == "-":
            sys.stdout.write(picture)
            return
        try:
            svg.write_text(picture, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {svg}: {exc.strerror or exc}") from None
        print(f"wrote {svg}", file=sys.stderr)
    if as_json:
        emit_json(timeline_json(timeline))
    elif svg is None:
        render_timeline_text(timeline, sys.stdout, use_colour(sys.stdout))
    if schedule.errors:
        from cronctl.cli.render.tables import render_problems

        render_problems(schedule.errors)
        raise typer.Exit(2)


def check_with_diff(
    result: CheckResult,
    schedule: Schedule,
    given: list[Path] | None,
    ref: str,
    now: datetime,
    fmt: str,
) -> None:
    """`check --diff REF`: the problems as usual, then what the change does to the schedule."""
    from cronctl.cli.render.diff import diff_github, diff_json, diff_text
    from cronctl.cli.render.tables import emit_json, problem_json, render_check
    from cronctl.commands.review import UnreadableRevision, diff_against

    try:
        diff = diff_against(ref, given, schedule, now)
    except UnreadableRevision as exc:
        # The work tree is checked as usual and its exit status stands: a broken old file
        # must not block the change that fixes it. Only the diff is refused, and said so.
        if fmt == "json":
            problems = [problem_json(p) for p in result.problems]
            emit_json({"ok": result.ok, "problems": problems, "diff": None, "diff_error": str(exc)})
            return
        render_check(result, fmt, len(schedule.tasks), len(schedule.files))
        print(str(exc))
        return
    if fmt == "json":
        emit_json(
            {
                "ok": result.ok,
                "problems": [problem_json(p) for p in result.problems],
                "diff": diff_json(diff, ref),
            }
        )
        return
    render_check(result, fmt, len(schedule.tasks), len(schedule.files))
    for line in diff_github(diff) if fmt == "github" else diff_text(diff, ref):
        print(line)
