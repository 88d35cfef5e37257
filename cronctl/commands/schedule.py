"""`check` (and its `--diff REF`), `list`, `next`, `due` and `init`: plain values (and the
time) in, a dataclass out; nothing here prints."""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from cronctl.core.analysis import schedule_warnings
from cronctl.core.assemble import build_schedule
from cronctl.core.chains import Chains
from cronctl.core.cronexpr import parse_cron
from cronctl.core.diff import ScheduleDiff, diff_schedules
from cronctl.core.minutes import minute_floor
from cronctl.core.model import DEFAULT_MISFIRE, Problem, Schedule, Task, problem_order, runs_on
from cronctl.core.opskeys import ops_problems
from cronctl.core.values import LATEST
from cronctl.core.warncodes import acknowledge
from cronctl.core.zones import next_occurrence, parse_zone, walls_at
from cronctl.edge import git, secrets
from cronctl.edge.safefiles import write_new
from cronctl.edge.schedfiles import parse_files
from cronctl.errors import UsageError


@dataclass(frozen=True)
class CheckResult:
    """`cronctl check`: every problem, errors first."""

    problems: list[Problem]
    strict: bool = False
    acknowledged: int = 0  # warnings left out: their tasks' ignore_warnings accept them

    @property
    def ok(self) -> bool:
        return not any(self.strict or p.severity == "error" for p in self.problems)


@dataclass(frozen=True, slots=True)
class TaskRow:
    task: Task
    next_run: datetime | None
    paused: bool
    last_run: Any = None  # a store RunRow, when this machine has run the task
    other_hosts: bool = False  # `hosts` leaves this machine out: the task does not run here


@dataclass(frozen=True)
class ListResult:
    rows: list[TaskRow]
    problems: list[Problem]


@dataclass(frozen=True)
class NextResult:
    """`cronctl next`; per occurrence the wall times it stands for (several after a DST gap).
    A chained task's are those of the timed tasks atop its chain (`roots`)."""

    task: str | None
    expression: str
    timezone: str
    occurrences: list[datetime]
    carried: list[tuple[datetime, ...]] = field(default_factory=list)
    misfire: str = DEFAULT_MISFIRE
    after: tuple[str, ...] = ()
    roots: tuple[str, ...] = ()


@dataclass(frozen=True)
class DueResult:
    """`cronctl due`: the tasks whose schedule names this minute."""

    at: datetime
    due: list[str] = field(default_factory=list)


def check(schedule: Schedule, now: datetime, extra: list[Problem], strict: bool) -> CheckResult:
    """Validate everything, execute nothing: the loader's problems plus calendar warnings."""
    problems = list(schedule.problems) + schedule_warnings(schedule, now) + extra
    problems += ops_problems(schedule, now)
    problems += secret_file_problems(schedule, os.environ)
    problems, acknowledged = acknowledge(problems, schedule.tasks)
    problems.sort(key=problem_order)
    return CheckResult(problems, strict, acknowledged)


def secret_file_problems(schedule: Schedule, env: Mapping[str, str]) -> list[Problem]:
    """A warning for each secret file a run could not read, or that others may read: the
    files are looked at (never read: `check` must not hold a secret), in the environment
    `check` runs in (``$CREDENTIALS_DIRECTORY`` is often the service's alone)."""
    credentials = env.get("CREDENTIALS_DIRECTORY") or None
    found: list[Problem] = []
    for task in schedule.tasks:
        for key, path in secrets.paths(task, credentials):
            if (why := secrets.file_warning(path)) is not None:
                where = str(task.source)
                found.append(Problem(where, task.line, task.name, "warning", "secret-file",
                                     f"{key}: {why}"))  # fmt: skip
    return found


def list_tasks(
    schedule: Schedule,
    now: datetime,
    extra: list[Problem],
    last_runs: Mapping[str, Any] | None = None,
    paused: frozenset[str] = frozenset(),
    host: str | None = None,
) -> ListResult:
    """Every good task with its next run and last run (with `host`, whether its `hosts`
    leave that machine out); then the problems."""
    last_runs = last_runs or {}
    nexts = NextRuns()
    rows = []
    for t in schedule.tasks:
        paused_now = t.paused or t.name in paused
        other_hosts = host is not None and not runs_on(t, host)
        rows.append(TaskRow(t, nexts.after(t, now), paused_now, last_runs.get(t.name), other_hosts))
    problems = list(schedule.problems) + schedule_warnings(schedule, now) + extra
    problems = sorted(acknowledge(problems, schedule.tasks)[0], key=problem_order)
    return ListResult(rows, problems)


class NextRuns(dict[tuple[object, datetime], "datetime | None"]):
    """``Task.next_run``, each answer kept: tasks that fire alike (``firing_key``) share it."""

    def after(self, task: Task, at: datetime) -> datetime | None:
        key = (task.firing_key, at)
        if key not in self:
            self[key] = task.next_run(at)
        return self[key]


def find_task(schedule: Schedule, name: str) -> Task:
    """The task named `name`; a usage error that suggests the closest name when none is."""
    try:
        return schedule.task(name)
    except KeyError:
        names = [t.name for t in schedule.tasks]
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else "; see `cronctl list`"
        raise UsageError(f"no task named {name!r} in the schedule{hint}") from None


def next_for_task(schedule: Schedule, name: str, after: datetime, count: int) -> NextResult:
    task = find_task(schedule, name)
    if task.chained:
        graph = Chains(schedule.tasks)
        timed, roots = graph.timed(name), graph.roots(name)
        if timed is None:  # in a cycle: `check` refuses the schedule
            return NextResult(task.name, task.schedule, task.zone.name, [], after=task.after)
        runs = graph.occurrences(name, after, count)
        carried = [timed.walls_at(t) for t in runs]
        return NextResult(task.name, task.schedule, timed.zone.name, runs, carried,
                          timed.misfire, task.after, roots)  # fmt: skip
    runs = task.next_runs(after, count)
    carried = [task.walls_at(t) for t in runs]
    return NextResult(task.name, task.schedule, task.zone.name, runs, carried, task.misfire)


def next_for_expression(
    expression: str, zone_name: str, after: datetime, count: int, misfire: str = DEFAULT_MISFIRE
) -> NextResult:
    """The next `count` runs of an ad-hoc expression in a zone (`misfire`: for DST gaps)."""
    expr = parse_cron(expression)
    zone = parse_zone(zone_name)
    runs: list[datetime] = []
    cursor = after
    for _ in range(count):
        if cursor >= LATEST:  # past it, the next occurrence could be beyond year 9999
            break
        cursor = next_occurrence(expr, zone, cursor)
        runs.append(cursor)
    carried = [walls_at(expr, zone, t) for t in runs]
    return NextResult(None, expr.text, zone.name, runs, carried, misfire)


def due(schedule: Schedule, now: datetime) -> DueResult:
    """The names of the tasks due in the minute of `now` (no state, no locks)."""
    minute = minute_floor(now)
    return DueResult(minute, [t.name for t in schedule.due(minute)])


def init(path: Path, force: bool) -> Path:
    """Write the commented starter file; never overwrite one without `force`."""
    from importlib.resources import files  # here: an import list, check, next and due skip

    if os.path.lexists(path) and not force:
        raise UsageError(f"{path} already exists; pass --force to overwrite it")
    text = files("cronctl").joinpath("data/starter.toml").read_text(encoding="utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    # As `import -o` writes: a link planted at `path` is refused or replaced, never followed.
    write_new(path, text, force)
    return path


def schedule_at(ref: str, given: list[Path] | None, current: list[Path]) -> Schedule:
    """The schedule files (a directory's too) as they were at `ref`, where it has them."""
    paths = list(current)
    env = os.environ.get("CRONCTL_FILE") or ""
    for candidate in given or [Path(p) for p in env.split(os.pathsep) if p]:
        if candidate.is_dir():
            paths += [p for p in git.tomls_at(ref, candidate) if p not in paths]
    found = [(path, data) for path in paths if (data := git.show(ref, path)) is not None]
    return build_schedule(parse_files([p for p, _ in found], [d for _, d in found]))


class UnreadableRevision(Exception):
    """The schedule at the revision has an error: a diff against it would be made up."""

    def __init__(self, ref: str, problem: Problem) -> None:
        super().__init__(
            f"no diff: the schedule at {ref} could not be read ({problem.describe()}); "
            "comparing with it would show its tasks as added. Compare with another revision."
        )


def diff_against(ref: str, given: list[Path] | None, new: Schedule, now: datetime) -> ScheduleDiff:
    """Compare the work tree's schedule `new` with the same files at `ref`; refused when a
    file at `ref` has an error (the old side would not be what ran)."""
    anchor = new.files[0].parent if new.files else Path.cwd()
    git.verify_ref(anchor, ref)
    old = schedule_at(ref, given, list(new.files))
    broken = next((p for p in old.problems if p.severity == "error"), None)
    if broken is not None:
        raise UnreadableRevision(ref, broken)
    return diff_schedules(old, new, now)
