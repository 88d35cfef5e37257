"""Instants as the dashboard's pages say them (the API keeps UTC ISO 8601)."""

from __future__ import annotations

from datetime import UTC, datetime

from cronctl.core.zones import Zone, parse_zone

_MINUTE = 60
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR


def relative(at: datetime, now: datetime) -> str:
    """How far ``at`` is from ``now``, rounded to the nearest minute, hour or day (a half
    up): "in 1 h" is 59½ to 89½ minutes away. Under a minute, "just now" or "in seconds"
    (examples: tests/web/test_human_time.py)."""
    seconds = (at - now).total_seconds()
    span = abs(seconds)
    if span < _MINUTE:
        return "in seconds" if seconds > 0 else "just now"
    if (minutes := int(span / _MINUTE + 0.5)) < 60:
        amount = f"{minutes} min"
    elif (hours := int(span / _HOUR + 0.5)) < 24:
        amount = f"{hours} h"
    else:
        days = int(span / _DAY + 0.5)
        amount = "1 day" if days == 1 else f"{days} days"
    return f"in {amount}" if seconds > 0 else f"{amount} ago"


def exact(at: datetime, zone: Zone) -> str:
    """The instant as the zone's wall clock, with its abbreviation (which tells the two
    passes of a fall-back hour apart) and, for a named zone, the name; seconds when not 0:
    "2026-12-03 03:15 CET (Europe/Berlin)", "2026-12-03 07:45 UTC+05:30"."""
    try:
        wall = at.astimezone(zone.tz)
    except OverflowError:  # a record's instant at the very end of datetime's range
        wall, zone = at.astimezone(UTC), parse_zone("UTC")
    # isoformat: far cheaper than strftime, and a year before 1000 keeps its zeros.
    shown = wall.isoformat(" ", "seconds")[: 19 if wall.second else 16]
    shown += f" {wall.tzname()}"
    return shown if zone.fixed else f"{shown} ({zone.name})"
