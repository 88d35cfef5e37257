"""Whole minutes, the unit cron counts in: the minute a time falls in, and the next one.

A cron expression names minutes, never seconds, and `run` is woken once a minute, so every
search, window and plan in cronctl starts at a whole minute.
"""

from __future__ import annotations

from datetime import datetime, timedelta

MINUTE = timedelta(minutes=1)


def minute_floor(when: datetime) -> datetime:
    """`when` with seconds and microseconds dropped."""
    return when.replace(second=0, microsecond=0)


def minute_ceil(when: datetime) -> datetime:
    """The first whole minute at or after `when`."""
    floor = minute_floor(when)
    return floor if floor == when else floor + MINUTE
