"""A schedule in words, for `list`: "at 03:00, Monday through Friday" (not cron-descriptor's,
which reads `0 0 */2 * 1` as "every 2 days, or on Monday")."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from cronctl.core.cronexpr import CronExpr, ranges, spans
from cronctl.core.model import Task, format_utc
from cronctl.core.values import DAYS

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")  # fmt: skip


def _join(words: list[str], last: str = "and") -> str:
    if len(words) <= 2:
        return f" {last} ".join(words)
    return ", ".join(words[:-1]) + f" {last} " + words[-1]


def _named(values: list[int], names: tuple[str, ...], base: int) -> str:
    return _join(ranges(values, lambda v: names[v - base], " through "))


def _numbers(values: list[int]) -> str:
    step = values[1] - values[0] if len(values) >= 3 else 0
    if step > 1 and values == list(range(values[0], values[-1] + 1, step)):
        return f"{values[0]}, {values[1]}, ..., {values[-1]}"
    return _join(ranges(values, str, "-", 2))


def _time(cron: CronExpr) -> str:
    minutes, hours = sorted(cron.minutes), sorted(cron.hours)
    all_hours = len(hours) == 24
    if len(minutes) * len(hours) <= 4:
        times = [f"{h:02d}:{m:02d}" for h in hours for m in minutes]
        return f"at {_join(times)}"
    if len(minutes) == 60:
        what = "every minute"
    elif len(minutes) >= 3 and minutes == list(range(minutes[0], 60, minutes[1] - minutes[0])):
        step = minutes[1] - minutes[0]
        what = f"every {step} minutes" + (f" from :{minutes[0]:02d}" if minutes[0] else "")
    else:
        what = "every hour at " + _join([f":{m:02d}" for m in minutes])
    if all_hours:
        return what
    step = hours[1] - hours[0] if len(hours) >= 3 else 0
    if step > 1 and hours == list(range(hours[0], 24, step)) and what.startswith("every hour"):
        start = f", from {hours[0]:02d}:00" if hours[0] else ""
        return f"every {step} hours at {what.removeprefix('every hour at ')}{start}"
    hour_spans = spans(hours)
    if len(hour_spans) <= 2:
        return what + ", " + _join([f"{a:02d}:00-{b:02d}:59" for a, b in hour_spans])
    return what + f", in the hours {_numbers(hours)}"


def weekday_names(weekdays: frozenset[int]) -> str:
    """Cron's 0-6 (Sunday 0) in words, Monday first: 'Monday through Friday'."""
    return _named(sorted((d - 1) % 7 + 1 for d in weekdays), (*DAYS[1:], DAYS[0]), 1)


def _days(cron: CronExpr) -> str:
    days, weekdays = sorted(cron.days), sorted(cron.weekdays)
    on_weekdays = weekday_names(cron.weekdays)
    on_days = f"day{'s' * (len(days) != 1)} {_numbers(days)} of the month"
    if cron.day_or_day:
        # Cron's rule: two restricted day fields match on EITHER.
        return f"on {on_days} and on every {on_weekdays}"
    weekday_words = on_weekdays if "through" in on_weekdays else f"on {on_weekdays}"
    if len(weekdays) < 7 and len(days) < 31:
        # A day field starting with '*' makes cron AND them: say so (cron-descriptor says "or").
        return f"{weekday_words}, but only on {on_days}"
    if len(weekdays) < 7:
        return weekday_words
    return f"on {on_days}" if len(days) < 31 else ""


@lru_cache(maxsize=4096)
def describe_cron(cron: CronExpr) -> str:
    """An expression in words (times are wall times in the task's zone); cached: a large
    schedule repeats a few dozen expressions thousands of times."""
    words = [_time(cron)]
    days = _days(cron)
    if days:
        words.append(days)
    months = sorted(cron.months)
    if len(months) < 12:
        words.append("in " + _named(months, _MONTHS, 1))
    return ", ".join(words)


def describe(task: Task) -> str:
    """The task's schedule in words, its zone named when it is not UTC."""
    if task.chained:
        names = _join(list(task.after))
        if len(task.after) == 1:
            verb = {"ok": "succeeds", "failed": "fails"}.get(task.after_outcome, "ends")
        else:
            verb = {"ok": "succeed", "failed": "end, if one failed"}.get(task.after_outcome, "end")
        return f"after {names} {verb}"
    if task.cron is None:
        if task.at is None:
            return "once each time cronctl work starts"
        text = f"once, at {format_utc(task.at)}"
    else:
        text = describe_cron(task.cron)
        text = text if task.zone.name == "UTC" else f"{text} ({task.zone.name} time)"
    return f"{text}; and when cronctl work starts" if task.on_start else text


def gap_note(moved: Sequence[str], own: str | None, misfire: str) -> str:
    """What a spring-forward gap does to the instant its swallowed wall times (`moved`) land
    on, beside its own wall time (`own`) when the task fires then too."""
    carried = len(moved) + (own is not None)
    many = len(moved) > 1
    note = f"{', '.join(moved)} {'do' if many else 'does'} not exist (DST change) and "
    note += ("land" if many else "lands") + (f" on its own {own} run" if own else " here")
    if carried == 1:
        return note
    if misfire == "catch-up":
        return note + "; each runs, in turn"
    others = "the other" if carried == 2 else f"the other {carried - 1}"
    return note + f"; run once, {others} recorded as missed"
