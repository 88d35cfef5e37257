"""Many files' results -> one Schedule: settings agreed, names unique."""

from __future__ import annotations

from typing import Any

from cronctl.core.model import Problem, Schedule, Task
from cronctl.core.schema import FileResult, build_settings


def build_schedule(results: list[FileResult]) -> Schedule:
    """Combine per-file results; the first definition of a name wins, later ones are errors."""
    problems: list[Problem] = []
    tasks: list[Task] = []
    seen: dict[str, Task] = {}
    duplicates: list[str] = []
    settings: dict[str, tuple[Any, str]] = {}
    for result in results:
        problems.extend(result.problems)
        for key, (value, line) in result.settings.items():
            if key in settings and settings[key][0] != value:
                first_value, first_file = settings[key]
                problems.append(
                    Problem(
                        result.display,
                        line,
                        None,
                        "error",
                        "settings-conflict",
                        f"[cronctl] {key} = {_show(value)} disagrees with {_show(first_value)} "
                        f"in {first_file}; every file must agree, or set it in one file only",
                    )
                )
            else:
                settings.setdefault(key, (value, result.display))
        for task in result.tasks:
            first = seen.get(task.name)
            if first is None:
                seen[task.name] = task
                tasks.append(task)
                continue
            if task.name not in duplicates:
                duplicates.append(task.name)
            problems.append(
                Problem(
                    result.display,
                    task.line,
                    task.name,
                    "error",
                    "duplicate-name",
                    f"task name {task.name!r} is already used at {first.source}:{first.line}; "
                    "names must be unique across all files (they key locks and claims)",
                )
            )
    return Schedule(
        files=tuple(r.path for r in results),
        tasks=tuple(tasks),
        problems=tuple(problems),
        settings=build_settings({k: v for k, (v, _) in settings.items()}),
        duplicates=tuple(duplicates),
    )


def _show(value: Any) -> str:
    return f'"{value}"' if not isinstance(value, bool | int) else str(value).lower()
