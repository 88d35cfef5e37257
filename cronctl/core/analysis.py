"""Warnings about schedules: day-or-day, DST gaps and overlaps, past one-shots, herds, and
the Vixie corners an accepted expression relies on (lists led by '*', day-of-week steps that
reach 7, steps that do not divide the field), valid cron worth a sentence each."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache

from cronctl.core.calendar import herd_warnings
from cronctl.core.cronexpr import _DAYS, _FIELDS, _MONTHS, CronExpr, _compress, _Field
from cronctl.core.cronwalk import matching_walls
from cronctl.core.minutes import minute_ceil
from cronctl.core.model import Problem, Schedule, Task, format_utc
from cronctl.core.values import DAYS
from cronctl.core.zones import Segment, Zone, transitions, walls_at

DST_WINDOW = timedelta(days=366)


def schedule_warnings(schedule: Schedule, now: datetime) -> list[Problem]:
    """Every warning about the schedule's tasks as of `now`."""
    found: list[Problem] = []
    # Tasks with the same expression, zone, policy and instant share notes (by identity, as
    # Task.firing_key groups them).
    said: dict[tuple[int, int, str, datetime | None], list[tuple[str, str]]] = {}
    for task in schedule.tasks:
        key = (id(task.cron), id(task.zone), task.misfire, task.at)
        notes = said.get(key)
        if notes is None:
            notes = said[key] = _task_notes(task, now)
        found += (Problem(str(task.source), task.line, task.name, "warning", *n) for n in notes)
    # More than `herd_limit` tasks starting in one minute, located at the first.
    herds = herd_warnings(schedule.tasks, now, schedule.settings.herd_limit)
    found += (Problem(str(t.source), t.line, None, "warning", "herd", m, n) for t, m, n in herds)
    return found


def task_warnings(task: Task, now: datetime) -> list[Problem]:
    notes = _task_notes(task, now)
    return [Problem(str(task.source), task.line, task.name, "warning", *n) for n in notes]


def _task_notes(task: Task, now: datetime) -> list[tuple[str, str]]:
    """(code, message) of each warning about the task's schedule, zone, policy and instant."""
    found: list[tuple[str, str]] = []
    if task.cron is not None and task.cron.day_or_day:
        message = (
            f"schedule {task.cron.text!r} restricts both day-of-month and day-of-week, so it "
            "runs on days matching EITHER (cron's rule), not both; start one of them with '*' "
            "if you meant AND"
        )
        found.append(("day-or-day", message))
    if task.cron is not None:
        found += _corner_notes(task.cron, task.cron.written)
    if task.at is not None and task.at <= now:
        message = f"one-shot time {format_utc(task.at)} has passed; it will not run again; "
        found.append(("at-in-past", message + "remove the task"))
    # A task whose hour field names every hour (`every_minute`, `*/15 * * * *`) loses or
    # doubles its runs in a changed hour because that is what its schedule says: no warning.
    if task.cron is not None and not task.zone.fixed and len(task.cron.hours) < 24:
        found += _dst_messages(task.cron, task.zone, task.misfire, now)
    return found


# The warnings depend on the schedule, the zone and the misfire policy, not on the task:
# a large schedule repeats a few of them thousands of times, so each is worked out once.
@lru_cache(maxsize=4096)
def _dst_messages(
    cron: CronExpr, zone: Zone, misfire: str, now: datetime
) -> tuple[tuple[str, str], ...]:
    messages = (_dst_message(cron, zone, misfire, seg) for seg in _seams(zone, now))
    return tuple(message for message in messages if message)


@lru_cache(maxsize=256)
def _seams(zone: Zone, now: datetime) -> tuple[Segment, ...]:
    return tuple(transitions(zone, now, now + DST_WINDOW))


def _dst_message(cron: CronExpr, tz: Zone, misfire: str, seg: Segment) -> tuple[str, str] | None:
    assert seg.start is not None
    zone = tz.name
    gap = seg.gap
    if gap is not None:
        hits = list(matching_walls(cron, gap[0], gap[1]))
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
    hits = list(matching_walls(cron, first_wall, repeats))
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


@lru_cache(maxsize=4096)
def _corner_notes(cron: CronExpr, fields: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(code, sentence) for each corner `cron` uses. `fields` (as written) is part of the
    key: the notes quote them, and CronExpr leaves them out of its equality."""
    sets = [cron.minutes, cron.hours, cron.days, cron.months, cron.weekdays]
    notes: list[tuple[str, str]] = []
    for index, (spec, field) in enumerate(zip(fields, _FIELDS, strict=True)):
        if spec.startswith("*") and "," in spec:
            notes.append(("cron-star-list", _star_list_note(index, fields, sets)))
        if index in (0, 1):
            note = _uneven_step_note(spec, index)
            if note:
                notes.append(("cron-uneven-step", note))
        if field.name == "day-of-week":
            for item in spec.split(","):
                note = _weekday_step_note(item)
                if note:
                    notes.append(("cron-weekday-step", note))
    return tuple(notes)


def _star_list_note(index: int, fields: tuple[str, ...], sets: list[frozenset[int]]) -> str:
    field = _FIELDS[index]
    named = _describe(sets[index], field)
    head = f"{field.name} {fields[index]!r} is a list led by '*': it means {named}"
    if index in (0, 1):
        return (
            f"{head}, and the leading '*' makes the task a wildcard one for daylight "
            "saving (no runs in a spring-forward gap, runs in both passes of a fall-back hour)"
        )
    if index == 3:
        return head
    other = 4 if index == 2 else 2
    if fields[other].startswith("*"):
        return f"{head} (both day fields start with '*', so a day must match both)"
    other_named = _describe(sets[other], _FIELDS[other])
    return (
        f"{head}; because it starts with '*', cron ANDs it with {_FIELDS[other].name} "
        f"{fields[other]!r}: the task runs only on days that are both ({named} and "
        f"{other_named}){_nth_weekday(sets[2], sets[4])}"
    )


_NTH = {1: "first", 8: "second", 15: "third", 22: "fourth"}
_DAY_VALUES = {d: i for i, d in enumerate(_DAYS)}


def _nth_weekday(days: frozenset[int], weekdays: frozenset[int]) -> str:
    """`*/100,1-7` with `MON` -> ': the first Monday of the month'."""
    first = min(days)
    if len(weekdays) != 1 or first not in _NTH or days != frozenset(range(first, first + 7)):
        return ""
    return f": the {_NTH[first]} {DAYS[min(weekdays)]} of the month"


def _uneven_step_note(spec: str, index: int) -> str | None:
    """`*/7` minutes: cron restarts the step each hour, so the last gap is short (or long)."""
    base, slash, step_text = spec.partition("/")
    if not slash or "," in spec or "-" in base or not step_text.isdigit():
        return None
    if base != "*" and not base.isdigit():
        return None
    size = 60 if index == 0 else 24
    start, step = (0 if base == "*" else int(base)), int(step_text)
    values = range(start, size, step) if step else range(0)
    if len(values) < 2:
        return None
    last = values[-1]
    gap = size - last + start
    if gap == step:
        return None
    divisors = ", ".join(str(d) for d in range(1, size) if size % d == 0)
    if index == 0:
        where, unit, period = f":{last:02d} then :{start:02d}", "minute", "hour"
    else:
        where, unit, period = f"hour {last} then hour {start}", "hour", "day"
    article = "an" if gap in (8, 11, 18) else "a"
    return (
        f"{spec} in {unit}s runs at {where} \u2014 {article} {gap}-{unit} gap each {period}, not "
        f"{step}: cron starts the step again every {period} and {step} does not divide "
        f"{size}; use a step that divides {size} ({divisors}) for even spacing, or list the "
        f"{unit}s to show the uneven gap is meant"
    )


def _weekday_step_note(item: str) -> str | None:
    base, slash, step_text = item.partition("/")
    if not slash or base == "*" or "-" in base or not step_text.isdigit():
        return None
    start = _DAY_VALUES.get(base.upper(), int(base) if base.isdigit() else 0)
    days = range(start, 8, int(step_text))
    if start in (0, 7) or 7 not in days:
        return None
    names = [_DAYS[d % 7].title() for d in days]
    listed = ", ".join(names[:-1]) + f" and {names[-1]}"
    meant = ",".join(_DAYS[d] for d in days if d != 7)
    return (
        f"day-of-week {item!r} counts up to 7, which is Sunday again: it means {listed} "
        f"(and Debian's crontab rejects the form); write the days out ({meant} if Sunday "
        "is not meant)"
    )


def _describe(values: frozenset[int], field: _Field) -> str:
    if field.name == "day-of-week":
        return ", ".join(_DAYS[v].title() for v in sorted(values))
    if field.name == "month":
        return ", ".join(_MONTHS[v - 1].title() for v in sorted(values))
    noun = {"minute": "minutes", "hour": "hours", "day-of-month": "days"}[field.name]
    return f"{noun} {_compress(sorted(values))}"
