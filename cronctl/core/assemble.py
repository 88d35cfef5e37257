"""Many files' results -> one Schedule: settings agreed, names unique."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cronctl.core.chains import Chains, unknown_problems
from cronctl.core.groups import Group
from cronctl.core.model import Problem, Schedule, Settings, Task, problem_order
from cronctl.core.schema import FileResult


def build_schedule(results: list[FileResult]) -> Schedule:
    """Combine per-file results; the first definition of a name wins, later ones are errors."""
    problems: list[Problem] = []
    tasks: list[Task] = []
    seen: dict[str, tuple[str, int | None]] = {}
    duplicates: list[str] = []
    settings: dict[str, tuple[Any, str]] = {}
    for result in results:
        problems.extend(result.problems)
        for key, (value, line) in result.settings.items():
            if key in settings and settings[key][0] != value:
                first_value, first_file = settings[key]
                message = (
                    f"[cronctl] {key} = {_show(value)} disagrees with {_show(first_value)} "
                    f"in {first_file}; every file must agree, or set it in one file only"
                )
                problems.append(_error(result.display, line, None, "settings-conflict", message))
            else:
                settings.setdefault(key, (value, result.display))
        defined = {(t.name, t.line): t for t in result.tasks}
        for name, line in result.names:
            first = seen.get(name)
            if first is None:
                seen[name] = (result.display, line)
                if (name, line) in defined:
                    tasks.append(defined[(name, line)])
                continue
            if name not in duplicates:
                duplicates.append(name)
            message = (
                f"task name {name!r} is already used at {first[0]}:{first[1]}; "
                "names must be unique across all files (they key locks and claims)"
            )
            problems.append(_error(result.display, line, name, "duplicate-name", message))
    # Each task's group limit from the [[group]] tables of every file (names unique across
    # files, as task names are); a task naming no group defined anywhere is an error.
    groups: dict[str, tuple[Group, str]] = {}
    for result in results:
        for group in result.groups:
            if (defined_at := groups.get(group.name)) is None:
                groups[group.name] = (group, result.display)
                continue
            where = f"{defined_at[1]}:{defined_at[0].line}"
            message = f"group {group.name!r} is already defined at {where}; define each once"
            problems.append(_error(result.display, group.line, None, "duplicate-group", message))
    shown = {r.path: r.display for r in results}
    joined: list[Task] = []
    for task in tasks:
        found = groups.get(task.group) if task.group else None
        if task.group and found is None:
            known = ", ".join(sorted(groups)) or "none is defined"
            message = (
                f"group = {task.group!r} names no [[group]] table (groups: {known}); add a "
                f"[[group]] with name = '{task.group}' and max_running = N, or fix the name"
            )
            file = shown.get(task.source, str(task.source))
            problems.append(_error(file, task.line, task.name, "unknown-group", message))
        joined.append(task if found is None else replace(task, group_limit=found[0].max_running))
    tasks = joined
    if any(task.chained for task in tasks):
        problems += unknown_problems(tasks, list(seen), shown)
        problems += Chains(tasks).problems(shown)
    # One order everywhere (check, list, run): errors first, then by file and line.
    problems.sort(key=problem_order)
    built = Settings(**{k: v for k, (v, _) in settings.items()})
    # A task without its own max_output takes [cronctl]'s, which any file may set.
    tasks = [t if t.max_output is not None else replace(t, max_output=built.max_output)
             for t in tasks]  # fmt: skip
    return Schedule(
        files=tuple(r.path for r in results),
        tasks=tuple(tasks),
        problems=tuple(problems),
        settings=built,
        duplicates=tuple(duplicates),
        tables=sum(r.tables for r in results),
    )


def _error(file: str, line: int | None, task: str | None, code: str, message: str) -> Problem:
    return Problem(file, line, task, "error", code, message)


def _show(value: Any) -> str:
    return f'"{value}"' if not isinstance(value, bool | int) else str(value).lower()
