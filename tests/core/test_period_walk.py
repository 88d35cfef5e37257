"""check's search for a task's shortest period (jitter and retries are bounded by it).

It walks each schedule's occurrences once for every task on that schedule, and walks them
without finding the time zone segment anew for each: the answers must be those of the
walk it replaced (kept below as `_old_shortest_period`, next_run after next_run, one walk
per task), on schedules and zones where the seams of daylight saving move the gaps.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from cronctl.core import zones
from cronctl.core.cronexpr import parse_cron
from cronctl.core.model import Schedule, Settings, Task, format_duration
from cronctl.core.opskeys import _new_lows, _shortest, ops_problems
from cronctl.core.zones import next_occurrence, occurrences_after, parse_zone
from tests.core.test_calendar import make_task

EXPRESSIONS = [
    "*/5 * * * *",  # stopped by the 1,500-occurrence sample, not by the year
    "0 * * * *",
    "30 2 * * *",  # inside Europe's spring-forward gap: run right after it
    "0 */2 * * *",  # a wildcard hour: both passes of a fall back
    "0,30 1-3 * * *",
    "15 9 * * MON-FRI",
    "0 0 1 1 *",
    "0 6 15 * *",
    "*/15 9-17 * * 1-5",
    "0 1,13 * * *",
    "0 0 29 2 *",
    "*/7 2 * * *",
]
ZONES = [
    "+05:30",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",  # a 30-minute shift
    "Europe/Dublin",  # negative DST
    "Antarctica/Troll",  # a 2-hour shift
]
# The day before Europe springs forward, the day before it falls back: a walk of a year
# meets both seams from any start; these decide which ones a walk of 1,500 occurrences meets.
NOWS = [datetime(2026, 3, 28, 23, 0, tzinfo=UTC), datetime(2026, 10, 24, 12, 0, tzinfo=UTC)]
# No bound (the whole sample), and one a seam's 23-hour day stops at.
BELOWS = [None, timedelta(hours=23)]


def shortest_period(task: Task, now: datetime, below: timedelta | None) -> timedelta | None:
    """The walk ops_problems shares between tasks, for one task alone."""
    return None if task.cron is None else _shortest(([], _new_lows(task, now)), below)


def _old_shortest_period(
    task: Task, now: datetime, below: timedelta | None = None
) -> timedelta | None:
    """The search as it was before it was shared (cronctl 0.1 at f5f78be), word for word."""
    if task.cron is None:
        return None
    shortest: timedelta | None = None
    previous = task.next_run(now)
    horizon = now + timedelta(days=366)
    for _ in range(1500):
        if previous is None or previous > horizon:
            break
        current = task.next_run(previous)
        if current is None:
            break
        gap = current - previous
        if shortest is None or gap < shortest:
            shortest = gap
            if (below is not None and shortest <= below) or shortest <= timedelta(minutes=1):
                break
        previous = current
    return shortest


@pytest.mark.parametrize("zone", ZONES)
def test_the_shortest_period_is_the_old_walks_answer(zone: str) -> None:
    for expr in EXPRESSIONS:
        task = make_task(expr, zone)
        for now in NOWS:
            for below in BELOWS:
                expected = _old_shortest_period(task, now, below)
                assert shortest_period(task, now, below) == expected, (expr, zone, now, below)


@pytest.mark.parametrize("zone", ["Europe/Berlin", "Australia/Lord_Howe", "Antarctica/Troll"])
def test_tasks_sharing_a_schedule_get_the_problems_each_would_get_alone(zone: str) -> None:
    """One walk answers every task on a schedule, each with its own bound, in any order."""
    jitters = [timedelta(hours=h) for h in (30, 1, 23, 25, 2, 24)] + [timedelta(minutes=10)]
    tasks: list[Task] = []
    for expr in ("30 2 * * *", "0 */2 * * *", "0 1,13 * * *", "*/15 9-17 * * 1-5"):
        for i, jitter in enumerate(jitters):
            tasks.append(make_task(expr, zone, f"{expr}-j{i}", jitter=jitter))
        for retries in (1, 3, 5):
            delay = timedelta(minutes=20)
            tasks.append(
                make_task(expr, zone, f"{expr}-r{retries}", retries=retries, retry_delay=delay)
            )
    now = NOWS[0]
    shared = ops_problems(Schedule((), tuple(tasks), (), Settings()), now)
    alone = [p for task in tasks for p in ops_problems(Schedule((), (task,), (), Settings()), now)]
    assert sorted(shared, key=repr) == sorted(alone, key=repr)
    # And which tasks they are is what the old walk said, task by task.
    expected: set[tuple[str, str]] = set()
    for task in tasks:
        if task.jitter is not None:
            period = _old_shortest_period(task, now, below=task.jitter)
            if period is not None and task.jitter >= period:
                expected.add((task.name, "jitter-too-long"))
        if task.retries:
            total = task.retry_delay * ((1 << task.retries) - 1)
            period = _old_shortest_period(task, now, below=total)
            if period is not None and total >= period:
                expected.add((task.name, "retries-outlast-period"))
    assert {(p.task, p.code) for p in shared} == expected
    assert {code for _, code in expected} == {"jitter-too-long", "retries-outlast-period"}


@pytest.mark.parametrize("zone", ["UTC", *ZONES, "Pacific/Apia", "Africa/Casablanca"])
def test_the_walk_is_next_occurrence_again_and_again(zone: str) -> None:
    """Two years of occurrences through every seam, the segment kept from one to the next."""
    for expr in ("0,30 0-23 * * *", "0 */2 * * *", "30 2 * * *", "*/20 * * * *"):
        cron, tz = parse_cron(expr), parse_zone(zone)
        start = datetime(2025, 12, 31, 23, 59, tzinfo=UTC)
        walk = occurrences_after(cron, tz, start)
        previous = start
        for _ in range(3000 if "/20" in expr else 1500):
            expected = next_occurrence(cron, tz, previous)
            assert next(walk) == expected, (expr, zone, previous)
            previous = expected


def _searches(monkeypatch: pytest.MonkeyPatch) -> Callable[[tuple[Task, ...]], int]:
    """How many calendar searches (next_wall) ops_problems makes for some tasks."""
    calls = 0
    real = zones.next_wall

    def counted(expr: object, wall: datetime) -> datetime:
        nonlocal calls
        calls += 1
        return real(expr, wall)  # type: ignore[arg-type]

    monkeypatch.setattr(zones, "next_wall", counted)

    def searched(tasks: tuple[Task, ...]) -> int:
        nonlocal calls
        calls = 0
        assert ops_problems(Schedule((), tasks, (), Settings()), NOWS[1]) == []
        return calls

    return searched


def test_tasks_on_one_schedule_share_one_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """2,000 jittered tasks on a dozen schedules took 1.7 million next_run calls: the calendar
    search runs per schedule, not per task."""
    searched = _searches(monkeypatch)
    jitter = timedelta(minutes=10)
    # Both passes of a fall back: no floor spares this walk.
    one = searched((make_task("0 */2 * * *", "Europe/Berlin", "t0", jitter=jitter),))
    assert one > 300  # months of a two-hourly task
    many = tuple(
        make_task("0 */2 * * *", "Europe/Berlin", f"t{i}", jitter=jitter) for i in range(50)
    )
    assert searched(many) == one


def test_daily_tasks_in_dst_zones_are_judged_without_walking_their_year(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Jittered tasks at distinct times of day share no walk, and each walked its year: their
    # shortest wall gap less the spread of their zone's offsets says enough.
    searched = _searches(monkeypatch)
    zones_ = ("Europe/Berlin", "America/New_York", "Australia/Sydney", "America/Santiago")
    tasks = tuple(
        make_task(
            f"{i % 60} {i // 60 % 24} * * *", zones_[i % 4], f"t{i}", jitter=timedelta(minutes=10)
        )
        for i in range(400)
    )
    assert searched(tasks) == 0


# Fixed times a day, a weekday, a month; inside and beside the seams of daylight saving.
FIXED = [
    "30 2 * * *",
    "0 3 * * *",
    "0 1,13 * * *",
    "15 9 * * MON-FRI",
    "30 2 * * 1-5",
    "0,30 1-3 * * *",
    "45 23 * * *",
    "59 1 * * 0",
    "0 6 15 * *",
    "5 0,12 1-7 * *",
]
SEAM_ZONES = ["+05:30", "Europe/Berlin", "Australia/Lord_Howe", "Europe/Dublin", "Antarctica/Troll"]
JITTERS = [
    timedelta(minutes=m)
    for m in (1, 10, 29, 30, 31, 11 * 60 + 59, 12 * 60, 22 * 60 + 59, 23 * 60, 23 * 60 + 1)
] + [timedelta(hours=h) for h in (23.5, 24, 25, 48)]


def _old_answers(task: Task, now: datetime) -> Callable[[timedelta], timedelta | None]:
    """_old_shortest_period(task, now, below) for any `below`, from one walk: its gaps in
    order, stopping at the first that is `below` or shorter (or a minute)."""
    gaps: list[timedelta] = []
    previous = task.next_run(now)
    horizon = now + timedelta(days=366)
    while previous is not None and previous <= horizon and len(gaps) < 1500:
        current = task.next_run(previous)
        if current is None:
            break
        gaps.append(current - previous)
        previous = current

    def answer(below: timedelta) -> timedelta | None:
        stop = max(below, timedelta(minutes=1))
        return next((g for g in gaps if g <= stop), min(gaps, default=None))

    return answer


@pytest.mark.parametrize("zone", SEAM_ZONES)
def test_a_jitter_is_judged_as_the_walk_judges_it_for_fixed_times(zone: str) -> None:
    # The floor under a fixed-time task's gaps (its shortest wall gap less the spread of
    # its zone's offsets) spares the walk; the verdicts and periods must be the walk's.
    for now in NOWS:
        tasks, expected = [], set()
        for expr in FIXED:
            answer = _old_answers(make_task(expr, zone), now)
            for i, jitter in enumerate(JITTERS):
                task = make_task(expr, zone, f"{expr}-{i}", jitter=jitter)
                tasks.append(task)
                period = answer(jitter)
                if period is not None and jitter >= period:
                    expected.add((task.name, format_duration(period)))
        found = ops_problems(Schedule((), tuple(tasks), (), Settings()), now)
        said = {(p.task, p.message.split("shortest period (")[1].split(")")[0]) for p in found}
        assert said == expected, (zone, now)
