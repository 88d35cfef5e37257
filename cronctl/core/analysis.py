"""Warnings that depend on the calendar: day-or-day, DST gaps and overlaps, past one-shots."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache

from cronctl.core.calendar import herd_warnings
from cronctl.core.cronexpr import CronExpr
from cronctl.core.cronnotes import corner_notes
from cronctl.core.cronwalk import matching_walls
from cronctl.core.minutes import minute_ceil
from cronctl.core.model import Problem, Schedule, Task, format_utc
from cronctl.core.zones import Segment, Zone, transitions, walls_at

DST_WINDOW = timedelta(days=366)


def schedule_warnings(schedule: Schedule, now: datetime) -> list[Problem]:
    """Every warning about the schedule's tasks as of `now`."""
    found: list[Problem] = []
    # Tasks with the same expression, zone, policy and instant get the same notes. parse_cron
    # and parse_zone hand out one object per text, so the objects' identities group the
    # tasks without hashing each task's expression and zone.
    said: dict[tuple[int, int, str, datetime | None], list[tuple[str, str]]] = {}
    for task in schedule.tasks:
        key = (id(task.cron), id(task.zone), task.misfire, task.at)
        notes = said.get(key)
        if notes is None:
            notes = said[key] = _task_notes(task, now)
        if notes:
            where = str(task.source)
            found += (Problem(where, task.line, task.name, "warning", *note) for note in notes)
    found.extend(herd_problems(schedule, now))
    return found


def herd_problems(schedule: Schedule, now: datetime) -> list[Problem]:
    """More than `herd_limit` tasks starting in one minute (README, Herds), located at the first."""
    return [
        Problem(str(task.source), task.line, None, "warning", "herd", message, names)
        for task, message, names in herd_warnings(schedule.tasks, now, schedule.settings.herd_limit)
    ]


def task_warnings(task: Task, now: datetime) -> list[Problem]:
    """The warnings for one task: each names the task, and says what happens and what to do."""
    where = str(task.source)
    return [
        Problem(where, task.line, task.name, "warning", code, message)
        for code, message in _task_notes(task, now)
    ]


def _task_notes(task: Task, now: datetime) -> list[tuple[str, str]]:
    """(code, message) of each warning about the task's schedule, zone, policy and instant."""
    found: list[tuple[str, str]] = []

    def warn(code: str, message: str) -> None:
        found.append((code, message))

    if task.cron is not None and task.cron.day_or_day:
        warn(
            "day-or-day",
            (
                f"schedule {task.cron.text!r} restricts both day-of-month and day-of-week, so it "
                "runs on days matching EITHER (cron's rule), not both; start one of them with '*' "
                "if you meant AND"
            ),
        )
    if task.cron is not None:
        for code, note in _corner_notes(task.cron, task.cron.written):
            warn(code, note)
    if task.at is not None and task.at <= now:
        warn(
            "at-in-past",
            f"one-shot time {format_utc(task.at)} has passed; it will not run "
            "again; remove the task",
        )
    # A task whose hour field names every hour (`every_minute`, `*/15 * * * *`) loses or
    # doubles its runs in a changed hour because that is what its schedule says: no warning.
    if task.cron is not None and not task.zone.fixed and len(task.cron.hours) < 24:
        for code, message in _dst_messages(task.cron, task.zone, task.misfire, now):
            warn(code, message)
    return found


# The warnings depend on the schedule, the zone and the misfire policy, not on the task:
# a large schedule repeats a few of them thousands of times, so each is worked out once.
@lru_cache(maxsize=4096)
def _corner_notes(cron: CronExpr, written: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    # `written` is part of the key: the notes quote the fields as written, which CronExpr
    # leaves out of its equality (`MON/2` and `1/2` are the same expression).
    return tuple(corner_notes(cron))


@lru_cache(maxsize=4096)
def _dst_messages(
    cron: CronExpr, zone: Zone, misfire: str, now: datetime
) -> tuple[tuple[str, str], ...]:
    found = []
    for seg in _seams(zone, now):
        message = _dst_message(cron, zone, misfire, seg)
        if message:
            found.append(message)
    return tuple(found)


@lru_cache(maxsize=256)
def _seams(zone: Zone, now: datetime) -> tuple[Segment, ...]:
    return tuple(transitions(zone, now, now + DST_WINDOW))


def _dst_message(cron: CronExpr, tz: Zone, misfire: str, seg: Segment) -> tuple[str, str] | None:
    assert seg.start is not None
    zone = tz.name
    gap = seg.gap
    if gap is not None:
        hits = _matching_walls(cron, gap[0], gap[1])
        if not hits:
            return None
        day = f"{hits[0]:%Y-%m-%d}"
        count = f"{len(hits)} occurrence{'s' if len(hits) > 1 else ''}"
        if cron.fixed_time:
            what = _gap_policy(cron, tz, misfire, seg, len(hits))
        else:
            what = f"a wildcard schedule has no runs in a gap: those {count} do not happen"
        return "dst-gap", (
            f"on {day} clocks in {zone} spring forward: {_times(hits)} "
            f"{'do' if len(hits) > 1 else 'does'} not exist "
            f"({count} swallowed); {what}"
        )
    repeats = seg.repeats_until
    if repeats is None:
        return None
    first_wall = seg.wall(seg.start)
    hits = _matching_walls(cron, first_wall, repeats)
    if not hits:
        return None
    day = f"{hits[0]:%Y-%m-%d}"
    what = "it runs once, at the first pass" if cron.fixed_time else "it runs in both passes"
    return "dst-overlap", (
        f"on {day} clocks in {zone} fall back: {_times(hits)} "
        f"{'happen' if len(hits) > 1 else 'happens'} twice; {what}"
    )


def _times(walls: list[datetime]) -> str:
    return ", ".join(f"{h:%H:%M}" for h in walls[:3]) + (" ..." if len(walls) > 3 else "")


def _gap_policy(cron: CronExpr, zone: Zone, misfire: str, seg: Segment, swallowed: int) -> str:
    """Where a fixed-time task's swallowed times land and how many runs its policy makes."""
    assert seg.start is not None
    landing = minute_ceil(seg.start)
    where = f"{seg.wall(landing):%H:%M} local ({format_utc(landing)})"
    carried = len(walls_at(cron, zone, landing))
    lands = "they land" if swallowed > 1 else "it lands"
    own = f" besides its own {seg.wall(landing):%H:%M} run" if carried > swallowed else ""
    if misfire == "catch-up":
        return (
            f'{lands} at {where}{own}, where misfire = "catch-up" runs it '
            f"{carried} times in turn, as Debian cron does"
        )
    if carried == 1:
        return f"it runs once at {where} instead"
    others = "the other" if carried == 2 else f"the other {carried - 1}"
    return (
        f'{lands} at {where}{own}, where misfire = "{misfire}" runs it once and '
        f"records {others} as missed (Debian cron runs each, as "
        'misfire = "catch-up" does)'
    )


def _matching_walls(cron: CronExpr, start: datetime, end: datetime) -> list[datetime]:
    return list(matching_walls(cron, start, end))
