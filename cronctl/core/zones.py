"""Time zones and a task's wall-clock schedule mapped onto UTC instants: one offset per
segment of UTC time, Debian cron's rule at the seams (docs/schedule-file.md, daylight saving)."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from math import ceil

from cronctl.core.cronexpr import CronExpr
from cronctl.core.cronwalk import matching_walls, next_wall
from cronctl.core.minutes import MINUTE, minute_ceil, minute_floor
from cronctl.errors import ZoneError

# Compiled on first use (re's cache), not at import: a schedule all in UTC never needs it.
_OFFSET = r"^([+-])(\d{2}):(\d{2})$"
_MAX_OFFSET = timedelta(hours=18)
# How far ahead a segment's end is looked for; beyond it an offset is taken as final.
_HORIZON_YEARS = 5
# The most occurrences one instant carries (a DST gap's swallowed times plus its own): each
# has its own identity, the instant plus 0-59 seconds (see cronctl.core.due).
MAX_PER_INSTANT = 60


@dataclass(frozen=True, slots=True)
class Segment:
    """A stretch of UTC time [start, end) with one UTC offset (None: unbounded)."""

    start: datetime | None
    end: datetime | None
    offset: timedelta
    prev_offset: timedelta | None

    def wall(self, instant: datetime) -> datetime:
        return (instant.astimezone(UTC) + self.offset).replace(tzinfo=None)

    def instant(self, wall: datetime) -> datetime:
        return (wall - self.offset).replace(tzinfo=UTC)

    @property
    def repeats_until(self) -> datetime | None:
        """After a fall back: wall times before this one were already shown by the last segment."""
        if self.start is None or self.prev_offset is None or self.prev_offset <= self.offset:
            return None
        return (self.start + self.prev_offset).replace(tzinfo=None)

    @property
    def gap(self) -> tuple[datetime, datetime] | None:
        """After a spring forward: the wall times [first, end) that never happened."""
        if self.start is None or self.prev_offset is None or self.prev_offset >= self.offset:
            return None
        return (
            (self.start + self.prev_offset).replace(tzinfo=None),
            (self.start + self.offset).replace(tzinfo=None),
        )


@dataclass(frozen=True, slots=True)
class Zone:
    """A task's time zone: "UTC", a fixed offset "+05:45", or an IANA name."""

    name: str
    tz: tzinfo
    fixed: bool

    def __hash__(self) -> int:
        # Equal zones share their name (see CronExpr.__hash__ for why not all three fields).
        return hash(self.name)

    def segment_at(self, instant: datetime) -> Segment:
        _require_aware(instant)
        if self.fixed:
            offset = self.tz.utcoffset(None)
            assert offset is not None
            return Segment(None, None, offset, None)
        start, end = _iana_segment_cached(self.name, instant.replace(second=0, microsecond=0))
        prev = _offset(self.tz, start - timedelta(seconds=1)) if start is not None else None
        return Segment(start, end, _offset(self.tz, instant), prev)

    def wall(self, instant: datetime) -> datetime:
        return self.segment_at(instant).wall(instant)


# The longest IANA name has 30 characters and 3 parts; these leave room for local ones.
_MAX_NAME = 128
_MAX_PARTS = 8


@lru_cache(maxsize=512)
def parse_zone(text: str) -> Zone:
    """Read "UTC", "±HH:MM" or an IANA name; raise ZoneError with what to write instead."""
    if text == "UTC":
        return Zone("UTC", UTC, fixed=True)
    match = re.match(_OFFSET, text)
    if match:
        sign, hours, minutes = match.groups()
        delta = timedelta(hours=int(hours), minutes=int(minutes))
        if int(minutes) >= 60 or delta > _MAX_OFFSET:
            raise ZoneError(f"offset {text!r} is out of range; use -18:00 to +18:00")
        return Zone(text, timezone(-delta if sign == "-" else delta), fixed=True)
    if text.startswith(("+", "-")) or text[:1].isdigit():
        raise ZoneError(f"offset {text!r} is not of the form +HH:MM or -HH:MM (e.g. +05:30)")
    if len(text) > _MAX_NAME or text.count("/") >= _MAX_PARTS:
        # zoneinfo looks a long name up as nested packages of tzdata, one import per part:
        # ~400 parts exhausted Python's recursion limit ("internal error RecursionError").
        raise ZoneError(
            f"time zone name {text[:40]!r}... is too long to be one: IANA names have at most "
            f"{_MAX_PARTS} parts and {_MAX_NAME} characters (e.g. America/Argentina/Salta)"
        )
    # Only an IANA name needs the time zone database.
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        tz = ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ZoneError(
            f"unknown time zone {text!r}; use UTC, an offset like +05:30, "
            "or an IANA name like Europe/Berlin"
        ) from None
    return Zone(text, tz, fixed=False)


def next_occurrence(expr: CronExpr, zone: Zone, after: datetime) -> datetime:
    """The first UTC instant strictly after `after` at which `expr` fires in `zone`."""
    after = _require_aware(after).astimezone(UTC)
    if zone.fixed and after < _DAILY_UNTIL:
        times = _daily_times(expr)
        if times is not None:
            return _next_daily(times, zone, after)
    return _next_from(expr, zone, zone.segment_at(after), after)[0]


# Beyond this the day after an occurrence (plus an offset) could leave datetime's range.
_DAILY_UNTIL = datetime(9999, 12, 29, tzinfo=UTC)


@lru_cache(maxsize=4096)
def _daily_times(expr: CronExpr) -> tuple[int, ...] | None:
    """The minutes of the day `expr` names, sorted, if it names the same ones every day
    (`*/5 * * * *`, `0 3 * * *`); else None."""
    if len(expr.months) < 12 or len(expr.days) < 31 or len(expr.weekdays) < 7:
        return None
    return tuple(sorted(h * 60 + m for h in expr.hours for m in expr.minutes))


def _next_daily(times: tuple[int, ...], zone: Zone, after: datetime) -> datetime:
    """next_occurrence of an expression that names `times` every day, in a fixed zone, with
    no calendar walk (docs/architecture.md, the every-day shortcut)."""
    offset = zone.tz.utcoffset(None)
    assert offset is not None  # a fixed zone's offset
    wall = after + offset  # still marked UTC, but reading as the wall clock
    day = wall.replace(hour=0, minute=0, second=0, microsecond=0)
    i = bisect_right(times, wall.hour * 60 + wall.minute)
    if i < len(times):
        return day + timedelta(minutes=times[i]) - offset
    return day + timedelta(days=1, minutes=times[0]) - offset


def occurrences_after(expr: CronExpr, zone: Zone, after: datetime) -> Iterator[datetime]:
    """Every UTC instant after `after` at which `expr` fires, in order: next_occurrence
    again and again, without finding the segment anew for each."""
    after = _require_aware(after).astimezone(UTC)
    seg: Segment | None = zone.segment_at(after)
    while True:
        # An occurrence found inside a segment lies in it (at or after its start, before
        # its end): the segment next_occurrence would find for it.
        instant, seg = _next_from(expr, zone, seg or zone.segment_at(after), after)
        yield instant
        after = instant


def _next_from(
    expr: CronExpr, zone: Zone, seg: Segment, after: datetime
) -> tuple[datetime, Segment | None]:
    """next_occurrence from the segment holding `after` (UTC): the instant, and the segment
    holding it (None: it is the first minute after a gap, which begins a segment)."""
    cursor = seg.wall(minute_floor(after))
    while True:
        candidate = next_wall(expr, cursor)
        instant = seg.instant(candidate)
        if seg.end is None or instant < seg.end:
            repeats_until = seg.repeats_until
            if expr.fixed_time and repeats_until is not None and candidate < repeats_until:
                cursor = candidate  # the second pass of a time the first pass already ran
                continue
            return instant, seg
        following = zone.segment_at(seg.end)
        gap = following.gap
        if expr.fixed_time and gap is not None and candidate < gap[1]:
            # Its wall time never happened: run right after the gap.
            return minute_ceil(seg.end), None
        seg = following
        # Search from the segment's first minute, inclusive.
        assert seg.start is not None  # a segment that follows another has a start
        cursor = seg.wall(minute_ceil(seg.start)) - MINUTE


def fires_at(expr: CronExpr, zone: Zone, minute: datetime) -> bool:
    """Whether `expr` fires at the UTC `minute`: one minute tested, no search."""
    return bool(walls_at(expr, zone, minute))


def walls_at(expr: CronExpr, zone: Zone, minute: datetime) -> tuple[datetime, ...]:
    """The naive wall times whose occurrence is the UTC `minute`, oldest first: its own, and
    after a spring-forward gap a fixed-time expression's swallowed ones before it (Debian
    cron runs each). At most MAX_PER_INSTANT, the newest kept."""
    minute = _require_aware(minute).astimezone(UTC)
    day = minute.replace(hour=0, minute=0, second=0, microsecond=0)
    if not zone.fixed and _settled(zone.name, day):
        # No change of offset near: no gap ends here and no fall back repeats, so the answer
        # is the segment's without finding the segment (years of day probes, see below).
        wall = (minute + _offset(zone.tz, minute)).replace(tzinfo=None)
        return (wall,) if expr.matches(wall) else ()
    return segment_walls(expr, zone.segment_at(minute), minute)


def segment_walls(expr: CronExpr, seg: Segment, minute: datetime) -> tuple[datetime, ...]:
    wall = seg.wall(minute)
    own: tuple[datetime, ...] = ()
    if expr.matches(wall):
        repeats_until = seg.repeats_until
        if not (expr.fixed_time and repeats_until is not None and wall < repeats_until):
            own = (wall,)
    gap = seg.gap
    if not expr.fixed_time or gap is None or seg.start is None or minute != minute_ceil(seg.start):
        return own
    swallowed: list[datetime] = []
    probe = minute_ceil(gap[0])
    while probe < gap[1]:
        if expr.matches(probe):
            swallowed.append(probe)
        probe += MINUTE
    return (*swallowed, *own)[-MAX_PER_INSTANT:]


def firing_minutes(expr: CronExpr, zone: Zone, start: datetime, end: datetime) -> list[datetime]:
    """Every UTC minute in [start, end) at which `fires_at` is true, oldest first: the value
    sets walked one offset segment at a time, not each minute tested."""
    low = minute_ceil(_require_aware(start).astimezone(UTC))
    end = _require_aware(end).astimezone(UTC)
    found: list[datetime] = []
    while low < end:
        seg = zone.segment_at(low)
        high = end if seg.end is None else min(end, seg.end)
        if seg.offset % MINUTE:
            # An offset with seconds (a historic local mean time): minute by minute.
            minutes = (low + n * MINUTE for n in range(ceil((high - low) / MINUTE)))
            found += [m for m in minutes if fires_at(expr, zone, m)]
        else:
            found += _segment_minutes(expr, seg, low, high)
        low = minute_ceil(high)
    return found


def _segment_minutes(expr: CronExpr, seg: Segment, low: datetime, high: datetime) -> list[datetime]:
    """The firing minutes in [low, high), all inside `seg` (a whole-minute offset)."""
    walls: Iterable[datetime] = matching_walls(expr, seg.wall(low), seg.wall(high))
    repeats_until = seg.repeats_until
    if expr.fixed_time and repeats_until is not None:
        # Fall back: a fixed time runs at the first pass only (the last segment's).
        walls = (w for w in walls if w >= repeats_until)
    found = [seg.instant(w) for w in walls]
    gap = seg.gap
    if expr.fixed_time and gap is not None and seg.start is not None:
        landing = minute_ceil(seg.start)
        carried = low <= landing < high and (not found or found[0] != landing)
        if carried and any(True for _ in matching_walls(expr, gap[0], gap[1])):
            found.insert(0, landing)  # the gap's swallowed times run at its first minute
    return found


def transitions(zone: Zone, start: datetime, end: datetime) -> list[Segment]:
    """The segments that begin in [start, end): one per offset change."""
    found: list[Segment] = []
    if zone.fixed:
        return found
    seg = zone.segment_at(start)
    if seg.start is not None and seg.start == start:
        found.append(seg)
    while seg.end is not None and seg.end < end:
        seg = zone.segment_at(seg.end)
        found.append(seg)
    return found


def _require_aware(instant: datetime) -> datetime:
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError(f"{instant.isoformat()} has no time zone; cronctl needs aware datetimes")
    return instant


def _offset(tz: tzinfo, instant: datetime) -> timedelta:
    offset = instant.astimezone(tz).utcoffset()
    assert offset is not None
    return offset


def _iana(name: str) -> tzinfo:
    """The IANA zone `name`, which parse_zone found (imported here for the same reason)."""
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


@lru_cache(maxsize=256)
def _year_changes(name: str, year: int) -> tuple[tuple[datetime, timedelta, timedelta], ...]:
    """Every offset change of an IANA zone within a UTC year: (instant, before, after)."""
    tz = _iana(name)
    changes: list[tuple[datetime, timedelta, timedelta]] = []
    day = datetime(year, 1, 1, tzinfo=UTC)
    last = datetime(year + 1, 1, 1, tzinfo=UTC)
    before = _offset(tz, day)
    while day < last:
        nxt = min(day + timedelta(days=1), last)
        after = _offset(tz, nxt)
        if after != before:
            low, high = day, nxt  # offset(low) == before, offset(high) == after
            while high - low > timedelta(seconds=1):
                mid = low + (high - low) / 2
                if _offset(tz, mid) == before:
                    low = mid
                else:
                    high = mid
            changes.append((high.replace(microsecond=0), before, after))
            before = after
        day = nxt
    return tuple(changes)


@lru_cache(maxsize=4096)
def _settled(name: str, day: datetime) -> bool:
    """Whether no offset change lies in the 48 hours before any minute of `day`: a segment's
    start matters to walls_at only that close (a fall back repeats under 48 hours, a gap is
    carried at its first minute). _year_changes finds changes between UTC midnights whose
    offsets differ, so one offset at the midnights from 3 days before to the next rules one out."""
    tz = _iana(name)
    try:
        offsets = {_offset(tz, day + timedelta(days=n)) for n in range(-3, 2)}
    except OverflowError:  # the ends of datetime's range: take the long way
        return False
    return len(offsets) == 1


@lru_cache(maxsize=4096)
def _iana_segment_cached(name: str, key: datetime) -> tuple[datetime | None, datetime | None]:
    """The (start, end) change instants around `key`, searched a few years each way."""
    back = range(key.year, key.year - _HORIZON_YEARS, -1)
    ahead = range(key.year, key.year + _HORIZON_YEARS)
    earlier = (c[0] for year in back for c in reversed(_year_changes(name, year)) if c[0] <= key)
    later = (c[0] for year in ahead for c in _year_changes(name, year) if c[0] > key)
    return next(earlier, None), next(later, None)
