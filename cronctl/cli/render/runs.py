"""What `run` and `work` print, and ``visible``, which every renderer shows task output
through; apart from render/tables.py so that a `run` loads only what it prints."""

from __future__ import annotations

import sys
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from cronctl.core.model import Problem, format_duration, format_utc
from cronctl.core.visible import visible as visible  # every renderer's, from here

if TYPE_CHECKING:
    from datetime import datetime


def emit_json(data: Any, stream: TextIO | None = None) -> None:
    import json  # only for --json: a quiet `run` never needs it

    print(json.dumps(data, indent=2), file=stream or sys.stdout)


def utc(value: datetime | None) -> str | None:
    return None if value is None else format_utc(value)


def render_problems(problems: Sequence[Problem]) -> None:
    """Problems after a listing, on stderr so the table on stdout stays clean."""
    for problem in problems:
        print(problem.describe(), file=sys.stderr)


def run_json(row: Any, dry_run: bool = False) -> dict[str, Any]:
    """A run as docs/commands.md shows it."""
    return {
        "id": None if dry_run else row.id,
        "task": row.task,
        "occurrence": format_utc(row.occurrence),
        "outcome": row.outcome,
        "exit_code": row.exit_code,
        "started": utc(row.started),
        "duration_s": row.duration_s,
        "host": row.host,
        "trigger": getattr(row, "trigger", "schedule"),
        "attempt": getattr(row, "attempt", 1),
        "upstream": getattr(row, "upstream", "").split(),
    }


def render_run(
    report: Any,
    as_json: bool,
    verbose: bool,
    handled: Collection[str] = frozenset(),
    shown: Collection[str] = frozenset(),
) -> None:
    """`run`: quiet on success; failures with their output tail on stderr (what cron mails),
    but for those in `handled`, and the `-v` lines but those in `shown` (printed as their
    task ended: LiveReports)."""
    if as_json:
        runs = [run_json(r, report.dry_run) for r in report.runs]
        emit_json({"now": format_utc(report.now), "runs": runs})
    elif verbose or report.dry_run:
        lines = run_lines(report, shown)
        for line in lines if lines or report.runs else [idle_line(report)]:
            print(line, flush=True)
    for row in report.failed + getattr(report, "interrupted", []):
        if row.id not in handled:
            render_failure(row)


def run_lines(report: Any, shown: Collection[str] = frozenset()) -> list[str]:
    """One line per occurrence not in `shown`; a task's missed occurrences make one line with
    their count and the jump (hundreds of `missed` lines hid what would run)."""
    lines: list[str] = []
    missed: dict[str, list[Any]] = {}
    for row in report.runs:
        if row.outcome == "missed":
            missed.setdefault(row.task, []).append(row)
    done: set[str] = set()
    for row in report.runs:
        group = missed.get(row.task, [])
        if row.id in shown:
            continue
        if row.outcome != "missed" or len(group) < 2:
            lines.append(run_line(row))
        elif row.task not in done:
            done.add(row.task)
            count, since = report.missed.get(row.task, (len(group), None))
            count = max(count, len(group))
            last = format_utc(group[-1].occurrence)
            if since is None:
                span = f"from {format_utc(group[0].occurrence)} up to this one"
            else:
                gap = format_duration(report.now - since)
                span = (
                    f"the occurrences after {format_utc(since)} up to this one (a jump of "
                    f"{gap} since the last minute dealt with)"
                )
            lines.append(f"{last}  {row.task}  missed x{count}: {span}")
    return lines


def idle_line(report: Any) -> str:
    """`run -v`'s line when no occurrence was dealt with: nothing was due, or an earlier
    `run` or `work` dealt with this minute (every live window already ends at it)."""
    minute = report.now.replace(second=0, microsecond=0)
    plans = list((report.plans or {}).values())
    live = [p for p in plans if not p.done]
    already = live and all(p.since is None and p.last_occurrence == minute for p in live)
    why = (
        ": this minute was already dealt with (by an earlier `cronctl run` or `cronctl work`)"
        if already
        else ""
    )
    return f"{format_utc(minute)}  nothing due{why}"


def starting_line(now: datetime, rows: Sequence[Any]) -> str:
    """`work -v` as a minute's due tasks start: `2026-08-03T09:00:00Z  starting: a, b x2`."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.task] = counts.get(row.task, 0) + 1
    names = ", ".join(f"{t} x{n}" if n > 1 else t for t, n in counts.items())
    return f"{format_utc(now.replace(second=0, microsecond=0))}  starting: {names}"


def run_line(row: Any) -> str:
    """`-v`'s line of one run: `2026-08-03T09:00:00Z  backup  failed exit 4 1.20s`."""
    took = f" {row.duration_s:.2f}s" if row.duration_s is not None else ""
    code = f" exit {row.exit_code}" if row.exit_code is not None and row.exit_code != 0 else ""
    note = f" ({visible(row.message)})" if row.message and row.outcome != "ok" else ""
    return f"{format_utc(row.occurrence)}  {row.task}  {row.outcome}{code}{took}{note}"


def render_failure(row: Any) -> None:
    message = row.message
    if row.outcome == "failed" and row.exit_code is None and (message or "").startswith("killed"):
        # "failed (killed by SIGKILL)": the signal is the reason, never "exit None".
        killed, _, message = message.partition("; ")
        what = f"failed ({killed})"
    else:
        what = {
            "failed": f"failed (exit {row.exit_code})",
            "timeout": "timed out",
            "error": "could not run",
        }.get(row.outcome, row.outcome)
    took = f" after {row.duration_s:.1f}s" if row.duration_s is not None else ""
    lines = [f"cronctl: task {row.task} {what} for {format_utc(row.occurrence)}{took}"]
    if message:
        lines.append(f"  {visible(message)}")
    if row.log_path:
        lines.append(f"  log: {row.log_path}")
    tail = visible(row.tail or "").rstrip("\n")
    lines.extend(f"  | {line}" for line in tail.split("\n") if tail)
    print("\n".join(lines), file=sys.stderr, flush=True)


def run_kind(row: Any) -> str:
    """`history`'s TRIGGER: ``schedule`` or ``manual``, then ``attempt N`` for a retry."""
    kind = getattr(row, "trigger", "schedule")
    attempt = getattr(row, "attempt", 1)
    return f"{kind}, attempt {attempt}" if attempt > 1 else kind
