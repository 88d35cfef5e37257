"""`check --diff REF` printed: text lines, a JSON object, or GitHub workflow annotations."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cronctl.core.diff import ScheduleDiff, TaskChange, changed_keys, move_summary
from cronctl.core.model import Task, format_utc
from cronctl.core.zones import Zone


def _where(task: Task) -> str:
    return f"{task.source}:{task.line}" if task.line is not None else str(task.source)


def _runs(task: Task) -> str:
    return f"{task.schedule!r} ({task.zone.name})"


def _wall(when: datetime, zone: Zone) -> str:
    return f"{zone.wall(when):%a %Y-%m-%d %H:%M}"


def _change_lines(change: TaskChange) -> list[str]:
    keys = ", ".join(change.keys)
    lines = [f"{_where(change.new)}: task {change.new.name}: changed: {keys}"]
    if change.moves:
        lines[0] += f"; {move_summary(change)}"
        # One zone for the whole report, the task's (its new one), named: the summary above
        # speaks in wall times, so the lists do too.
        zone = change.new.zone
        lines.append(
            f"  next 14 days, {zone.name} time: {change.gained_count} "
            f"run{'s' * (change.gained_count != 1)} gained, {change.lost_count} lost"
        )
        if change.gained:
            lines.append("  gained: " + ", ".join(_wall(t, zone) for t in change.gained))
        if change.lost:
            lines.append("  lost:   " + ", ".join(_wall(t, zone) for t in change.lost))
    return lines


def diff_text(diff: ScheduleDiff, ref: str) -> list[str]:
    """Human lines, `FILE:LINE: task NAME: what`, like check's problems."""
    lines = [f"{_where(t)}: task {t.name}: added, runs {_runs(t)}" for t in diff.added]
    lines += [f"{t.source}: task {t.name}: removed (ran {_runs(t)})" for t in diff.removed]
    lines += [
        f"{_where(new)}: task {new.name}: renamed from {old.name} (same command)"
        + (f"; also changed: {', '.join(keys)}" if (keys := _renamed_keys(old, new)) else "")
        for old, new in diff.renamed
    ]
    for change in diff.changed:
        lines += _change_lines(change)
    counts = (
        f"{len(diff.added)} added, {len(diff.removed)} removed, {len(diff.renamed)} renamed, "
        f"{len(diff.changed)} changed"
    )
    lines.append(f"since {ref}: {counts}" if not diff.empty else f"since {ref}: no task changed")
    return lines


def _renamed_keys(old: Task, new: Task) -> tuple[str, ...]:
    return tuple(k for k in changed_keys(old, new) if k != "name")


def diff_json(diff: ScheduleDiff, ref: str) -> dict[str, Any]:
    """The `diff` member of `check --format json` when --diff is given."""

    def task(t: Task) -> dict[str, Any]:
        return {"name": t.name, "file": str(t.source), "line": t.line,
                "schedule": t.schedule, "timezone": t.zone.name}  # fmt: skip

    return {
        "ref": ref,
        "from": format_utc(diff.start),
        "until": format_utc(diff.end),
        "added": [task(t) for t in diff.added],
        "removed": [task(t) for t in diff.removed],
        "renamed": [{"from": task(o), "to": task(n)} for o, n in diff.renamed],
        "changed": [
            {
                **task(c.new),
                "keys": list(c.keys),
                "was": task(c.old),
                "summary": move_summary(c) if c.moves else None,
                "gained": [format_utc(t) for t in c.gained],
                "lost": [format_utc(t) for t in c.lost],
                "gained_count": c.gained_count,
                "lost_count": c.lost_count,
            }
            for c in diff.changed
        ],
    }


def annotation(level: str, file: object, line: int | None, title: str, message: str) -> str:
    """A GitHub workflow annotation (`::error file=F,line=L,title=T::message`)."""
    where = f"file={file}" if line is None else f"file={file},line={line}"
    message = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return f"::{level} {where},title={title}::{message}"


def _notice(task: Task, title: str, message: str, line: bool = True) -> str:
    return annotation("notice", task.source, task.line if line else None, title, message)


def diff_github(diff: ScheduleDiff) -> list[str]:
    """Notice annotations on the changed lines (a removed task: on its file)."""
    out = [_notice(t, "cronctl task added", f"{t.name}: new task, runs {_runs(t)}")
           for t in diff.added]  # fmt: skip
    out += [
        _notice(t, "cronctl task removed", f"{t.name}: removed (ran {_runs(t)})", line=False)
        for t in diff.removed
    ]
    out += [
        _notice(n, "cronctl task renamed", f"{n.name}: renamed from {o.name} (same command)")
        for o, n in diff.renamed
    ]
    for change in diff.changed:
        body = "\n".join(_change_lines(change)[1:])
        head = move_summary(change) if change.moves else f"{change.new.name}: changed"
        message = f"{head} ({', '.join(change.keys)} changed)" + (f"\n{body}" if body else "")
        out.append(_notice(change.new, "cronctl schedule change", message))
    return out
