"""`cronctl timeline`: when tasks fire over the next days, as text, JSON or SVG."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from cronctl.cli.options import FileOpt, NowOpt, task_names
from cronctl.cli.render.runs import emit_json, render_problems
from cronctl.cli.render.timeline import render_timeline_text, timeline_json, timeline_svg
from cronctl.cli.wiring import load_schedule, parse_instant
from cronctl.core.calendar import build_timeline
from cronctl.core.chains import Chains
from cronctl.core.model import Task
from cronctl.core.zones import Zone, parse_zone
from cronctl.errors import UsageError, ZoneError


def timeline_command(
    days: Annotated[
        int,
        typer.Option("--days", min=1, max=31, help="How many days, from today in the zone, 1-31."),
    ] = 7,
    tasks: Annotated[
        list[str] | None,
        typer.Option(
            "--task",
            metavar="NAME",
            help="Only this task (repeatable); named every-minute tasks are counted too.",
            autocompletion=task_names,
        ),
    ] = None,
    tz: Annotated[
        str | None,
        typer.Option(
            "--tz",
            metavar="ZONE",
            help="Draw in this zone (UTC, +HH:MM or an IANA name). Default: the zone the "
            "tasks shown share, else UTC.",
        ),
    ] = None,
    every_minute: Annotated[
        bool,
        typer.Option(
            "--include-every-minute",
            help="Count tasks whose minute field is * in the heat map too (left out by "
            "default: 60 runs an hour each would paint every hour the same).",
        ),
    ] = False,
    svg: Annotated[
        Path | None,
        typer.Option(
            "--svg", metavar="FILE", help="Also write the picture as SVG to FILE ('-' for stdout)."
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
      cronctl timeline --tz Europe/Berlin --task backup --task digest
    """
    schedule = load_schedule(file)
    shown = _chosen(schedule.tasks, tasks or [])
    zone = _zone(shown, tz)
    counted = every_minute or bool(tasks)
    # The whole schedule's chains: a chained task shown alone counts at its root's times.
    graph = Chains(schedule.tasks)
    timeline = build_timeline(shown, parse_instant(now), days, zone, counted, graph)
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
        render_timeline_text(timeline, sys.stdout)
    if schedule.errors:
        render_problems(schedule.errors)
        raise typer.Exit(2)


def _chosen(tasks: Sequence[Task], names: list[str]) -> list[Task]:
    """The tasks `--task` names, in the schedule's order (all of them without --task)."""
    known = {t.name for t in tasks}
    for name in names:
        if name not in known:
            raise UsageError(
                f"--task {name!r}: no task of that name in the schedule "
                "(`cronctl list` shows the names)"
            )
    return [t for t in tasks if not names or t.name in names]


def _zone(tasks: Sequence[Task], tz: str | None) -> Zone:
    """--tz, else the zone every task shown shares, else UTC."""
    if tz is not None:
        try:
            return parse_zone(tz)
        except ZoneError as exc:
            raise UsageError(f"--tz {tz!r}: {exc}") from None
    zones = {t.zone.name for t in tasks}
    return tasks[0].zone if len(zones) == 1 else parse_zone("UTC")
