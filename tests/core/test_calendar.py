"""Hour-by-hour occurrence counting agrees with the occurrence-by-occurrence walk, DST included."""

from __future__ import annotations

import dataclasses
import functools
from datetime import UTC, datetime, timedelta

import pytest

from cronctl.core.calendar import Herd, build_timeline, find_herds, occurrences
from cronctl.core.minutes import minute_ceil
from cronctl.core.model import Task
from tests.helpers import make_task

CASES = [
    ("30 2 * * *", "Europe/Berlin"),  # spring-forward gap: runs at 03:00
    ("0,30 1-3 * * *", "Europe/Berlin"),
    ("*/20 * * * *", "Europe/Berlin"),  # wildcard: both passes in the fall back
    ("15 1 * * *", "America/New_York"),
    ("*/7 9-17 * * MON-FRI", "UTC"),
    ("0 0 13 * 5", "UTC"),  # day-of-month OR day-of-week
    ("45 * * * *", "+05:30"),  # a half-hour offset
    ("0 12 * * *", "Australia/Lord_Howe"),  # a 30-minute DST shift
    ("* 2 * * *", "Europe/Berlin"),
]


@pytest.mark.parametrize(("expr", "zone"), CASES)
@pytest.mark.parametrize("start", ["2026-03-26T00:00:00Z", "2026-10-22T00:00:00Z",
                                   "2026-04-01T00:00:00Z", "2026-09-30T00:00:00Z"])  # fmt: skip
def test_hourly_counting_matches_the_exact_walk(expr: str, zone: str, start: str) -> None:
    begin = datetime.fromisoformat(start)
    end = begin + timedelta(days=10)
    task = make_task(expr, zone)
    walked = []
    cursor = begin - timedelta(minutes=1)
    while True:
        nxt = task.next_run(cursor)
        assert nxt is not None
        if nxt >= end:
            break
        walked.append(nxt)
        cursor = nxt
    assert list(occurrences(task, begin, end)) == walked


def test_timeline_counts_runs_per_hour_and_skips_paused_tasks() -> None:
    start = datetime(2026, 8, 3, 9, 41, tzinfo=UTC)
    every5 = make_task("*/5 * * * *", "UTC", "every5")
    daily = make_task("0 3 * * *", "UTC", "daily")
    paused = make_task("* * * * *", "UTC", "paused", paused=True)
    timeline = build_timeline([every5, daily, paused], start, 2)
    assert timeline.start == datetime(2026, 8, 3, tzinfo=UTC)
    heat = timeline.heat()
    assert heat[0][3] == 13 and heat[1][4] == 12
    assert [lane.total for lane in timeline.lanes] == [576, 2, 0]


def test_herd_needs_more_than_the_limit_and_ignores_jittered_tasks() -> None:
    now = datetime(2026, 8, 3, tzinfo=UTC)
    tasks = [make_task("0 3 * * *", "UTC", f"job{i}") for i in range(3)]
    assert find_herds(tasks, now, now + timedelta(days=7), 3) == []
    herds = find_herds(tasks, now, now + timedelta(days=7), 2)
    assert len(herds) == 1
    assert herds[0].first == datetime(2026, 8, 3, 3, tzinfo=UTC)
    assert herds[0].tasks == ("job0", "job1", "job2") and herds[0].minutes == 7


@functools.cache
def firing_names(start: datetime, end: datetime) -> tuple[tuple[datetime, tuple[str, ...]], ...]:
    """Every minute of [start, end) with the sorted names of the herd mix's tasks firing in it."""
    counted = [t for t in herd_mix() if not t.paused and not t.jitter]
    found = []
    minute = minute_ceil(start)
    while minute < end:
        found.append((minute, tuple(sorted(t.name for t in counted if t.fires_at(minute)))))
        minute += timedelta(minutes=1)
    return tuple(found)


def naive_herds(start: datetime, end: datetime, limit: int) -> list[Herd]:
    """The herd rule read literally off the minute-by-minute walk (slow and obvious)."""
    groups: dict[tuple[str, ...], tuple[datetime, int]] = {}
    for minute, names in firing_names(start, end):
        if len(names) > limit:
            first, count = groups.get(names, (minute, 0))
            groups[names] = (first, count + 1)
    return sorted((Herd(f, n, c) for n, (f, c) in groups.items()), key=lambda h: h.first)


def herd_mix() -> list[Task]:
    """Tasks sharing schedules and zones (so they herd), across DST seams and a half-hour offset;
    the same expression in several zones, a one-shot, a paused and a jittered task."""
    at = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    tasks = [make_task(expr, zone, f"{i}-{copy}") for i, (expr, zone) in enumerate(CASES)
             for copy in range(2)]  # fmt: skip
    tasks += [make_task("0 * * * *", "UTC", f"hourly-{i}") for i in range(2)]
    tasks += [make_task("0 1 * * *", zone, f"one-{zone}") for zone in ("+01:00", "Europe/Berlin")]
    tasks += [make_task("0 3 * * *", "UTC", "paused", paused=True)]
    tasks += [make_task("0 3 * * *", "UTC", "jittered", jitter=timedelta(minutes=5))]
    once = make_task("0 3 * * *", "UTC", "once")
    return [*tasks, dataclasses.replace(once, cron=None, at=at, schedule_key="at")]


@pytest.mark.parametrize(
    "start", ["2026-03-27T22:13:30Z", "2026-10-24T00:00:00Z", "2026-03-07T12:00:00Z"]
)
def test_herds_equal_the_minute_by_minute_count(start: str) -> None:
    begin = datetime.fromisoformat(start)
    end = begin + timedelta(days=3)
    for limit in (1, 2, 3):
        found = find_herds(herd_mix(), begin, end, limit)
        assert found == naive_herds(begin, end, limit), limit
        assert found  # the mix does herd
