"""Whole minutes, the unit cron counts in and every search, window and plan starts at."""

from __future__ import annotations

from datetime import datetime, timedelta

MINUTE = timedelta(minutes=1)


def minute_floor(when: datetime) -> datetime:
    return when.replace(second=0, microsecond=0)


def minute_ceil(when: datetime) -> datetime:
    floor = minute_floor(when)
    return floor if floor == when else floor + MINUTE
