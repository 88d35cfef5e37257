"""`[[group]]` tables and the task key `group`: how many of a group's tasks may run at once,
on this machine (lock_dir) or across the fleet (PostgreSQL)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cronctl.core.model import GROUP_NAME

MAX_RUNNING = 1000

_TYPES: dict[str, tuple[type, str]] = {
    "name": (str, 'a string such as "db-heavy"'),
    "max_running": (int, f"an integer 1-{MAX_RUNNING}"),
}

Report = Callable[[int | None, str, str], None]  # (line, code, message)
Locate = Callable[[int, str | None], int | None]  # (table index, key) -> line


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Group:
    name: str
    max_running: int
    line: int | None


def name_problem(value: str) -> tuple[str, str] | None:
    """The task key `group` (or a group's `name`) whose type is right: (message, code)."""
    if re.fullmatch(GROUP_NAME, value):
        return None
    return (
        f"group name {value[:80]!r} is not allowed: use 1-64 of A-Z a-z 0-9 and . _ : - "
        "starting with a letter or digit",
        "bad-value",
    )


def parse_groups(raw: object, locate: Locate, report: Report) -> list[Group]:
    """The valid [[group]] tables of one file; every mistake is reported, never raised."""
    if not isinstance(raw, list):
        report(locate(0, None) or 1, "bad-type",
               "'group' must be an array of tables: write each group under [[group]]")  # fmt: skip
        return []
    groups: list[Group] = []
    for index, table in enumerate(raw):
        if not isinstance(table, dict):
            report(locate(index, None), "bad-type",
                   "each group must be a table: write it under [[group]]")  # fmt: skip
            continue
        group = _parse_group(table, index, locate, report)
        if group is not None:
            groups.append(group)
    return groups


def _parse_group(table: dict[str, Any], index: int, locate: Locate, report: Report) -> Group | None:
    name = table.get("name")
    label = f"group {name[:80]!r}" if isinstance(name, str) else "group"
    ok = True

    def bad(key: str | None, code: str, message: str) -> None:
        nonlocal ok
        ok = False
        report(locate(index, key), code, f"{label}: {message}")

    typed: dict[str, Any] = {}
    for key, value in table.items():
        if key not in _TYPES:
            bad(key, "unknown-key", f"unknown key {key!r} in [[group]]; a group has only "
                "name and max_running")  # fmt: skip
            continue
        kind, expected = _TYPES[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            bad(key, "bad-type", f"{key!r} must be {expected}")
        else:
            typed[key] = value
    for key in _TYPES:
        if key not in table:
            bad(None, "missing-key", f"[[group]] has no {key!r}; add {key} = "
                + ('"..."' if key == "name" else "N"))  # fmt: skip
    if (name := typed.get("name")) is not None and (problem := name_problem(name)):
        bad("name", problem[1], problem[0])
    limit = typed.get("max_running")
    if limit is not None and not 1 <= limit <= MAX_RUNNING:
        bad("max_running", "bad-value", f"'max_running' must be 1-{MAX_RUNNING}, not {limit}")
    if not ok:
        return None
    return Group(typed["name"], typed["max_running"], locate(index, "name"))
