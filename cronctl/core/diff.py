"""Two schedules compared, for `check --diff REF`: what a change adds, removes and moves."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timedelta

from cronctl.core.calendar import occurrences
from cronctl.core.describe import describe, describe_cron, weekday_names
from cronctl.core.model import Schedule, Task

DIFF_WINDOW = timedelta(days=14)
SHOWN = 10  # occurrences listed per direction; the counts cover the whole window

# Where a task is written is not what it does: moving it in the file is no change.
_IGNORED = {"source", "line"}
_SCHEDULE_FIELDS = {"schedule_key", "schedule_value", "cron", "at"}


@dataclass(frozen=True)
class TaskChange:
    """A task in both revisions whose definition differs."""

    old: Task
    new: Task
    keys: tuple[str, ...]  # what changed: "schedule", "timezone", "command", ...
    gained: tuple[datetime, ...] = ()  # the first SHOWN occurrences the change adds
    lost: tuple[datetime, ...] = ()
    gained_count: int = 0
    lost_count: int = 0

    @property
    def moves(self) -> bool:
        return bool(self.gained_count or self.lost_count)


@dataclass(frozen=True)
class ScheduleDiff:
    """Tasks added, removed, renamed (same command) and changed between two revisions."""

    added: tuple[Task, ...]
    removed: tuple[Task, ...]
    renamed: tuple[tuple[Task, Task], ...]  # (old, new)
    changed: tuple[TaskChange, ...]
    start: datetime
    end: datetime

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.renamed or self.changed)


def changed_keys(old: Task, new: Task) -> tuple[str, ...]:
    """The task keys whose values differ, the schedule keys reported as one "schedule"."""
    names = {"zone": "timezone", **dict.fromkeys(_SCHEDULE_FIELDS, "schedule")}
    keys = (
        names.get(item.name, item.name)
        for item in fields(Task)
        if item.name not in _IGNORED and getattr(old, item.name) != getattr(new, item.name)
    )
    return tuple(dict.fromkeys(keys))


def diff_schedules(old: Schedule, new: Schedule, now: datetime) -> ScheduleDiff:
    """Compare `old` (e.g. the base branch) with `new` over the 14 days after `now`."""
    end = now + DIFF_WINDOW
    before = {t.name: t for t in old.tasks}
    after = {t.name: t for t in new.tasks}
    added = [t for name, t in after.items() if name not in before]
    removed = [t for name, t in before.items() if name not in after]
    renamed: list[tuple[Task, Task]] = []
    for task in list(added):
        twin = next((r for r in removed if r.command == task.command), None)
        if twin is not None:
            renamed.append((twin, task))
            added.remove(task)
            removed.remove(twin)
    changed = []
    for name, task in after.items():
        if (was := before.get(name)) is None or not (keys := changed_keys(was, task)):
            continue
        if was.fingerprint == task.fingerprint and was.paused == task.paused:
            changed.append(TaskChange(was, task, keys))
            continue
        old_runs = set() if was.paused else set(occurrences(was, now, end))
        new_runs = set() if task.paused else set(occurrences(task, now, end))
        gained, lost = sorted(new_runs - old_runs), sorted(old_runs - new_runs)
        shown = tuple(gained[:SHOWN]), tuple(lost[:SHOWN])
        changed.append(TaskChange(was, task, keys, *shown, len(gained), len(lost)))
    return ScheduleDiff(tuple(added), tuple(removed), tuple(renamed), tuple(changed), now, end)


def time_of_day(task: Task) -> str | None:
    """'02:00' when the task runs at one wall time each day it runs, else None."""
    cron = task.cron
    if cron is None or len(cron.minutes) != 1 or len(cron.hours) != 1:
        return None
    return f"{next(iter(cron.hours)):02d}:{next(iter(cron.minutes)):02d}"


def when_words(task: Task) -> str:
    """A schedule as a reviewer reads a move: 'Monday 07:30', '03:00 every day', else words."""
    cron = task.cron
    time = time_of_day(task)
    if cron is None or time is None or len(cron.months) < 12:
        return describe_cron(cron) if cron is not None else describe(task)
    if len(cron.weekdays) == 7 and len(cron.days) == 31:
        return f"{time} every day"
    if len(cron.days) == 31:
        return f"{weekday_names(cron.weekdays)} {time}"
    return describe_cron(cron)


def move_summary(change: TaskChange) -> str:
    """'this change moves X from Monday 07:30 to Tuesday 07:30' (in the zone it names)."""
    old, new = change.old, change.new
    name = new.name
    if old.paused != new.paused:
        return f"this change {'pauses' if new.paused else 'resumes'} {name}"
    was, now = time_of_day(old), time_of_day(new)
    same_days = (
        old.cron is not None
        and new.cron is not None
        and (old.cron.days, old.cron.months, old.cron.weekdays, old.cron.day_star)
        == (new.cron.days, new.cron.months, new.cron.weekdays, new.cron.day_star)
    )
    zones = old.zone.name if old.zone == new.zone else f"{old.zone.name} -> {new.zone.name}"
    if was and now and same_days:
        if was == now:
            return f"this change moves {name} at {now} from {old.zone.name} to {new.zone.name}"
        return f"this change moves {name} from {was} to {now} ({zones})"
    before, after = when_words(old), when_words(new)
    if before == after:  # the words hide the difference: show the expressions too
        before, after = f"{before} ({old.schedule!r})", f"{after} ({new.schedule!r})"
    return f"this change moves {name} from {before} to {after} ({zones})"
