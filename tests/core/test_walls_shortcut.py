"""walls_at skips the segment search when no offset change is near: the answer must not move.

Compared minute by minute with the answer worked out from the segment, around every offset
change 2010-2027 of zones with unusual histories: a skipped day (Pacific/Apia 2011), a
30-minute shift (Lord_Howe), negative DST (Dublin), a 2-hour DST (Troll), DST suspended for
Ramadan (Casablanca), half-hour zone moves (Pyongyang), permanent changes (Moscow,
Sao_Paulo), and zones without DST.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronctl.core.cronexpr import parse_cron
from cronctl.core.zones import parse_zone, segment_walls, transitions, walls_at

ZONES = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Pacific/Apia",
    "Europe/Dublin",
    "Antarctica/Troll",
    "Africa/Casablanca",
    "Asia/Pyongyang",
    "Europe/Moscow",
    "America/Sao_Paulo",
    "America/St_Johns",
    "Asia/Tokyo",
    "Asia/Kolkata",
]
# A fixed-time expression that names every half hour (so it meets every gap and overlap),
# and a wildcard one: Debian cron treats them differently at the seams.
EXPRESSIONS = ["0,30 0-23 * * *", "* * * * *"]
MINUTE = timedelta(minutes=1)


def _probes(change: datetime) -> list[datetime]:
    """Minutes from 4 days before a change to 4 days after, dense where the rules turn."""
    spread = [change + k * 37 * MINUTE for k in range(-156, 157)]
    near = [change + k * MINUTE for k in range(-3, 4)]
    # Where a fall back's repeated wall times and the shortcut's 48-hour window end.
    ends = [change + hours * timedelta(hours=1) + k * MINUTE for hours in (1, 2, 24, 48)
            for k in (-1, 0, 1)]  # fmt: skip
    return sorted(set(spread + near + ends))


@pytest.mark.parametrize("zone_name", ZONES)
def test_walls_at_answers_as_the_segment_does_around_every_change(zone_name: str) -> None:
    zone = parse_zone(zone_name)
    changes = [
        seg.start
        for seg in transitions(
            zone, datetime(2010, 1, 1, tzinfo=UTC), datetime(2028, 1, 1, tzinfo=UTC)
        )
        if seg.start is not None
    ]
    minutes = [datetime(2026, 8, 3, 12, 34, tzinfo=UTC)]  # and one far from any change
    for change in changes:
        minutes += _probes(change.replace(second=0))
    for text in EXPRESSIONS:
        expr = parse_cron(text)
        for minute in minutes:
            expected = segment_walls(expr, zone.segment_at(minute), minute)
            assert walls_at(expr, zone, minute) == expected, (zone_name, text, minute)


def test_the_changes_compared_include_the_unusual_ones() -> None:
    """The zones above do have the changes the module docstring names, in these years."""
    apia = parse_zone("Pacific/Apia")
    skipped = transitions(apia, datetime(2011, 12, 1, tzinfo=UTC), datetime(2012, 1, 1, tzinfo=UTC))
    assert [seg.offset - (seg.prev_offset or seg.offset) for seg in skipped] == [timedelta(days=1)]
    casablanca = parse_zone("Africa/Casablanca")
    year = transitions(
        casablanca, datetime(2012, 1, 1, tzinfo=UTC), datetime(2013, 1, 1, tzinfo=UTC)
    )
    assert len(year) == 4  # DST on, off for Ramadan, on again, off
