"""Calendar search over an expression's value sets: the next minute it names (croniter's
`get_next` with `implement_cron_bug`, on the normalized text), or all in a range."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from functools import lru_cache
from itertools import pairwise

from cronctl.core.cronexpr import CronExpr
from cronctl.core.minutes import MINUTE, minute_ceil, minute_floor

_DAY = timedelta(days=1)
# The Gregorian calendar repeats every 400 years: an expression with no day in that
# span has none at all (parse_cron rejects those; this only stops a runaway loop).
_CYCLE_YEARS = 400


@lru_cache(maxsize=4096)
def _times(expr: CronExpr) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return tuple(sorted(expr.hours)), tuple(sorted(expr.minutes))


def day_named(expr: CronExpr, day: date) -> bool:
    return day.month in expr.months and expr.matches_day(day)


def _next_day_until(expr: CronExpr, day: date, until: date) -> date | None:
    """The first day in (day, until] that `expr` names, or None."""
    while day < until:
        day += _DAY
        if day.month not in expr.months:
            if (day.year, day.month) == (until.year, until.month):
                return None
            year, month = day.year, day.month
            for _ in range(12):  # to the first day of the next month named
                year, month = (year + 1, 1) if month == 12 else (year, month + 1)
                if month in expr.months:
                    break
            day = date(year, month, 1) - _DAY
            continue
        if expr.matches_day(day):
            return day
    return None


def next_wall(expr: CronExpr, wall: datetime) -> datetime:
    """The first naive wall minute strictly after `wall` that `expr` names."""
    start = minute_floor(wall) + MINUTE
    hours, minutes = _times(expr)
    day = start.date()
    if day_named(expr, day):
        found = _time_at_or_after(hours, minutes, start.hour, start.minute)
        if found is not None:
            return datetime(day.year, day.month, day.day, found[0], found[1])
    named = _next_day_until(expr, day, date(min(day.year + _CYCLE_YEARS, 9999), 12, 31))
    if named is None:
        raise ValueError(f"{expr.text!r} names no day in {_CYCLE_YEARS} years after {day}")
    return datetime(named.year, named.month, named.day, hours[0], minutes[0])


def _time_at_or_after(
    hours: tuple[int, ...], minutes: tuple[int, ...], hour: int, minute: int
) -> tuple[int, int] | None:
    """The first (hour, minute) of the sets at or after hour:minute on the same day."""
    i = bisect_left(hours, hour)
    if i == len(hours):
        return None
    if hours[i] == hour:
        j = bisect_left(minutes, minute)
        if j < len(minutes):
            return hour, minutes[j]
        i += 1
        if i == len(hours):
            return None
    return hours[i], minutes[0]


def matching_walls(expr: CronExpr, low: datetime, high: datetime) -> Iterator[datetime]:
    """Every naive wall minute in [low, high) that `expr` names, in order."""
    if low >= high:
        return
    hours, minutes = _times(expr)
    first = minute_ceil(low)
    last = high.date()
    day: date | None = first.date()
    if not day_named(expr, first.date()):
        day = _next_day_until(expr, first.date(), last)
    while day is not None:
        whole_day = datetime(day.year, day.month, day.day) >= first and day < last
        for hour in hours:
            for minute in minutes:
                wall = datetime(day.year, day.month, day.day, hour, minute)
                if whole_day or first <= wall < high:
                    yield wall
        day = _next_day_until(expr, day, last)


_DAYS_APART: dict[tuple[object, ...], int | None] = {}
_DAYS_APART_KEPT = 4096


def shortest_wall_gap(expr: CronExpr, first: date, days: int) -> int | None:
    """The shortest gap, in wall minutes, between consecutive minutes `expr` names on the
    `days` days from `first` (None: no two there), from one day's times and the days apart."""
    hours, minutes = _times(expr)
    times = [h * 60 + m for h in hours for m in minutes]
    gaps = [b - a for a, b in pairwise(times)]
    apart = _days_apart(expr, first, days)
    if apart is None:
        return min(gaps) if gaps and _named_days(expr, first, days) else None
    return min([*gaps, apart * 1440 - times[-1] + times[0]])


def _days_apart(expr: CronExpr, first: date, days: int) -> int | None:
    """The fewest days between two days `expr` names in the span (None: fewer than two), kept
    per day rule: thousands of tasks at distinct times share a handful of them."""
    key = (expr.days, expr.weekdays, expr.months, expr.day_star, expr.weekday_star, first, days)
    if key not in _DAYS_APART:
        if len(_DAYS_APART) >= _DAYS_APART_KEPT:
            _DAYS_APART.clear()
        named = _named_days(expr, first, days)
        _DAYS_APART[key] = min(((b - a).days for a, b in pairwise(named)), default=None)
    return _DAYS_APART[key]


def _named_days(expr: CronExpr, first: date, days: int) -> list[date]:
    span = (first + timedelta(days=i) for i in range(days))
    return [day for day in span if day_named(expr, day)]
