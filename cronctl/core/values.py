"""Small value parsers shared by the schema: durations, times of day, day names."""

from __future__ import annotations

import re
from datetime import timedelta

from cronctl.errors import DurationError

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_TIME = re.compile(r"^(\d{1,2}):(\d{2})$")
_DAY_NAMES = {
    name: number
    for number, names in enumerate(
        (
            ("SUN", "SUNDAY"),
            ("MON", "MONDAY"),
            ("TUE", "TUESDAY"),
            ("WED", "WEDNESDAY"),
            ("THU", "THURSDAY"),
            ("FRI", "FRIDAY"),
            ("SAT", "SATURDAY"),
        )
    )
    for name in names
}


def parse_duration(text: str) -> timedelta:
    """'1h30m' -> timedelta(hours=1, minutes=30); units d h m s, in that order, positive."""
    match = _DURATION.match(text.strip()) if text.strip() else None
    if match is None or not any(match.groups()):
        raise DurationError(
            f"duration {text!r} is not understood; write a positive amount with units "
            'd, h, m, s in that order, e.g. "90s", "30m", "1h30m", "1d"'
        )
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    delta = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if delta <= timedelta(0):
        raise DurationError(f"duration {text!r} must be longer than zero")
    return delta


def parse_time_of_day(text: str) -> tuple[int, int]:
    """'03:30' -> (3, 30); ValueError with what to write for '24:00' or '3pm'."""
    match = _TIME.match(text)
    if match is None:
        raise ValueError(f'time {text!r} is not HH:MM on a 24-hour clock (e.g. "03:30")')
    hour, minute = int(match.group(1)), int(match.group(2))
    if hour > 23 or minute > 59:
        raise ValueError(f"time {text!r} is out of range; use 00:00 to 23:59")
    return hour, minute


def parse_day_of_week(value: object) -> int:
    """0-7 (0 and 7 are Sunday) or a day name such as "MON" or "Monday" -> 0-6."""
    if isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value <= 7:
            return value % 7
        raise ValueError(f"day of week {value} is out of range; use 0-7 (0 and 7 are Sunday)")
    if isinstance(value, str) and value.upper() in _DAY_NAMES:
        return _DAY_NAMES[value.upper()]
    raise ValueError(f'day of week {value!r} is not understood; use 0-7 or a name like "MON"')
