"""Warnings that depend on the calendar: day-or-day, DST gaps and overlaps, past one-shots."""

from __future__ import annotations

from datetime import datetime, timedelta

from cronctl.core.cronexpr import CronExpr, minute_ceil
from cronctl.core.model import Problem, Schedule, Task, format_utc
from cronctl.core.zones import Segment, transitions

_MINUTE = timedelta(minutes=1)
DST_WINDOW = timedelta(days=366)


def schedule_warnings(schedule: Schedule, now: datetime) -> list[Problem]:
    """Every warning about the schedule's tasks as of `now`."""
    found: list[Problem] = []
    for task in schedule.tasks:
        found.extend(task_warnings(task, now))
    found.extend(herd_problems(schedule, now))
    return found


def herd_problems(schedule: Schedule, now: datetime) -> list[Problem]:
    """SPEC 10.2: more than `herd_limit` tasks starting in one minute, located at the first."""
    from cronctl.core.calendar import herd_warnings

    return [
        Problem(str(task.source), task.line, None, "warning", "herd", message)
        for task, message in herd_warnings(schedule.tasks, now, schedule.settings.herd_limit)
    ]


def task_warnings(task: Task, now: datetime) -> list[Problem]:
    """The warnings for one task: each names the task, and says what happens and what to do."""
    found: list[Problem] = []

    def warn(code: str, message: str) -> None:
        found.append(Problem(str(task.source), task.line, task.name, "warning", code, message))

    if task.cron is not None and task.cron.day_or_day:
        warn(
            "day-or-day",
            (
                f"schedule {task.cron.text!r} restricts both day-of-month and day-of-week, so it "
                "runs on days matching EITHER (cron's rule), not both; start one of them with '*' "
                "if you meant AND"
            ),
        )
    if task.at is not None and task.at <= now:
        warn(
            "at-in-past",
            f"one-shot time {format_utc(task.at)} has passed; it will not run "
            "again; remove the task",
        )
    if task.cron is not None and not task.zone.fixed:
        for seg in transitions(task.zone, now, now + DST_WINDOW):
            message = _dst_message(task, task.cron, seg)
            if message:
                warn(*message)
    return found


def _dst_message(task: Task, cron: CronExpr, seg: Segment) -> tuple[str, str] | None:
    assert seg.start is not None
    zone = task.zone.name
    gap = seg.gap
    if gap is not None:
        hits = _matching_walls(cron, gap[0], gap[1])
        if not hits:
            return None
        day = f"{hits[0]:%Y-%m-%d}"
        times = ", ".join(f"{h:%H:%M}" for h in hits[:3]) + (" ..." if len(hits) > 3 else "")
        if cron.fixed_time:
            what = (
                f"it runs once at {seg.wall(minute_ceil(seg.start)):%H:%M} local "
                f"({format_utc(seg.start)}) instead"
            )
        else:
            what = "those runs do not happen"
        return "dst-gap", (
            f"on {day} clocks in {zone} spring forward: {times} do not exist; {what}"
        )
    repeats = seg.repeats_until
    if repeats is None:
        return None
    first_wall = seg.wall(seg.start)
    hits = _matching_walls(cron, first_wall, repeats)
    if not hits:
        return None
    day = f"{hits[0]:%Y-%m-%d}"
    times = ", ".join(f"{h:%H:%M}" for h in hits[:3]) + (" ..." if len(hits) > 3 else "")
    what = "it runs once, at the first pass" if cron.fixed_time else "it runs in both passes"
    return "dst-overlap", (f"on {day} clocks in {zone} fall back: {times} happen twice; {what}")


def _matching_walls(cron: CronExpr, start: datetime, end: datetime) -> list[datetime]:
    walls: list[datetime] = []
    probe = minute_ceil(start)
    while probe < end:
        if cron.matches(probe):
            walls.append(probe)
        probe += _MINUTE
    return walls
