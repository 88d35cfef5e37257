"""Instants as the dashboard's pages say them (the API keeps UTC ISO 8601)."""

from __future__ import annotations

from datetime import UTC, datetime

from cronctl.core.zones import Zone, parse_zone

_MINUTE = 60
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR


def relative(at: datetime, now: datetime) -> str:
    """How far ``at`` is from ``now``, rounded to the nearest minute, hour or day (a half
    up): "in 1 h" is 59½ to 89½ minutes away. Under a minute, "just now" or "in seconds".

    >>> from datetime import timedelta
    >>> now = datetime(2026, 12, 3, 8, 3, tzinfo=UTC)
    >>> [relative(now + timedelta(seconds=s), now) for s in (0, -59, 59, 60, -90)]
    ['just now', 'just now', 'in seconds', 'in 1 min', '2 min ago']
    >>> [relative(now + timedelta(minutes=m), now) for m in (59, -60, 89, 1409, -2160)]
    ['in 59 min', '1 h ago', 'in 1 h', 'in 23 h', '2 days ago']
    """
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
    passes of a fall-back hour apart) and, for a named zone, the name; seconds when not 0.

    >>> at = datetime(2026, 12, 3, 2, 15, tzinfo=UTC)
    >>> exact(at, parse_zone("Europe/Berlin"))
    '2026-12-03 03:15 CET (Europe/Berlin)'
    >>> exact(at.replace(second=7), parse_zone("UTC")), exact(at, parse_zone("+05:30"))
    ('2026-12-03 02:15:07 UTC', '2026-12-03 07:45 UTC+05:30')
    """
    try:
        wall = at.astimezone(zone.tz)
    except OverflowError:  # a record's instant at the very end of datetime's range
        wall, zone = at.astimezone(UTC), parse_zone("UTC")
    # isoformat: far cheaper than strftime, and a year before 1000 keeps its zeros.
    shown = wall.isoformat(" ", "seconds")[: 19 if wall.second else 16]
    shown += f" {wall.tzname()}"
    return shown if zone.fixed else f"{shown} ({zone.name})"
