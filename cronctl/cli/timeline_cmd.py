"""`cronctl timeline`: when tasks fire over the next days, as text, JSON or SVG."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from cronctl.cli.options import FileOpt, NowOpt
from cronctl.cli.render.tables import emit_json, render_problems
from cronctl.cli.render.timeline import (
    render_timeline_text,
    timeline_json,
    timeline_svg,
    use_colour,
)
from cronctl.cli.wiring import load_schedule, parse_instant
from cronctl.core.calendar import build_timeline
from cronctl.errors import UsageError


def register(app: typer.Typer) -> None:
    """Add `timeline` to `app`."""
    app.command("timeline")(timeline_command)


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
    """When tasks fire over the next days: runs per hour as a heat map, then a row per task.

    \b
    Example:
      cronctl timeline --days 3 --svg week.svg
    """
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
        render_problems(schedule.errors)
        raise typer.Exit(2)
