"""Use cases behind the commands. Each takes plain values (and the time), returns a dataclass.

The CLI turns flags into arguments and a result into text; nothing here prints.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from cronctl.core.analysis import schedule_warnings
from cronctl.core.cronexpr import minute_floor, parse_cron
from cronctl.core.model import Problem, Schedule, Task
from cronctl.core.zones import next_occurrence, parse_zone
from cronctl.errors import UsageError


@dataclass(frozen=True)
class CheckResult:
    """`cronctl check`: every problem, errors first."""

    problems: list[Problem]
    strict: bool = False

    @property
    def ok(self) -> bool:
        """No errors (and, under --strict, no warnings either)."""
        if self.strict:
            return not self.problems
        return not any(p.severity == "error" for p in self.problems)


@dataclass(frozen=True)
class TaskRow:
    """One row of `cronctl list`."""

    task: Task
    next_run: datetime | None
    paused: bool
    last_run: dict[str, object] | None = None


@dataclass(frozen=True)
class ListResult:
    """`cronctl list`: the good tasks and then the problems."""

    rows: list[TaskRow]
    problems: list[Problem]


@dataclass(frozen=True)
class NextResult:
    """`cronctl next`: the next occurrences of a task or an ad-hoc expression."""

    task: str | None
    expression: str
    timezone: str
    occurrences: list[datetime]


@dataclass(frozen=True)
class DueResult:
    """`cronctl due`: the tasks whose schedule names this minute."""

    at: datetime
    due: list[str] = field(default_factory=list)


def check(schedule: Schedule, now: datetime, extra: list[Problem], strict: bool) -> CheckResult:
    """Validate everything, execute nothing: the loader's problems plus calendar warnings."""
    problems = list(schedule.problems) + schedule_warnings(schedule, now) + extra
    problems.sort(key=lambda p: (p.severity != "error", p.file, p.line or 0))
    return CheckResult(problems, strict)


def list_tasks(schedule: Schedule, now: datetime, extra: list[Problem]) -> ListResult:
    """Every good task with its next run; then the problems (errors and warnings)."""
    rows = [TaskRow(t, t.next_run(now), t.paused) for t in schedule.tasks]
    problems = list(schedule.problems) + schedule_warnings(schedule, now) + extra
    return ListResult(rows, problems)


def next_for_task(schedule: Schedule, name: str, after: datetime, count: int) -> NextResult:
    """The next `count` runs of a task from the schedule."""
    try:
        task = schedule.task(name)
    except KeyError:
        known = ", ".join(t.name for t in schedule.tasks[:10])
        raise UsageError(f"no task named {name!r}; tasks: {known or '(none)'}") from None
    return NextResult(task.name, task.schedule, task.zone.name, task.next_runs(after, count))


def next_for_expression(expression: str, zone_name: str, after: datetime, count: int) -> NextResult:
    """The next `count` runs of an ad-hoc expression in a zone."""
    expr = parse_cron(expression)
    zone = parse_zone(zone_name)
    runs: list[datetime] = []
    cursor = after
    for _ in range(count):
        cursor = next_occurrence(expr, zone, cursor)
        runs.append(cursor)
    return NextResult(None, expr.text, zone.name, runs)


def due(schedule: Schedule, now: datetime) -> DueResult:
    """The names of the tasks due in the minute of `now` (no state, no locks)."""
    minute = minute_floor(now)
    return DueResult(minute, [t.name for t in schedule.due(minute)])


def init(path: Path, force: bool) -> Path:
    """Write the commented starter file; never overwrite one without `force`."""
    from importlib.resources import files

    if path.exists() and not force:
        raise UsageError(f"{path} already exists; pass --force to overwrite it")
    text = files("cronctl").joinpath("data/starter.toml").read_text(encoding="utf-8")
    path.write_text(text, encoding="utf-8")
    return path


def data_dirs(
    schedule: Schedule, flag_state: Path | None, flag_lock: Path | None, env: Mapping[str, str]
) -> tuple[Path, Path]:
    """(state_dir, lock_dir): flag, environment, [cronctl] table, default (SPEC 2)."""
    from cronctl.edge.paths import resolve_dirs

    return resolve_dirs(
        flag_state=flag_state,
        flag_lock=flag_lock,
        env=env,
        file_state=schedule.settings.state_dir,
        file_lock=schedule.settings.lock_dir,
        is_root=os.geteuid() == 0,
    )


def lock_dir_warning(
    schedule: Schedule, lock_dir: Path, only_if_present: bool = False
) -> Problem | None:
    """A warning when on_one_server tasks rely on a lock_dir that only this machine sees.

    `only_if_present` (check, list): a lock_dir that does not exist here says nothing about
    the servers — a CI runner does not have their mount — so it is not judged.
    """
    tasks = [t for t in schedule.tasks if t.on_one_server]
    if not tasks or schedule.settings.lock_dir_shared:
        return None
    if only_if_present and not lock_dir.is_dir():
        return None
    from cronctl.edge.paths import filesystem_type, is_shared_fstype

    fstype = filesystem_type(lock_dir)
    if is_shared_fstype(fstype):
        return None
    names = ", ".join(t.name for t in tasks)
    first = tasks[0]
    return Problem(
        str(first.source),
        first.line,
        None,
        "warning",
        "lock-dir-not-shared",
        f"lock_dir {lock_dir} is on {fstype}, which only this machine sees, so on_one_server "
        f"({names}) holds only here; point lock_dir at a shared mount (NFS, CIFS, CephFS, ...) "
        "or set lock_dir_shared = true in [cronctl] if it is shared in a way cronctl cannot "
        "detect",
    )


NOTICE_INTERVAL_S = 24 * 3600


def daily_notice(state_dir: Path, key: str) -> bool:
    """True at most once a day per key: for warnings `run` would otherwise mail every minute."""
    from cronctl.edge.paths import ensure_private_dir

    stamp = ensure_private_dir(state_dir / "notices") / key
    try:
        age = time.time() - stamp.stat().st_mtime
    except FileNotFoundError:
        age = float("inf")
    if age < NOTICE_INTERVAL_S:
        return False
    stamp.touch(mode=0o600)
    os.utime(stamp)
    return True
