"""Decoded TOML -> tasks and located problems. Never raises on bad input."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cronctl.core import schedules
from cronctl.core.capkeys import CAP_FIELDS, CAP_KEYS, cap_value_problem
from cronctl.core.chains import outcome_problem, read_after
from cronctl.core.cronexpr import parse_cron
from cronctl.core.envkeys import ENV_KEYS, env_problem, parse_size
from cronctl.core.groups import Group, name_problem, parse_groups
from cronctl.core.model import CHAINED, MISFIRE_POLICIES, START_ONLY, TASK_NAME, Problem, Task
from cronctl.core.opskeys import OPS_FIELDS, OPS_KEYS, ops_value_problem
from cronctl.core.tomllines import LineIndex
from cronctl.core.values import (
    KINDS,
    ONE_LINE_KEYS,
    Check,
    check_env,
    check_line,
    check_text,
    did_you_mean,
    parse_duration,
    resolve_path,
    suggestion,
)
from cronctl.core.zones import parse_zone
from cronctl.errors import CronSyntaxError, DurationError, ZoneError

_BOOL: Check = ("bool", "true or false")
_SHELL_COMMAND: Check = ("str", "a shell command string")
_DIRECTORY: Check = ("str", "a directory path string")
GUARD_KEYS: dict[str, Check] = {
    "timezone": ("str", 'a string such as "UTC", "+05:30" or "Europe/Berlin"'),
    "when": _SHELL_COMMAND,
    "skip": _SHELL_COMMAND,
    "without_overlapping": ("bool_or_str", 'true/false or a duration such as "30m"'),
    "on_one_server": _BOOL,
    "timeout": ("str", 'a duration string such as "1h"'),
    "misfire": ("str", 'one of "coalesce", "catch-up", "skip"'),
    "misfire_grace": ("str", 'a duration string such as "10m"'),
    "workdir": _DIRECTORY,
    "shell": ("str", 'a path string such as "/bin/bash"'),
    "env": ("str_table", 'a table of strings, e.g. { PATH = "/usr/bin:/bin" }'),
    "group": ("str", "the name of a [[group]] table, as a string"),
    **OPS_KEYS,
    **CAP_KEYS,
}
#: [defaults] takes the guard keys, and these two of a task's secrets and output keys.
DEFAULTS_KEYS = {**GUARD_KEYS, **{k: ENV_KEYS[k] for k in ("env_files", "max_output")}}
SCHEDULE_KEYS: dict[str, Check] = {
    "cron": ("str", "a cron expression string"),
    "every_minute": ("bool", "true"),
    "every_minutes": ("int", "an integer that divides 60"),
    "hourly": ("bool", "true"),
    "hourly_at": ("int", "an integer minute 0-59"),
    "daily": ("bool", "true"),
    "daily_at": ("str", 'a time string "HH:MM"'),
    "twice_daily": ("list", "an array of two hours, e.g. [1, 13]"),
    "weekly": ("bool", "true"),
    "weekly_on": ("list", 'an array [day, "HH:MM"], e.g. [1, "09:00"]'),
    "monthly": ("bool", "true"),
    "monthly_on": ("list", 'an array [day-of-month, "HH:MM"], e.g. [15, "00:00"]'),
    "yearly": ("bool", "true"),
    "at": ("datetime", "a TOML date-time with an offset, e.g. 2026-12-24T18:00:00Z"),
}
TASK_KEYS: dict[str, Check] = {
    "name": ("str", "a string"),
    "command": ("command", "a string, or a non-empty array of strings"),
    "description": ("str", "a string"),
    **dict.fromkeys(("weekdays", "weekends", "paused", "on_start"), _BOOL),
    "days": ("str", 'a day-of-week string such as "1-5" or "MON,WED"'),
    "after": ("str_or_list", 'a task name, or an array of task names, e.g. ["extract"]'),
    "after_outcome": ("str", 'one of "ok", "failed", "any"'),
    **ENV_KEYS,
    **GUARD_KEYS,
    **SCHEDULE_KEYS,
}
_PATH_SETTINGS = ("state_dir", "lock_dir", "metrics_file")
SETTINGS_KEYS: dict[str, Check] = {
    "state_dir": _DIRECTORY,
    "lock_dir": _DIRECTORY,
    "lock_dir_shared": _BOOL,
    "max_parallel": ("int", "a positive integer"),
    "coordination": ("str", 'a "postgresql://..." URL string'),
    "herd_limit": ("int", "a positive integer"),
    "metrics_file": ("str", "a file path string"),
    "project": ("str", 'a project name string such as "billing"'),
    "max_output": ENV_KEYS["max_output"],
}
#: A project name becomes a directory name and a key prefix: safe characters only, so it
#: never escapes its directory ("..", "/") and means the same on every machine of a fleet.
PROJECT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
TOP_KEYS = ("cronctl", "defaults", "group", "task")
#: The Task fields that are the key's value as written (absent: the field's default).
_AS_WRITTEN: tuple[str, ...] = ("description", "when", "skip", "on_one_server", "misfire")
_AS_WRITTEN += ("shell", "paused", "on_start", "after_outcome", "group")
DAY_KEYS = ("weekdays", "weekends", "days")


@dataclass
class FileResult:
    """What one file contributed: its tasks, its problems, its [cronctl] values."""

    path: Path
    display: str
    tasks: list[Task] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    settings: dict[str, tuple[Any, int | None]] = field(default_factory=dict)
    # Every well-formed task name with its line, valid task or not: duplicates are found
    # at once, not only after the other errors in those tasks are fixed.
    names: list[tuple[str, int | None]] = field(default_factory=list)
    # Every path the file's text was resolved to, by (kind, base, text): what the result
    # depends on besides the file's bytes (a link under a workdir), for a cache to recheck.
    resolved: dict[tuple[str, str, str], Path] = field(default_factory=dict)
    # Every [[task]] table, valid or not: `check` counts what the file defines, not only
    # what survived validation ("0 tasks" for five broken tasks misleads).
    tables: int = 0
    groups: list[Group] = field(default_factory=list)  # valid [[group]] tables

    def add(self, line: int | None, task: str | None, code: str, message: str) -> None:
        self.problems.append(Problem(self.display, line, task, "error", code, message))


def parse_document(doc: dict[str, Any], lines: LineIndex, result: FileResult) -> None:
    for key in doc:
        if key not in TOP_KEYS:
            message = (
                f"unknown table or key {key!r}{did_you_mean(key, TOP_KEYS)}; "
                "a schedule file has [cronctl], [defaults], [[group]] and [[task]] tables"
            )
            at = lines.table_line(key) or lines.table_line("", key) or 1
            result.add(at, None, "unknown-key", message)
    base = result.path.parent
    settings = doc.get("cronctl", {})
    if _table_ok(settings, "cronctl", lines, result):
        for key, (value, line) in _good(settings, "cronctl", lines, result).items():
            if key == "max_output":
                value = parse_size(value)
            elif key in _PATH_SETTINGS:
                value = _resolve(result, key, base, value)
            result.settings[key] = (value, line)
    defaults = doc.get("defaults", {})
    good_defaults: dict[str, Any] = {}
    if _table_ok(defaults, "defaults", lines, result):
        good_defaults = {k: v for k, (v, _) in _good(defaults, "defaults", lines, result).items()}
    if "group" in doc:
        add = lambda line, code, message: result.add(line, None, code, message)  # noqa: E731
        where = lambda i, key: lines.group_line(i, key) or lines.table_line("", "group")  # noqa: E731
        result.groups = parse_groups(doc["group"], where, add)
    tasks = doc.get("task", [])
    if not isinstance(tasks, list):
        message = "'task' must be an array of tables: write each task under [[task]]"
        result.add(lines.table_line("", "task") or 1, None, "bad-type", message)
        return
    result.tables = len(tasks)
    for index, raw in enumerate(tasks):
        if not isinstance(raw, dict):
            message = "each task must be a table: write it under [[task]]"
            result.add(lines.task_line(index) or 1, None, "bad-type", message)
        elif task := _parse_task(raw, index, good_defaults, base, lines, result):
            result.tasks.append(task)


def _table_ok(value: object, name: str, lines: LineIndex, result: FileResult) -> bool:
    if not isinstance(value, dict):
        result.add(lines.table_line("", name) or 1, None, "bad-type", f"[{name}] must be a table")
    return isinstance(value, dict)


def _check_type(key: str, value: object, table: dict[str, Check]) -> tuple[str, str] | None:
    kind, expected = table[key]
    if KINDS[kind](value):
        return None
    return f"{key!r} must be {expected}, not {_describe(value)}", "bad-type"


def _describe(value: object) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return "an empty array" if not value else "an array of other types"
    if isinstance(value, dict):
        strings = all(isinstance(v, str) for v in value.values())
        return "a table" if strings else "a table with non-string values"
    return f"a {type(value).__name__}"


def _good(
    table: dict[str, Any], name: str, lines: LineIndex, result: FileResult
) -> dict[str, tuple[Any, int | None]]:
    """The [cronctl] or [defaults] keys of the right type and value, with their lines; the
    others are reported."""
    keys, check = _TABLES[name]
    good = {}
    for key, value in table.items():
        line = lines.table_line(name, key)
        if key not in keys:
            hint = did_you_mean(key, list(keys))
            if name == "defaults" and key in TASK_KEYS:
                hint += " (it belongs in each [[task]])"
            result.add(line, None, "unknown-key", f"unknown key {key!r} in [{name}]{hint}")
        elif problem := _check_type(key, value, keys) or check(key, value):
            result.add(line, None, problem[1], problem[0])
        else:
            good[key] = (value, line)
    return good


def _setting_problem(key: str, value: Any) -> tuple[str, str] | None:
    """Value checks of a [cronctl] key whose type is right: (message, code) or None."""
    if key in ("max_parallel", "herd_limit") and value < 1:
        return f"{key!r} must be at least 1", "bad-value"
    if key == "coordination" and not value.startswith(("postgresql://", "postgres://")):
        # The value is not echoed: it may hold a password.
        return "'coordination' must be a postgresql:// URL", "bad-value"
    if key == "project" and not PROJECT_NAME.fullmatch(value):
        return (
            f"'project' {value[:80]!r} is not a project name: use 1-64 lower-case letters, "
            "digits, '-' and '_', starting with a letter or digit (e.g. project = \"billing\")",
            "bad-value",
        )
    if key == "max_output":
        return (bad, "bad-value") if (bad := env_problem(key, value)) else None
    # A NUL or an escape in `coordination` would reach stderr (cron mail) raw in every
    # store message.
    if key in ("coordination", *_PATH_SETTINGS) and (bad := check_line(key, value)):
        return bad, "bad-value"
    if key in _PATH_SETTINGS and not value:
        return f"{key!r} must not be empty", "bad-value"
    return None


def _check_value(key: str, value: Any, own: object = None) -> tuple[str, str] | None:
    """Value checks of a task or [defaults] key whose type is right: (message, code) or None;
    `own` is the task's name."""
    if key in OPS_KEYS:
        return ops_value_problem(key, value)
    if key in CAP_KEYS:
        return cap_value_problem(key, value)
    if key in ENV_KEYS:
        return (bad, "bad-value") if (bad := env_problem(key, value)) else None
    if key == "after":
        after = read_after(value, own)
        return (after.problem, "bad-value") if after.problem else None
    if key == "after_outcome":
        return (bad, "bad-value") if (bad := outcome_problem(value)) else None
    if key in ONE_LINE_KEYS and isinstance(value, str) and (bad := check_line(key, value)):
        return bad, "bad-value"
    if key not in GUARD_KEYS:
        return None
    try:
        if key in ("timeout", "misfire_grace") or (
            key == "without_overlapping" and isinstance(value, str)
        ):
            parse_duration(value)
        elif key == "timezone":
            parse_zone(value)
        elif key == "misfire" and value not in MISFIRE_POLICIES:
            allowed = ", ".join(f'"{p}"' for p in MISFIRE_POLICIES)
            return f"misfire {value!r} is not one of {allowed}", "bad-value"
        elif key == "group":
            return name_problem(value)
        elif key in ("when", "skip", "shell", "workdir") and not value.strip():
            return f"{key!r} must not be empty", "bad-value"
        elif bad := _text_problem(key, value):
            return bad, "bad-value"
    except DurationError as exc:
        return f"{key!r}: {exc}", "bad-duration"
    except ZoneError as exc:
        return str(exc), "bad-timezone"
    return None


_TABLES = {"cronctl": (SETTINGS_KEYS, _setting_problem), "defaults": (DEFAULTS_KEYS, _check_value)}


def _text_problem(key: str, value: Any) -> str | None:
    """NUL bytes and unusable env names: values exec and open would refuse on every run."""
    if key == "env":
        return check_env(value)
    if key == "command" and isinstance(value, list):
        parts = [part for part in value if isinstance(part, str)]
        return next((bad for part in parts if (bad := check_text(key, part))), None)
    return check_text(key, value) if isinstance(value, str) else None


def _parse_task(
    raw: dict[str, Any],
    index: int,
    defaults: dict[str, Any],
    base: Path,
    lines: LineIndex,
    result: FileResult,
) -> Task | None:
    header = lines.task_line(index, "name")
    name = raw.get("name")
    label: str | None = name if isinstance(name, str) else None
    ok = True

    def report(key: str | None, code: str, message: str) -> None:
        nonlocal ok
        ok = False
        result.add(lines.task_line(index, key), label, code, message)

    if "name" not in raw:
        report(
            None, "missing-key", "task has no 'name'; add name = \"...\" (it keys locks and claims)"
        )
    mistyped = False  # a schedule, day or `after` key that cannot be read: no schedule to read
    for key, value in raw.items():
        if key not in TASK_KEYS:
            report(key, "unknown-key", f"unknown key {key!r}{did_you_mean(key, list(TASK_KEYS))}")
            # `schedule = "..."` is its schedule, misnamed: no second error that it has none
            mistyped |= suggestion(key, list(TASK_KEYS)) in SCHEDULE_KEYS
        elif problem := _check_type(key, value, TASK_KEYS) or _check_value(key, value, name):
            report(key, problem[1], problem[0])
            bad_type = problem[1] == "bad-type"
            mistyped |= key == "after" or (bad_type and (key in SCHEDULE_KEYS or key in DAY_KEYS))
    if isinstance(name, str) and not re.fullmatch(TASK_NAME, name):
        report(
            "name",
            "bad-name",
            f"task name {name!r} is not allowed: use 1-100 of A-Z a-z 0-9 "
            "and . _ : - starting with a letter or digit (the name becomes a lock file name)",
        )
    elif isinstance(name, str):
        result.names.append((name, header))
    command = raw.get("command")
    if "command" not in raw:
        report("name", "missing-key", "task has no 'command'; add command = \"...\"")
    elif isinstance(command, str) and not command.strip():
        report("command", "bad-value", "'command' is empty; give the shell command to run")
    elif bad := _text_problem("command", command):
        report("command", "bad-value", bad)
    keys = sorted(
        (k for k in raw if k in SCHEDULE_KEYS), key=lambda k: lines.task_line(index, k) or 0
    )
    chained = "after" in raw
    start_only = not keys and not chained and raw.get("on_start") is True
    day_key = next((k for k in DAY_KEYS if k in raw), None)
    if chained:
        # A chained task's keys that ask for times of its own: a time key, a day key, on_start.
        key = CHAINED
        if keys:
            report(
                keys[0],
                "schedule-conflict",
                f"task has both 'after' and {keys[0]!r}: a chained task runs after its upstream "
                f"tasks, never at times of its own; keep one of them",
            )
        if day_key:
            report(
                day_key,
                "schedule-conflict",
                f"{day_key!r} restricts a schedule, and a chained task has none (it runs after "
                "its upstream tasks); remove it, or put it on the task at the top of the chain",
            )
        if raw.get("on_start"):
            report(
                "on_start",
                "schedule-conflict",
                "on_start and 'after' are two ways to start a task: a chained task runs only "
                "after its upstream tasks; remove on_start",
            )
    elif "after_outcome" in raw:
        report(
            "after_outcome",
            "missing-key",
            "'after_outcome' says which end of its upstream tasks a chained task waits for, "
            "and this task has no 'after'; add after = [...] or remove it",
        )
    if start_only:
        key = START_ONLY
        if day_key:
            report(
                day_key,
                "schedule-conflict",
                f"{day_key!r} restricts a schedule, and this task has none (on_start only); "
                "add a schedule key or remove it",
            )
    elif not keys and not chained and not mistyped:
        report(
            "name",
            "missing-key",
            f"task has no schedule; give exactly one of: {', '.join(SCHEDULE_KEYS)} (or after = "
            '["NAME"], to run it after another task; or on_start = true, to run it only when '
            "cronctl work starts)",
        )
    elif len(keys) > 1 and not chained:
        report(
            keys[1],
            "schedule-conflict",
            f"task has two schedules, {keys[0]!r} and {keys[1]!r}; keep exactly one",
        )
    if mistyped or (len(keys) != (0 if chained else 1) and not start_only):
        return None
    cron, at = None, None
    if not start_only and not chained:
        # The schedule is checked even when other keys are wrong, so one pass reports all.
        key = keys[0]
        try:
            cron_text, at = schedules.to_cron(key, raw[key], raw)
            cron = parse_cron(cron_text) if cron_text is not None else None
        except schedules.ScheduleProblem as exc:
            report(exc.key or key, exc.code, str(exc))
            return None
        except CronSyntaxError as exc:
            report(key, exc.code, str(exc))
            return None
    settings = {**defaults, **raw}
    # Merged only when of the right kind: a wrong one is reported above, and the checks
    # below still run so that one pass reports every problem.
    env = raw.get("env", {})
    settings["env"] = {**defaults.get("env", {}), **(env if isinstance(env, dict) else {})}
    # Lists that add to the defaults' rather than replace them: env_files (a later file wins
    # a name both set) and ignore_warnings (a task accepting one more code keeps the codes its
    # [defaults] accepted for the whole file, such as a shared zone's dst-gap).
    for joined in ("env_files", "ignore_warnings"):
        own = raw.get(joined, ())
        items = [*defaults.get(joined, ()), *(own if isinstance(own, list) else ())]
        settings[joined] = tuple(dict.fromkeys(items))
    # A name set both by `env` and by `env_from_file`: which would win is not obvious.
    if isinstance(raw.get("env_from_file"), dict) and (
        both := sorted(set(raw["env_from_file"]) & set(settings["env"]))
    ):
        message = f"{both[0]!r} is set by both 'env' and 'env_from_file'; keep one"
        report("env_from_file", "bad-value", message)
    if not ok:
        return None
    assert isinstance(name, str)
    if raw.get("on_start") and settings.get("on_one_server"):
        # A claim is keyed by an occurrence; a start has none that machines share.
        message = (
            "on_start runs on every machine whose cronctl work starts: on_one_server covers "
            "only the scheduled occurrences; make the start-up command idempotent"
        )
        where = lines.task_line(index, "on_start")
        result.problems.append(
            Problem(result.display, where, name, "warning", "on-start-every-server", message)
        )
    overlap = settings.get("without_overlapping", False)
    timeout = settings.get("timeout")
    grace = settings.get("misfire_grace")
    command = raw["command"]
    return Task(
        name=name,
        command=command if isinstance(command, str) else tuple(command),
        schedule_key=key,
        schedule_value=schedules.describe_value(raw.get(key, True)),
        cron=cron,
        at=at,
        zone=parse_zone(settings.get("timezone", "UTC")),
        source=result.path,
        line=header,
        without_overlapping=bool(overlap),
        overlap_lease=parse_duration(overlap) if isinstance(overlap, str) else None,
        timeout=parse_duration(timeout) if timeout else None,
        misfire_grace=parse_duration(grace) if grace else None,
        workdir=_resolve(result, "workdir", base, settings.get("workdir", ".")),
        env=dict(settings["env"]),
        after=read_after(raw["after"], name).names if "after" in raw else (),
        env_files=settings["env_files"],
        env_from_file=dict(raw.get("env_from_file", {})),
        max_output=parse_size(settings["max_output"]) if "max_output" in settings else None,
        **{key: settings[key] for key in _AS_WRITTEN if key in settings},
        **{k: conv(settings[k]) for k, conv in (OPS_FIELDS | CAP_FIELDS).items() if k in settings},
    )


def _resolve(result: FileResult, kind: str, base: Path, text: str) -> Path:
    """A path from the file, read against the file's directory, noted in `result`; tasks
    share a few, so each is resolved once per file."""
    key = (kind, str(base), text)
    if key not in result.resolved:
        result.resolved[key] = resolve_path(kind, base, text)
    return result.resolved[key]
