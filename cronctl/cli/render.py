"""Result dataclasses -> a rich table on a terminal, plain text when piped, or JSON.

One renderer per result, so `--json` and the human output cannot disagree.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from cronctl.core.model import Problem, format_utc

if TYPE_CHECKING:
    from cronctl.service import CheckResult, DueResult, ListResult, NextResult


def emit_json(data: Any, stream: TextIO | None = None) -> None:
    """Stable, indented JSON on stdout."""
    import json  # only for --json: a quiet `run` never needs it

    print(json.dumps(data, indent=2), file=stream or sys.stdout)


def problem_json(problem: Problem) -> dict[str, Any]:
    """PROBLEM of SPEC 3: file, line, task, severity, code, message."""
    return {
        "file": problem.file,
        "line": problem.line,
        "task": problem.task,
        "severity": problem.severity,
        "code": problem.code,
        "message": problem.message,
    }


def table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], stream: TextIO | None = None
) -> None:
    """A rich table on a terminal; aligned plain columns when piped (easy to grep and cut)."""
    out = stream or sys.stdout
    if out.isatty():
        from rich.console import Console
        from rich.table import Table

        grid = Table(box=None, header_style="bold", pad_edge=False)
        for header in headers:
            grid.add_column(header, overflow="fold")
        for row in rows:
            grid.add_row(*row)
        Console(file=out, no_color="NO_COLOR" in os.environ, highlight=False).print(grid)
        return
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    for row in [list(headers), *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)


def summary(problems: Sequence[Problem]) -> str:
    """'2 errors, 1 warning' style counts."""
    errors = sum(p.severity == "error" for p in problems)
    warnings = len(problems) - errors
    return f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"


def render_check(result: CheckResult, fmt: str, task_count: int, file_count: int) -> None:
    """`check` in text, json or github form."""
    if fmt == "json":
        emit_json({"ok": result.ok, "problems": [problem_json(p) for p in result.problems]})
        return
    for problem in result.problems:
        if fmt == "github":
            print(_github(problem))
        else:
            print(problem.describe())
    if fmt == "text":
        verdict = "ok" if result.ok else "failed"
        print(
            f"{verdict}: {task_count} task{'s' * (task_count != 1)} in {file_count} "
            f"file{'s' * (file_count != 1)}; {summary(result.problems)}"
        )


def _github(problem: Problem) -> str:
    level = "error" if problem.severity == "error" else "warning"
    where = f"file={problem.file}"
    if problem.line is not None:
        where += f",line={problem.line}"
    task = f"task {problem.task}: " if problem.task else ""
    message = (task + problem.message).replace("%", "%25").replace("\n", "%0A")
    return f"::{level} {where},title=cronctl {problem.code}::{message}"


def render_problems(problems: Sequence[Problem]) -> None:
    """Problems after a listing, on stderr so the table on stdout stays clean."""
    for problem in problems:
        print(problem.describe(), file=sys.stderr)


def render_list(result: ListResult, as_json: bool) -> None:
    """`list`: one row per task, then the problems."""
    if as_json:
        emit_json(
            {
                "tasks": [
                    {
                        "name": row.task.name,
                        "schedule": row.task.schedule,
                        "timezone": row.task.zone.name,
                        "next_run": format_utc(row.next_run) if row.next_run else None,
                        "guards": row.task.guards,
                        "paused": row.paused,
                        "last_run": run_json(row.last_run) if row.last_run else None,
                    }
                    for row in result.rows
                ],
                "problems": [problem_json(p) for p in result.problems],
            }
        )
        return
    rows = []
    for row in result.rows:
        next_run = "paused" if row.paused else (format_utc(row.next_run) if row.next_run else "-")
        last = "-"
        if row.last_run:
            last = f"{format_utc(row.last_run.occurrence)} {row.last_run.outcome}"
        rows.append(
            [
                row.task.name,
                row.task.schedule,
                row.task.zone.name,
                next_run,
                ",".join(row.task.guards) or "-",
                last,
            ]
        )
    table(["TASK", "SCHEDULE", "TIMEZONE", "NEXT RUN", "GUARDS", "LAST RUN"], rows)
    # Errors in full; warnings as a count (a listing is not a lint report: `check` is).
    errors = [p for p in result.problems if p.severity == "error"]
    render_problems(errors)
    warnings = len(result.problems) - len(errors)
    if warnings:
        print(f"{warnings} warning{'s' * (warnings != 1)}; see `cronctl check`", file=sys.stderr)


def render_next(result: NextResult, as_json: bool, local: bool) -> None:
    """`next`: one UTC instant per line (with the zone's wall time beside it)."""
    if as_json:
        emit_json(
            {
                "task": result.task,
                "expression": result.expression,
                "timezone": result.timezone,
                "occurrences": [format_utc(t) for t in result.occurrences],
            }
        )
        return
    from cronctl.core.zones import parse_zone

    zone = parse_zone(result.timezone)
    for when in result.occurrences:
        line = format_utc(when)
        if local and result.timezone != "UTC":
            line += f"  {zone.wall(when):%a %Y-%m-%d %H:%M} {result.timezone}"
        print(line)


def render_due(result: DueResult, as_json: bool) -> None:
    """`due`: the due task names, one per line."""
    if as_json:
        emit_json({"at": format_utc(result.at), "due": result.due})
        return
    for name in result.due:
        print(name)


def run_json(row: Any, dry_run: bool = False) -> dict[str, Any]:
    """RUN of SPEC 3."""
    return {
        "id": None if dry_run else row.id,
        "task": row.task,
        "occurrence": format_utc(row.occurrence),
        "outcome": row.outcome,
        "exit_code": row.exit_code,
        "started": format_utc(row.started) if row.started else None,
        "duration_s": row.duration_s,
        "host": row.host,
    }


def render_run(report: Any, as_json: bool, verbose: bool) -> None:
    """`run`: quiet on success; failures with their output tail on stderr (what cron mails)."""
    if as_json:
        emit_json(
            {
                "now": format_utc(report.now),
                "runs": [run_json(r, report.dry_run) for r in report.runs],
            }
        )
    elif verbose or report.dry_run:
        for row in report.runs:
            print(_run_line(row), flush=True)
    for row in report.failed:
        _failure(row)


def _run_line(row: Any) -> str:
    took = f" {row.duration_s:.2f}s" if row.duration_s is not None else ""
    code = f" exit {row.exit_code}" if row.exit_code is not None and row.exit_code != 0 else ""
    note = f" ({row.message})" if row.message and row.outcome != "ok" else ""
    return f"{format_utc(row.occurrence)}  {row.task}  {row.outcome}{code}{took}{note}"


def _failure(row: Any) -> None:
    what = {
        "failed": f"failed (exit {row.exit_code})",
        "timeout": "timed out",
        "error": "could not run",
    }.get(row.outcome, row.outcome)
    took = f" after {row.duration_s:.1f}s" if row.duration_s is not None else ""
    lines = [f"cronctl: task {row.task} {what} for {format_utc(row.occurrence)}{took}"]
    if row.message:
        lines.append(f"  {row.message}")
    if row.log_path:
        lines.append(f"  log: {row.log_path}")
    lines.extend(f"  | {line}" for line in (row.tail or "").rstrip("\n").splitlines())
    print("\n".join(lines), file=sys.stderr, flush=True)


def render_status(result: Any, as_json: bool) -> None:
    """`status`: one row per task."""
    if as_json:
        emit_json(
            {
                "tasks": [
                    {
                        "name": row.task.name,
                        "paused": row.paused,
                        "pause_reason": row.pause_reason,
                        "next_run": format_utc(row.next_run) if row.next_run else None,
                        "last_run": run_json(row.last_run) if row.last_run else None,
                        "consecutive_failures": row.consecutive_failures,
                        "missed": row.missed,
                        "note": row.note,
                    }
                    for row in result.rows
                ]
            }
        )
        return
    rows = []
    for row in result.rows:
        last = row.last_run
        rows.append(
            [
                row.task.name,
                format_utc(last.occurrence) if last else "-",
                last.outcome if last else "-",
                f"{last.duration_s:.1f}s" if last and last.duration_s is not None else "-",
                "paused" if row.paused else (format_utc(row.next_run) if row.next_run else "-"),
                str(row.consecutive_failures),
                str(row.missed),
                row.note or (row.pause_reason or "" if row.paused else ""),
            ]
        )
    table(["TASK", "LAST RUN", "OUTCOME", "DURATION", "NEXT RUN", "FAILS", "MISSED", "NOTE"], rows)


def render_history(runs: Sequence[Any], as_json: bool, hosts: bool = False) -> None:
    """`history`: one row per run, newest first (`hosts`: with a HOST column, for --fleet)."""
    if as_json:
        emit_json({"runs": [run_json(r) for r in runs]})
        return
    host = ["HOST"] if hosts else []
    table(
        ["ID", "TASK", *host, "OCCURRENCE", "OUTCOME", "EXIT", "STARTED", "DURATION"],
        [
            [
                r.id,
                r.task,
                *([r.host] if hosts else []),
                format_utc(r.occurrence),
                r.outcome,
                "-" if r.exit_code is None else str(r.exit_code),
                format_utc(r.started) if r.started else "-",
                f"{r.duration_s:.2f}s" if r.duration_s is not None else "-",
            ]
            for r in runs
        ],
    )


def render_fleet_status(result: Any, as_json: bool) -> None:
    """`status --fleet`: one row per task and machine, with a HOST column."""
    if as_json:
        emit_json(
            {
                "tasks": [
                    {
                        "name": row.task,
                        "host": row.host,
                        "paused": row.paused,
                        "pause_reason": row.pause_reason,
                        "last_run": run_json(row.last_run) if row.last_run else None,
                    }
                    for row in result.rows
                ]
            }
        )
        return
    rows = []
    for row in result.rows:
        last = row.last_run
        rows.append(
            [
                row.task,
                row.host or "-",
                format_utc(last.occurrence) if last else "-",
                last.outcome if last else "-",
                f"{last.duration_s:.1f}s" if last and last.duration_s is not None else "-",
                "paused" + (f" ({row.pause_reason})" if row.pause_reason else "")
                if row.paused
                else "",
            ]
        )
    table(["TASK", "HOST", "LAST RUN", "OUTCOME", "DURATION", "PAUSED"], rows)
