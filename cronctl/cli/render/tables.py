"""Result dataclasses -> a rich table on a terminal, plain text when piped, or JSON: one
renderer per result, so `--json` and the human output cannot disagree."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from cronctl.cli.render import fit as fitting
from cronctl.cli.render.diff import annotation
from cronctl.cli.render.fit import TIMES, short_time
from cronctl.cli.render.runs import emit_json, render_problems, run_json, run_kind, utc, visible
from cronctl.core.describe import describe, gap_note
from cronctl.core.model import Problem, Task, format_utc
from cronctl.core.runs import NOT_OK
from cronctl.core.warncodes import acknowledged
from cronctl.core.zones import Zone, parse_zone

if TYPE_CHECKING:
    from datetime import datetime

    from rich.console import Console

    from cronctl.commands.schedule import CheckResult, DueResult, ListResult, NextResult


def problem_json(problem: Problem) -> dict[str, Any]:
    """A problem as docs/commands.md shows it."""
    keys = ("file", "line", "task", "severity", "code", "message")
    return {key: getattr(problem, key) for key in keys}


#: What a terminal's table says under it about its times: whole (UTC unless said) or short.
IN_UTC = "Times in UTC."
IN_TASK_ZONES = "Times in each task's own time zone; the suffix is its UTC offset (Z: UTC)."


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    stream: TextIO | None = None,
    drop: Sequence[str] = (),
    shrink: Sequence[str] = ("WHEN", "GUARDS", "NOTE"),
    short: Callable[[], Sequence[Sequence[str]]] | None = None,
    floors: Mapping[str, int] | None = None,
    whole_times: str = IN_UTC,
) -> None:
    """A rich table on a terminal, fitted by render/fit.py (`drop`, `shrink`); aligned plain
    columns when piped. Every cell is made `visible`: a pause reason or a host from the store
    is untrusted like task output. A table with times (`short`) says under it which zone they
    are in (`whole_times`, or IN_TASK_ZONES once they are short)."""
    rows = [[visible(cell, one_line=True) for cell in row] for row in rows]
    out = stream or sys.stdout
    if out.isatty():
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        def shortened() -> list[list[str]]:
            assert short is not None
            return [[visible(cell, one_line=True) for cell in row] for row in short()]

        console = Console(file=out, no_color="NO_COLOR" in os.environ, highlight=False)
        layout = fitting.fit(
            headers, rows, console.width, drop, shrink, shortened if short else None, floors
        )
        rows, keep, widths = layout.rows, layout.keep, layout.widths
        if not layout.fits or len(rows) >= LONG_TABLE_ROWS:
            # Long (a rich Table is slow), or wider than the terminal even so: rich would
            # squeeze the columns and cut names and times; printed whole, the terminal wraps.
            _print_lines(console, headers, rows, keep, widths)
        else:
            grid = Table(box=None, header_style="bold", pad_edge=False)
            for index in keep:
                grid.add_column(
                    headers[index], no_wrap=True, overflow="ellipsis", width=widths[index]
                )
            for row in rows:
                # Text, not markup: a '[' in a note or a name is printed, not interpreted.
                grid.add_row(*(Text(row[i], style=outcome_style(headers[i], row[i])) for i in keep))
            console.print(grid)
        if short is not None and rows:
            console.print(Text(IN_TASK_ZONES if layout.short_times else whole_times, "dim"))
        return
    out.write(plain_table(headers, rows))


#: From this many rows on, a terminal table is printed line by line: a rich Table lays out
#: each cell on its own, slow for a long `list` (docs/architecture.md#devices-kept-for-speed).
LONG_TABLE_ROWS = 500


def _print_lines(
    console: Console,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    keep: Sequence[int],
    widths: Sequence[int],
) -> None:
    """What a rich Table prints, line by line: cells cropped and padded as it does, tabs
    expanded, columns two spaces apart, the header bold (only the escape codes group
    differently)."""
    from rich.text import Text

    def line(cells: Sequence[str], header: bool) -> Text:
        parts = []
        for index in keep:
            style = "bold" if header else outcome_style(headers[index], cells[index])
            cell = Text(cells[index], style=style)
            cell.expand_tabs()
            cell.truncate(widths[index], overflow="ellipsis", pad=True)
            parts.append(cell)
        return Text("  ", style="bold" if header else "").join(parts)

    lines = [line(headers, True), *(line(row, False) for row in rows)]
    console.print(Text("\n").join(lines), no_wrap=True, overflow="ignore", crop=False)


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table for a pipe: columns left-aligned, two spaces apart, no trailing blanks. One
    `%` format a row, cheap even at 10,000 rows; a row of the wrong length is a ValueError."""
    columns = list(zip(*rows, strict=True)) or [()] * len(headers)
    widths = [
        max(len(h), max(map(len, column), default=0))
        for h, column in zip(headers, columns, strict=True)
    ]
    line = "  ".join(f"%-{w}s" for w in widths)
    lines = [(line % tuple(headers)).rstrip()]
    lines += [(line % tuple(row)).rstrip() for row in rows]
    return "\n".join(lines) + "\n"


def outcome_style(header: str, value: str) -> str:
    """ok green; failed, timeout, error, interrupted red; skipped and missed yellow."""
    if header not in ("OUTCOME", "LAST RUN") or not value:
        return ""
    # "ok (manual)", "failed (attempt 2)": the outcome is before the parenthesis.
    word = value.split()[-1] if header == "LAST RUN" else value.partition(" (")[0]
    if word == "ok":
        return "green"
    if word.startswith(tuple(NOT_OK)):
        return "red"
    if word.startswith(("skipped", "missed")) or word in ("condition", "server", "running"):
        return "yellow"
    return ""


def check_json(result: CheckResult) -> dict[str, Any]:
    """`check --format json` as docs/commands.md shows it (`--diff` adds its members)."""
    problems = [problem_json(p) for p in result.problems]
    return {"ok": result.ok, "problems": problems, "acknowledged": result.acknowledged}


def render_check(result: CheckResult, fmt: str, task_count: int, file_count: int) -> None:
    for p in result.problems:
        if fmt == "text":
            print(p.describe())
            continue
        level = "error" if p.severity == "error" else "warning"
        task = f"task {p.task}: " if p.task else ""
        print(annotation(level, p.file, p.line, f"cronctl {p.code}", task + p.message))
    if fmt == "github" and result.acknowledged:
        print(f"::notice title=cronctl::{acknowledged(result.acknowledged)}")
    if fmt == "text":
        verdict = "ok" if result.ok else "failed"
        errors = sum(p.severity == "error" for p in result.problems)
        warnings = len(result.problems) - errors
        print(
            f"{verdict}: {task_count} task{'s' * (task_count != 1)} in {file_count} "
            f"file{'s' * (file_count != 1)}; {errors} error{'s' * (errors != 1)}, "
            f"{warnings} warning{'s' * (warnings != 1)}"
            f"{', ' + acknowledged(result.acknowledged) if result.acknowledged else ''}"
        )


def local_time(when: datetime, zone: Zone) -> str:
    """`2026-08-03T11:00+02:00`: an instant as the task's wall clock, offset included."""
    wall = when.astimezone(zone.tz)
    offset = wall.strftime("%z")
    return f"{wall:%Y-%m-%dT%H:%M}{offset[:3]}:{offset[3:]}"


def render_list(
    result: ListResult, as_json: bool, now: datetime, local: bool = False, verbose: bool = False
) -> None:
    """`list`: a row per task, then its errors (`verbose`: and warnings)."""
    if as_json:
        tasks = [
            {
                "name": row.task.name,
                "schedule": row.task.schedule,
                "schedule_words": describe(row.task),
                "timezone": row.task.zone.name,
                "next_run": utc(row.next_run),
                **after_json(row.task),
                "guards": row.task.guards,
                "paused": row.paused,
                "last_run": row.last_run and run_json(row.last_run),
                "hosts": list(row.task.hosts),
                "other_hosts": row.other_hosts,
            }
            for row in result.rows
        ]
        emit_json({"tasks": tasks, "problems": [problem_json(p) for p in result.problems]})
        return
    # Tasks of one schedule and zone share their words: each said once, keyed by identities
    # (parse_zone and parse_cron hand out one object per text: no hashing of fields).
    words: dict[tuple[object, ...], str] = {}

    def cells(shown: Callable[[datetime, Zone], str]) -> list[list[str]]:
        rows = []
        for row in result.rows:
            task, zone, last = row.task, row.task.zone, row.last_run
            last_cell = f"{shown(last.occurrence, zone)} {last.outcome}" if last else "-"
            said = (id(task.cron), id(zone), task.at, task.after, task.after_outcome)
            text = words.get(said)
            if text is None:
                text = words[said] = describe(task)
            rows.append(
                [
                    task.name,
                    task.schedule,
                    "-" if task.chained else zone.name,
                    _next_cell(row, shown),
                    ",".join(task.guards) or "-",
                    last_cell,
                    text,  # last: words with spaces, after the columns scripts cut
                ]
            )
        return rows

    long_form = _memo(lambda when, zone: local_time(when, zone) if local else format_utc(when))
    table(
        ["TASK", "SCHEDULE", "TIMEZONE", "NEXT RUN", "GUARDS", "LAST RUN", "WHEN"],
        cells(long_form),
        drop=(TIMES, "~WHEN", "TIMEZONE", "WHEN", "LAST RUN", "GUARDS", "SCHEDULE"),
        short=lambda: cells(_memo(lambda when, zone: short_time(when, zone, now))),
        whole_times=IN_TASK_ZONES if local else IN_UTC,
    )
    # Errors always; warnings only when asked (-v): a listing is not a lint report (`check`
    # is), and a count repeated under every listing was noise nobody acted on.
    render_problems([p for p in result.problems if verbose or p.severity == "error"])


def render_next(result: NextResult, as_json: bool) -> None:
    """`next`: one UTC instant per line (with the zone's wall time beside it)."""
    if as_json:
        emit_json(
            {
                "task": result.task,
                "expression": result.expression,
                "timezone": result.timezone,
                "occurrences": [format_utc(t) for t in result.occurrences],
                "details": [_next_detail(result, i) for i in range(len(result.carried))],
                "after": list(result.after),
                "upstream_roots": list(result.roots),
            }
        )
        return
    if result.after:
        roots = ", ".join(result.roots) or "nothing: its chain is a cycle"
        print(
            f"task {result.task} runs {result.expression}, not at times of its own; these are "
            f"the occurrences of {roots} that its chain follows",
            file=sys.stderr,
        )
    if result.task is not None and result.expression == "@start":
        print(
            f"task {result.task} has no scheduled occurrences: it runs once each time "
            "cronctl work starts (on_start = true)",
            file=sys.stderr,
        )
        return
    zone = parse_zone(result.timezone)
    for i, when in enumerate(result.occurrences):
        # The wall time, for UTC too: the weekday is what a reader checks a schedule against.
        line = f"{format_utc(when)}  {zone.wall(when):%a %Y-%m-%d %H:%M} {result.timezone}"
        detail = _next_detail(result, i) if i < len(result.carried) else None
        if detail and detail["dst_skipped"]:
            moved, walls = [w[-5:] for w in detail["dst_skipped"]], detail["wall_times"]
            note = gap_note(
                moved, walls[-1][-5:] if len(walls) > len(moved) else None, result.misfire
            )
            line += f"  \N{MULTIPLICATION SIGN}{detail['runs']} ({result.misfire}: {note})"
        print(line)


def _next_detail(result: NextResult, index: int) -> dict[str, Any]:
    """One occurrence of `next --json`: its runs, and the wall times a DST gap moved onto it."""
    when = result.occurrences[index]
    walls = result.carried[index]
    own = parse_zone(result.timezone).wall(when)
    runs = len(walls) if result.misfire == "catch-up" else min(len(walls), 1)
    return {
        "at": format_utc(when),
        "runs": runs,
        "wall_times": [f"{w:%Y-%m-%dT%H:%M}" for w in walls],
        "dst_skipped": [f"{w:%Y-%m-%dT%H:%M}" for w in walls if w != own],
    }


def render_due(result: DueResult, as_json: bool) -> None:
    if as_json:
        emit_json({"at": format_utc(result.at), "due": result.due})
        return
    for name in result.due:
        print(name)


def _memo(shown: Callable[[datetime, Zone], str]) -> Callable[[datetime, Zone], str]:
    """`shown`, each instant and zone formatted once (by the zone's identity)."""
    done: dict[tuple[datetime, int], str] = {}

    def once(when: datetime, zone: Zone) -> str:
        key = (when, id(zone))
        text = done.get(key)
        if text is None:
            text = done[key] = shown(when, zone)
        return text

    return once


def _status_outcome(row: Any) -> str:
    """`ok`, `failed (attempt 2)`, `ok (manual)`: a scheduled first attempt says no more."""
    kind = run_kind(row).removeprefix("schedule").removeprefix(", ")
    return f"{row.outcome} ({kind})" if kind else row.outcome


def pause_json(info: Any) -> dict[str, Any] | None:
    if info is None:
        return None
    return {"reason": info.reason, "since": utc(info.since), "host": info.host, "user": info.user}


def render_status(result: Any, as_json: bool, now: datetime) -> None:
    if as_json:
        tasks = [
            {
                "name": row.name,
                "in_schedule": row.task is not None,
                "paused": row.paused,
                "pause_reason": row.pause_reason,
                "pause": pause_json(row.pause),
                "next_run": utc(row.next_run),
                **after_json(row.task),
                "last_run": row.last_run and run_json(row.last_run),
                "consecutive_failures": row.consecutive_failures,
                "missed": row.missed,
                "note": row.note,
                "overdue": row.overdue is not None,
                "overdue_since": utc(row.overdue),
                "other_hosts": row.other_hosts,
                "host": getattr(result, "host", None),
            }
            for row in [*result.rows, *result.unscheduled]
        ]
        emit_json({"tasks": tasks})
        return

    def cells(shown: Callable[[datetime, Zone], str]) -> list[list[str]]:
        rows = []
        for row in [*result.rows, *result.unscheduled]:
            last = row.last_run
            zone = row.task.zone if row.task is not None else parse_zone("UTC")
            rows.append(
                [
                    row.name,
                    shown(last.occurrence, zone) if last else "-",
                    _status_outcome(last) if last else "-",
                    f"{last.duration_s:.1f}s" if last and last.duration_s is not None else "-",
                    _next_cell(row, shown),
                    str(row.consecutive_failures),
                    str(row.missed),
                    _status_note(row, shown),
                ]
            )
        return rows

    def short(when: datetime, zone: Zone) -> str:
        return short_time(when, zone, now)

    # The overdue time in NOTE is a time too: the note may shrink, never through it.
    overdue = [len(_status_note(r, short).partition(";")[0]) for r in result.rows if r.overdue]
    table(
        ["TASK", "LAST RUN", "OUTCOME", "DURATION", "NEXT RUN", "FAILS", "MISSED", "NOTE"],
        cells(lambda when, _zone: format_utc(when)),
        drop=(TIMES, "MISSED", "DURATION", "~NOTE", "FAILS"),
        short=lambda: cells(_memo(short)),
        floors={"NOTE": max(overdue, default=0)},
    )


def _next_cell(row: Any, shown: Callable[[datetime, Zone], str]) -> str:
    """NEXT RUN, of `list` and `status`."""
    if row.task is None:
        return "not in schedule"
    if getattr(row, "other_hosts", False):
        return "other hosts"
    if row.paused:
        return "paused"
    if row.next_run:
        return shown(row.next_run, row.task.zone)
    if row.task.chained:
        return str(row.task.schedule)  # "after extract": it starts when that ends
    return "at work start" if row.task.start_only else "-"


def after_json(task: Task | None) -> dict[str, Any]:
    """A task's chain in JSON: what it runs after, and the outcome it waits for (or null)."""
    return {
        "after": list(task.after) if task is not None else [],
        "after_outcome": task.after_outcome if task is not None and task.chained else None,
    }


def _pause_note(row: Any, shown: Callable[[datetime, Zone], str]) -> str:
    """`paused by alice on web-1 since 2026-08-03T09:00:00Z: db migration` (what is known)."""
    pause = row.pause
    if pause is None:
        return row.pause_reason or "paused"
    who = f" by {pause.user}" if pause.user else ""
    who += f" on {pause.host}" if pause.host else ""
    since = f" since {shown(pause.since, row.task.zone)}" if pause.since else ""
    return f"paused{who}{since}" + (f": {pause.reason}" if pause.reason else "")


def _status_note(row: Any, shown: Callable[[datetime, Zone], str]) -> str:
    note = row.note or (_pause_note(row, shown) if row.paused else "")
    if getattr(row, "overdue", None) is not None:
        overdue = f"overdue since {shown(row.overdue, row.task.zone)}"
        note = f"{overdue}; {note}" if note else overdue
    return note


def render_history(
    runs: Sequence[Any],
    as_json: bool,
    now: datetime,
    zones: Mapping[str, Zone] | None = None,
    hosts: bool = False,
) -> None:
    """`history`: one row per run, newest first (`hosts`: --fleet's HOST column, no TRIGGER);
    `zones`: each task's zone, for a narrow terminal's short times (else UTC)."""
    if as_json:
        emit_json({"runs": [run_json(r) for r in runs]})
        return
    host = ["HOST"] if hosts else []
    trigger = [] if hosts else ["TRIGGER"]

    def cells(shown: Callable[[datetime, Zone], str]) -> list[list[str]]:
        rows = []
        for r in runs:
            zone = (zones or {}).get(r.task) or parse_zone("UTC")
            rows.append(
                [
                    r.id,
                    r.task,
                    *([r.host] if hosts else []),
                    shown(r.occurrence, zone),
                    r.outcome,
                    *([] if hosts else [run_kind(r)]),
                    _exit_text(r),
                    shown(r.started, zone) if r.started else "-",
                    f"{r.duration_s:.2f}s" if r.duration_s is not None else "-",
                ]
            )
        return rows

    table(
        ["ID", "TASK", *host, "OCCURRENCE", "OUTCOME", *trigger, "EXIT", "STARTED", "DURATION"],
        cells(lambda when, _zone: format_utc(when)),
        drop=("ID", TIMES, "STARTED", "TRIGGER", "DURATION", "HOST", "EXIT"),
        short=lambda: cells(_memo(lambda when, zone: short_time(when, zone, now))),
    )


def render_fleet_status(result: Sequence[Any], as_json: bool) -> None:
    """`status --fleet`: one row per task and machine, with a HOST column."""
    if as_json:
        tasks = [
            {
                "name": row.task,
                "host": row.host,
                "paused": row.paused,
                "pause_reason": row.pause_reason,
                "last_run": row.last_run and run_json(row.last_run),
            }
            for row in result
        ]
        emit_json({"tasks": tasks})
        return
    rows = [
        [
            row.task,
            row.host or "-",
            format_utc(last.occurrence) if (last := row.last_run) else "-",
            last.outcome if last else "-",
            f"{last.duration_s:.1f}s" if last and last.duration_s is not None else "-",
            "paused" + (f" ({row.pause_reason})" if row.pause_reason else "") if row.paused else "",
        ]
        for row in result
    ]
    table(["TASK", "HOST", "LAST RUN", "OUTCOME", "DURATION", "PAUSED"], rows)


def _exit_text(row: Any) -> str:
    """The EXIT column: the code, or the signal that ended the run (``SIGKILL``), or ``-``."""
    if row.exit_code is not None:
        return str(row.exit_code)
    killed = (row.message or "").partition("; ")[0]
    return killed.removeprefix("killed by ") if killed.startswith("killed by ") else "-"
