"""`cronctl timeline` drawn: coloured cells on a terminal, characters when piped, or SVG.

Counts are bucketed into levels on a fixed scale (not relative to the busiest hour), so
two pictures of two schedules can be compared by eye.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TextIO
from xml.sax.saxutils import escape

from cronctl.core.calendar import TaskLane, Timeline
from cronctl.core.model import format_utc

GLYPHS = ".-+=*#@"
# A sequential green scale (GitHub's contribution colours, extended at the dark end).
COLOURS = ("#ebedf0", "#c6e48b", "#9bd47e", "#6cc06a", "#3f9e4d", "#23753a", "#0e4d22")
_NAME_WIDTH = 22


@dataclass(frozen=True)
class Scale:
    """Counts -> levels 0-6: 0 is no run; 1-6 split the window's own range of counts.

    A fixed scale would paint every hour the same as soon as one task runs every
    minute; a scale fitted to the window shows where the extra runs are.
    """

    low: int  # the smallest non-zero count
    bounds: tuple[int, ...]  # the upper bound of each level in use, busiest last

    @classmethod
    def of(cls, counts: list[int]) -> Scale:
        """Fit to the non-zero counts: each distinct value its level, or six equal bins."""
        values = sorted({c for c in counts if c > 0})
        if len(values) <= 6:
            return cls(values[0] if values else 1, tuple(values))
        low, high = values[0], values[-1]
        width = (high - low + 1) / 6
        return cls(low, (*(low + round(width * (i + 1)) - 1 for i in range(5)), high))

    def level(self, count: int) -> int:
        """0 for no run, else up to 6; the busiest count is always 6 (the darkest)."""
        if count <= 0:
            return 0
        shift = 6 - len(self.bounds)
        for index, bound in enumerate(self.bounds):
            if count <= bound:
                return index + 1 + shift
        return 6

    def legend(self) -> list[tuple[int, str]]:
        """(level, what it means) for each level in use."""
        found = [(0, "0")]
        low = self.low
        for bound in self.bounds:
            found.append((self.level(bound), str(bound) if bound == low else f"{low}-{bound}"))
            low = bound + 1
        return found


def _by_hour_of_day(per_hour: tuple[int, ...]) -> list[int]:
    totals = [0] * 24
    for index, count in enumerate(per_hour):
        totals[index % 24] += count
    return totals


def _short(name: str, width: int) -> str:
    # Shortened with a mark, never wrapped: a wrapped name reads as two tasks.
    return name if len(name) <= width else name[: width - 1] + "~"


def _title(timeline: Timeline) -> str:
    last = timeline.day(timeline.days - 1)
    runs = sum(lane.total for lane in timeline.lanes)
    tasks = len(timeline.lanes)
    return (
        f"Runs per hour (UTC), {timeline.start:%Y-%m-%d} to {last:%Y-%m-%d}: "
        f"{tasks} task{'s' * (tasks != 1)}, {runs:,} run{'s' * (runs != 1)}"
    )


def _hour_ruler(indent: int) -> str:
    return " " * indent + "".join(f"{h:02d}    " for h in range(0, 24, 3)).rstrip()


def _legend_text(scale: Scale) -> str:
    return "  ".join(f"{GLYPHS[lvl]} {text}" for lvl, text in scale.legend())


def _lane_cells(lane: TaskLane) -> tuple[list[int], Scale]:
    by_hour = _by_hour_of_day(lane.per_hour)
    return by_hour, Scale.of(by_hour)


def render_timeline_text(timeline: Timeline, out: TextIO, colour: bool) -> None:
    """The heat map (a row per day) and a row per task (runs per hour of day, all days)."""
    if colour:
        _render_rich(timeline, out)
        return
    heat = timeline.heat()
    scale = Scale.of([c for row in heat for c in row])
    print(_title(timeline), file=out)
    print(_hour_ruler(11), file=out)
    for index, row in enumerate(heat):
        cells = "".join(GLYPHS[scale.level(c)] * 2 for c in row)
        print(f"{timeline.day(index):%a %m-%d}  {cells}", file=out)
    print(f"runs in an hour, all tasks: {_legend_text(scale)}", file=out)
    print(file=out)
    print(f"{'TASK':<{_NAME_WIDTH}} {'WHEN IT RUNS (hour of day, UTC)':<48}  RUNS", file=out)
    for lane in timeline.lanes:
        name = _short(lane.task.name, _NAME_WIDTH)
        if lane.task.paused:
            print(f"{name:<{_NAME_WIDTH}} {'paused':<48}  0", file=out)
            continue
        by_hour, own = _lane_cells(lane)
        cells = "".join(GLYPHS[own.level(c)] * 2 for c in by_hour)
        print(f"{name:<{_NAME_WIDTH}} {cells}  {lane.total:,}", file=out)


def _render_rich(timeline: Timeline, out: TextIO) -> None:
    from rich.console import Console
    from rich.text import Text

    console = Console(file=out, highlight=False)

    def cells(counts: list[int], scale: Scale) -> Text:
        text = Text()
        for count in counts:
            text.append("  ", style=f"on {COLOURS[scale.level(count)]}")
        return text

    heat = timeline.heat()
    scale = Scale.of([c for row in heat for c in row])
    console.print(Text(_title(timeline), style="bold"))
    console.print(_hour_ruler(11), style="dim")
    for index, row in enumerate(heat):
        console.print(Text(f"{timeline.day(index):%a %m-%d}  ") + cells(row, scale))
    legend = Text("runs in an hour, all tasks: ")
    for lvl, text in scale.legend():
        legend.append("  ", style=f"on {COLOURS[lvl]}")
        legend.append(f" {text}  ")
    console.print(legend)
    console.print()
    header = f"{'TASK':<{_NAME_WIDTH}} {'WHEN IT RUNS (hour of day, UTC)':<48}  RUNS"
    console.print(Text(header, style="bold"))
    for lane in timeline.lanes:
        name = Text(f"{_short(lane.task.name, _NAME_WIDTH):<{_NAME_WIDTH}} ")
        if lane.task.paused:
            console.print(name + Text("paused", style="yellow"))
            continue
        by_hour, own = _lane_cells(lane)
        console.print(name + cells(by_hour, own) + Text(f"  {lane.total:,}"))


def use_colour(out: TextIO) -> bool:
    """Colour only on a terminal, and never under NO_COLOR."""
    return out.isatty() and "NO_COLOR" not in os.environ


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
    parts += _svg_heat(timeline)
    parts += _svg_lanes(timeline, lanes_top, plot_w)
    parts += _svg_legend(height - 34, Scale.of([c for row in timeline.heat() for c in row]))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _svg_heat(timeline: Timeline) -> list[str]:
    heat = timeline.heat()
    scale = Scale.of([c for row in heat for c in row])
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
            lvl = scale.level(count)
            parts.append(
                f"<rect class='hour' x='{x + 1}' y='{y + 1}' width='{_CELL_W - 2}' "
                f"height='{_CELL_H - 2}' rx='3' fill='{COLOURS[lvl]}' data-runs='{count}'>"
                f"<title>{label} {hour:02d}:00 UTC: {count} runs</title></rect>"
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
        "Tasks: runs per hour over the whole window</text>"
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
        own = Scale.of(list(lane.per_hour))
        for hour, count in enumerate(lane.per_hour):
            if count:
                x = _LEFT + hour * step
                parts.append(
                    f"<rect class='run' x='{x:.2f}' y='{y + 2}' width='{max(step, 1.5):.2f}' "
                    f"height='{_LANE_H - 4}' fill='{COLOURS[own.level(count)]}' "
                    f"data-runs='{count}'/>"
                )
        parts.append(
            f"<text x='{_LEFT + plot_w + 8}' y='{y + 13}' fill='#57606a'>{lane.total:,}</text>"
        )
    return parts


def _svg_legend(y: int, scale: Scale) -> list[str]:
    parts = [f"<text x='16' y='{y + 13}' fill='#57606a'>runs in an hour, all tasks:</text>"]
    x = _LEFT
    for lvl, text in scale.legend():
        colour = COLOURS[lvl]
        parts.append(f"<rect x='{x}' y='{y}' width='18' height='18' rx='3' fill='{colour}'/>")
        parts.append(f"<text x='{x + 24}' y='{y + 13}' fill='#57606a'>{text}</text>")
        x += 24 + 8 * len(text) + 20
    return parts


def timeline_json(timeline: Timeline) -> dict[str, object]:
    """The counts behind the picture, for --json."""
    return {
        "start": format_utc(timeline.start),
        "days": timeline.days,
        "heat": timeline.heat(),
        "tasks": [
            {
                "name": lane.task.name,
                "paused": lane.task.paused,
                "runs": lane.total,
                "per_hour": list(lane.per_hour),
            }
            for lane in timeline.lanes
        ],
    }
