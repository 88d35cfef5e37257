"""`cronctl timeline` drawn: coloured cells on a terminal, characters when piped, or SVG."""

from __future__ import annotations

import os
import textwrap
from bisect import bisect_left
from collections.abc import Iterable
from typing import TextIO
from xml.sax.saxutils import escape

from cronctl.core.calendar import Timeline
from cronctl.core.model import format_utc

GLYPHS = ".-+=*#@"
# A sequential green scale (GitHub's contribution colours, extended at the dark end).
COLOURS = ("#ebedf0", "#c6e48b", "#9bd47e", "#6cc06a", "#3f9e4d", "#23753a", "#0e4d22")
_NAME_WIDTH = 22


#: Runs in one hour -> levels 0-6: 0, 1, 2-3, 4-7, 8-15, 16-31, 32 or more (these are the tops
#: of levels 1-5). Fixed, so two schedules' pictures compare by eye (a window's own range would
#: put 72 and 73 runs at opposite ends); doubling, so a quiet hour and a herd both read.
_BOUNDS = (1, 3, 7, 15, 31)


def level(count: int) -> int:
    """0 for no run, else 1-6."""
    return 0 if count <= 0 else bisect_left(_BOUNDS, count) + 1


def samples() -> list[tuple[int, str]]:
    """For every level, its lowest count and what it means: (0, "0"), (1, "1"), (2, "2-3")."""
    found, low = [(0, "0")], 1
    for bound in _BOUNDS:
        found.append((low, str(bound) if bound == low else f"{low}-{bound}"))
        low = bound + 1
    return [*found, (low, f"{low}+")]


def _short(name: str, width: int) -> str:
    # Shortened with a mark, never wrapped: a wrapped name reads as two tasks.
    return name if len(name) <= width else name[: width - 1] + "~"


def _title(timeline: Timeline) -> str:
    last = timeline.day(timeline.days - 1)
    counted = [lane for lane in timeline.lanes if lane.counted]
    runs = sum(lane.total for lane in counted)
    tasks = len(counted)
    return (
        f"Runs per hour ({timeline.zone.name}), {timeline.first:%Y-%m-%d} to {last:%Y-%m-%d}: "
        f"{tasks} task{'s' * (tasks != 1)}, {runs:,} run{'s' * (runs != 1)}"
    )


def left_out(timeline: Timeline) -> str | None:
    """The line naming the every-minute tasks the heat map does not count, or None."""
    out = [lane for lane in timeline.lanes if not lane.counted]
    if not out:
        return None
    names = ", ".join(lane.task.name for lane in out)
    runs = sum(lane.total for lane in out)
    return (
        f"not in the heat map: {names} (every minute, {runs:,} run{'s' * (runs != 1)}; "
        "--include-every-minute counts them)"
    )


def render_timeline_text(timeline: Timeline, out: TextIO) -> None:
    """The heat map (a row per day) and a row per task (runs per hour of day, all days): cells
    coloured on a terminal (never under NO_COLOR), characters when piped."""
    colour = out.isatty() and "NO_COLOR" not in os.environ

    def cells(counts: Iterable[int], width: int = 2) -> list[tuple[str, str]]:
        levels = [level(count) for count in counts]
        if colour:
            return [("  ", f"on {COLOURS[n]}") for n in levels]
        return [("".join(GLYPHS[n] * width for n in levels), "")]

    ruler = " " * 11 + "".join(f"{h:02d}    " for h in range(0, 24, 3)).rstrip()
    lines = [[(_title(timeline), "bold")], [(ruler, "dim")]]
    for index, row in enumerate(timeline.heat()):
        lines.append([(f"{timeline.day(index):%a %m-%d}  ", ""), *cells(row)])
    # A count of each level (0, 1, 2, 4, ...) paints its cell in the legend.
    legend = [[*cells([bound], 1), (f" {text}  ", "")] for bound, text in samples()]
    lines.append([("runs in an hour: ", ""), *(piece for part in legend for piece in part)])
    note = left_out(timeline)  # wrapped: the picture is 80 columns wide, names are unbounded
    lines += [[(line, "dim")] for line in textwrap.wrap(note or "", 80, subsequent_indent="  ")]
    when = f"WHEN IT RUNS (hour of day, {timeline.zone.name})"
    lines += [[], [(f"{'TASK':<{_NAME_WIDTH}} {when:<48}  RUNS", "bold")]]
    for lane in timeline.lanes:
        name = (f"{_short(lane.task.name, _NAME_WIDTH):<{_NAME_WIDTH}} ", "")
        if lane.task.paused:
            lines.append([name, (f"{'paused':<48}", "yellow"), ("  0", "")])
        else:
            lines.append([name, *cells(lane.by_hour_of_day()), (f"  {lane.total:,}", "")])
    if not colour:
        out.write("".join("".join(text for text, _ in line).rstrip() + "\n" for line in lines))
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(file=out, highlight=False)
    for line in lines:
        console.print(Text.assemble(*line))


# SVG geometry, in pixels.
_CELL_W, _CELL_H = 30, 20
_LEFT = 190
_TOP = 64
_LANE_H = 18
_FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"


def timeline_svg(timeline: Timeline) -> str:
    """A self-contained SVG: the day x hour heat map, then one lane per task over all days."""
    plot_w = 24 * _CELL_W
    heat_h = timeline.days * _CELL_H
    lanes_top = _TOP + heat_h + 70
    height = lanes_top + len(timeline.lanes) * _LANE_H + 70
    width = _LEFT + plot_w + 80
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' {_FONT} font-size='12'>",
        f"<rect width='{width}' height='{height}' fill='#ffffff'/>",
        f"<text x='16' y='26' font-size='16' font-weight='bold' fill='#1f2328'>"
        f"{escape(_title(timeline))}</text>",
    ]
    note = left_out(timeline)
    if note:
        parts.append(f"<text x='16' y='42' fill='#57606a'>{escape(note)}</text>")
    parts += _svg_heat(timeline)
    parts += _svg_lanes(timeline, lanes_top, plot_w)
    parts += _svg_legend(height - 34)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _svg_heat(timeline: Timeline) -> list[str]:
    heat = timeline.heat()
    zone = escape(timeline.zone.name)
    parts = []
    for hour in range(24):
        x = _LEFT + hour * _CELL_W + _CELL_W / 2
        parts.append(
            f"<text x='{x}' y='{_TOP - 8}' text-anchor='middle' fill='#57606a'>{hour:02d}</text>"
        )
    for day, row in enumerate(heat):
        y = _TOP + day * _CELL_H
        label = f"{timeline.day(day):%a %Y-%m-%d}"
        parts.append(
            f"<text x='{_LEFT - 10}' y='{y + 14}' text-anchor='end' fill='#1f2328'>{label}</text>"
        )
        for hour, count in enumerate(row):
            x = _LEFT + hour * _CELL_W
            lvl = level(count)
            parts.append(
                f"<rect class='hour' x='{x + 1}' y='{y + 1}' width='{_CELL_W - 2}' "
                f"height='{_CELL_H - 2}' rx='3' fill='{COLOURS[lvl]}' data-runs='{count}'>"
                f"<title>{label} {hour:02d}:00 {zone}: {count} runs</title></rect>"
            )
            if count:
                ink = "#ffffff" if lvl >= 4 else "#1f2328"
                parts.append(
                    f"<text x='{x + _CELL_W / 2}' y='{y + 14}' text-anchor='middle' "
                    f"font-size='10' fill='{ink}'>{count}</text>"
                )
    return parts


def _svg_lanes(timeline: Timeline, top: int, plot_w: int) -> list[str]:
    hours = timeline.days * 24
    step = plot_w / hours
    parts = [
        f"<text x='16' y='{top - 30}' font-size='14' font-weight='bold' fill='#1f2328'>"
        f"Tasks: runs per hour over the whole window ({escape(timeline.zone.name)})</text>"
    ]
    for day in range(timeline.days):
        x = _LEFT + day * 24 * step
        parts.append(
            f"<line x1='{x}' y1='{top - 18}' x2='{x}' y2='{top + len(timeline.lanes) * _LANE_H}' "
            "stroke='#d0d7de'/>"
        )
        parts.append(
            f"<text x='{x + 3}' y='{top - 6}' font-size='10' fill='#57606a'>"
            f"{timeline.day(day):%a %m-%d}</text>"
        )
    for index, lane in enumerate(timeline.lanes):
        y = top + index * _LANE_H
        name = escape(_short(lane.task.name, 28))
        parts.append(
            f"<text x='{_LEFT - 10}' y='{y + 13}' text-anchor='end' fill='#1f2328'>{name}</text>"
        )
        if lane.task.paused:
            parts.append(
                f"<text class='paused' x='{_LEFT + 4}' y='{y + 13}' fill='#9a6700'>paused</text>"
            )
            continue
        parts.append(
            f"<rect x='{_LEFT}' y='{y + 2}' width='{plot_w}' height='{_LANE_H - 4}' "
            "fill='#f6f8fa'/>"
        )
        for hour, count in enumerate(lane.per_hour):
            if count:
                x = _LEFT + hour * step
                parts.append(
                    f"<rect class='run' x='{x:.2f}' y='{y + 2}' width='{max(step, 1.5):.2f}' "
                    f"height='{_LANE_H - 4}' fill='{COLOURS[level(count)]}' "
                    f"data-runs='{count}'/>"
                )
        parts.append(
            f"<text x='{_LEFT + plot_w + 8}' y='{y + 13}' fill='#57606a'>{lane.total:,}</text>"
        )
    return parts


def _svg_legend(y: int) -> list[str]:
    parts = [f"<text x='16' y='{y + 13}' fill='#57606a'>runs in an hour:</text>"]
    x = _LEFT
    for low, text in samples():
        colour = COLOURS[level(low)]
        parts.append(f"<rect x='{x}' y='{y}' width='18' height='18' rx='3' fill='{colour}'/>")
        parts.append(f"<text x='{x + 24}' y='{y + 13}' fill='#57606a'>{text}</text>")
        x += 24 + 8 * len(text) + 20
    return parts


def timeline_json(timeline: Timeline) -> dict[str, object]:
    return {
        "start": format_utc(timeline.start),
        "timezone": timeline.zone.name,
        "first_day": f"{timeline.first:%Y-%m-%d}",
        "days": timeline.days,
        "scale": [text for _, text in samples()],
        "heat": timeline.heat(),
        "tasks": [
            {
                "name": lane.task.name,
                "paused": lane.task.paused,
                "runs": lane.total,
                "in_heat": lane.counted,
                "per_hour": list(lane.per_hour),
            }
            for lane in timeline.lanes
        ],
    }
