"""Hour-by-hour occurrence counting agrees with the occurrence-by-occurrence walk, DST included."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cronctl.core.calendar import build_timeline, find_herds, occurrences
from cronctl.core.cronexpr import parse_cron
from cronctl.core.model import Task
from cronctl.core.zones import parse_zone

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


def make_task(expr: str, zone: str, name: str = "t", **extra: object) -> Task:
    """A Task built directly (the core needs no file)."""
    return Task(
        name=name,
        command="true",
        schedule_key="cron",
        schedule_value=expr,
        cron=parse_cron(expr),
        at=None,
        zone=parse_zone(zone),
        source=Path("s.toml"),
        line=1,
        **extra,  # type: ignore[arg-type]
    )


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
