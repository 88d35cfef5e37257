"""How many runs each minute gets around a DST change, as Debian cron's daemon does it.

The Europe/Berlin rows are the ones measured against Debian cron 3.0pl1 (bookworm) under a
fake clock across the 2027 changes:

| expression     | Debian cron on 2027-03-28 (UTC)       |
|----------------|---------------------------------------|
| `0,30 2 * * *` | 2 runs at 01:00                       |
| `0 2-3 * * *`  | 2 runs at 01:00                       |
| `0 0-23 * * *` | 00:00, 2 runs at 01:00, 02:00         |
| `0-59 2 * * *` | 60 runs at 01:00                      |

and, on 2027-10-31 (fall back), fixed-time jobs on the first pass only, wildcard jobs on
both. The same shapes follow in America/New_York and Australia/Lord_Howe (a 30-minute
change). `catch-up` gets Debian's counts; `coalesce` and `skip` one run per instant.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from cronctl.core.due import Previous, occurrences, plan
from cronctl.core.model import Task
from tests.helpers import make_task

MINUTE = timedelta(minutes=1)
SECOND = timedelta(seconds=1)


def utc(text: str) -> datetime:
    """'2027-03-28T01:00Z' -> an aware UTC datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def runs_per_minute(task: Task, start: str, end: str) -> dict[str, int]:
    """UTC minute -> runs, over [start, end], for the minutes that get any."""
    found: dict[str, int] = {}
    minute, last = utc(start), utc(end)
    while minute <= last:
        count = task.runs_at(minute)
        if count:
            found[f"{minute:%Y-%m-%dT%H:%MZ}"] = count
        minute += MINUTE
    return found


# The transitions the rows rely on, checked against zoneinfo first.
CHANGES_2027 = {
    "Europe/Berlin": ["2027-03-28T01:00Z", "2027-10-31T01:00Z"],
    "America/New_York": ["2027-03-14T07:00Z", "2027-11-07T06:00Z"],
    "Australia/Lord_Howe": ["2027-04-03T15:00Z", "2027-10-02T15:30Z"],
}


@pytest.mark.parametrize("zone", sorted(CHANGES_2027))
def test_rows_use_the_2027_changes_zoneinfo_knows(zone: str) -> None:
    tz = ZoneInfo(zone)
    found: list[str] = []
    instant = datetime(2027, 1, 1, tzinfo=UTC)
    previous = instant.astimezone(tz).utcoffset()
    while instant.year == 2027:
        instant += timedelta(minutes=15)
        offset = instant.astimezone(tz).utcoffset()
        if offset != previous:
            found.append(f"{instant:%Y-%m-%dT%H:%MZ}")
            previous = offset
    assert found == CHANGES_2027[zone]


# (zone, expression, window start, window end, runs per UTC minute under catch-up)
ROWS = [
    # Spring forward, Europe/Berlin 2027-03-28: 02:00-02:59 CET never happen.
    ("Europe/Berlin", "0,30 2 * * *", "2027-03-27T23:00Z", "2027-03-28T03:00Z",
     {"2027-03-28T01:00Z": 2}),
    ("Europe/Berlin", "0 2-3 * * *", "2027-03-27T23:00Z", "2027-03-28T03:00Z",
     {"2027-03-28T01:00Z": 2}),
    ("Europe/Berlin", "0 0-23 * * *", "2027-03-28T00:00Z", "2027-03-28T02:00Z",
     {"2027-03-28T00:00Z": 1, "2027-03-28T01:00Z": 2, "2027-03-28T02:00Z": 1}),
    ("Europe/Berlin", "0-59 2 * * *", "2027-03-27T23:00Z", "2027-03-28T03:00Z",
     {"2027-03-28T01:00Z": 60}),
    ("Europe/Berlin", "30 2 * * *", "2027-03-27T23:00Z", "2027-03-28T03:00Z",
     {"2027-03-28T01:00Z": 1}),
    # Wildcard tasks have no occurrences in the gap.
    ("Europe/Berlin", "*/30 2 * * *", "2027-03-27T23:00Z", "2027-03-28T03:00Z", {}),
    ("Europe/Berlin", "0 * * * *", "2027-03-27T23:00Z", "2027-03-28T02:00Z",
     {"2027-03-27T23:00Z": 1, "2027-03-28T00:00Z": 1, "2027-03-28T01:00Z": 1,
      "2027-03-28T02:00Z": 1}),
    # Fall back, Europe/Berlin 2027-10-31: 02:00-02:59 happen twice (00:00Z and 01:00Z).
    ("Europe/Berlin", "30 2 * * *", "2027-10-30T23:00Z", "2027-10-31T03:00Z",
     {"2027-10-31T00:30Z": 1}),
    ("Europe/Berlin", "0,30 2 * * *", "2027-10-30T23:00Z", "2027-10-31T03:00Z",
     {"2027-10-31T00:00Z": 1, "2027-10-31T00:30Z": 1}),
    ("Europe/Berlin", "0 0-23 * * *", "2027-10-30T23:00Z", "2027-10-31T02:00Z",
     {"2027-10-30T23:00Z": 1, "2027-10-31T00:00Z": 1, "2027-10-31T02:00Z": 1}),
    ("Europe/Berlin", "*/30 2 * * *", "2027-10-30T23:00Z", "2027-10-31T03:00Z",
     {"2027-10-31T00:00Z": 1, "2027-10-31T00:30Z": 1, "2027-10-31T01:00Z": 1,
      "2027-10-31T01:30Z": 1}),
    ("Europe/Berlin", "0 * * * *", "2027-10-30T23:00Z", "2027-10-31T02:00Z",
     {"2027-10-30T23:00Z": 1, "2027-10-31T00:00Z": 1, "2027-10-31T01:00Z": 1,
      "2027-10-31T02:00Z": 1}),
    # Measured too (docs/dst-debian-cron.md): a minute list led by '*' is a wildcard one,
    # and a day list led by '*' is ANDed with the weekday (the 28th is a Sunday).
    ("Europe/Berlin", "*/15,5 2 * * *", "2027-10-30T23:00Z", "2027-10-31T03:00Z",
     {"2027-10-31T00:00Z": 1, "2027-10-31T00:05Z": 1, "2027-10-31T00:15Z": 1,
      "2027-10-31T00:30Z": 1, "2027-10-31T00:45Z": 1, "2027-10-31T01:00Z": 1,
      "2027-10-31T01:05Z": 1, "2027-10-31T01:15Z": 1, "2027-10-31T01:30Z": 1,
      "2027-10-31T01:45Z": 1}),
    ("Europe/Berlin", "3 3 */100,1-7 * SUN", "2027-03-28T00:55Z", "2027-03-28T01:10Z", {}),
    # America/New_York 2027-03-14: 02:00-02:59 EST never happen (landing 07:00Z).
    ("America/New_York", "0,30 2 * * *", "2027-03-14T05:00Z", "2027-03-14T09:00Z",
     {"2027-03-14T07:00Z": 2}),
    ("America/New_York", "0 2-3 * * *", "2027-03-14T05:00Z", "2027-03-14T09:00Z",
     {"2027-03-14T07:00Z": 2}),
    ("America/New_York", "0-59 2 * * *", "2027-03-14T05:00Z", "2027-03-14T09:00Z",
     {"2027-03-14T07:00Z": 60}),
    ("America/New_York", "*/30 2 * * *", "2027-03-14T05:00Z", "2027-03-14T09:00Z", {}),
    # America/New_York 2027-11-07: 01:00-01:59 happen twice (05:00Z EDT, 06:00Z EST).
    ("America/New_York", "30 1 * * *", "2027-11-07T04:00Z", "2027-11-07T08:00Z",
     {"2027-11-07T05:30Z": 1}),
    ("America/New_York", "*/30 1 * * *", "2027-11-07T04:00Z", "2027-11-07T08:00Z",
     {"2027-11-07T05:00Z": 1, "2027-11-07T05:30Z": 1, "2027-11-07T06:00Z": 1,
      "2027-11-07T06:30Z": 1}),
    # Australia/Lord_Howe 2027-10-03: 02:00-02:29 (+10:30) never happen (landing 15:30Z).
    ("Australia/Lord_Howe", "0,15 2 * * *", "2027-10-02T14:00Z", "2027-10-02T17:00Z",
     {"2027-10-02T15:30Z": 2}),
    ("Australia/Lord_Howe", "0,30 2 * * *", "2027-10-02T14:00Z", "2027-10-02T17:00Z",
     {"2027-10-02T15:30Z": 2}),
    ("Australia/Lord_Howe", "0-29 2 * * *", "2027-10-02T14:00Z", "2027-10-02T17:00Z",
     {"2027-10-02T15:30Z": 30}),
    ("Australia/Lord_Howe", "*/15 2 * * *", "2027-10-02T14:00Z", "2027-10-02T17:00Z",
     {"2027-10-02T15:30Z": 1, "2027-10-02T15:45Z": 1}),
    # Australia/Lord_Howe 2027-04-04: 01:30-01:59 twice (14:30Z at +11, 15:00Z at +10:30).
    ("Australia/Lord_Howe", "45 1 * * *", "2027-04-03T13:00Z", "2027-04-03T16:00Z",
     {"2027-04-03T14:45Z": 1}),
    ("Australia/Lord_Howe", "*/15 1 * * *", "2027-04-03T13:00Z", "2027-04-03T16:00Z",
     {"2027-04-03T14:00Z": 1, "2027-04-03T14:15Z": 1, "2027-04-03T14:30Z": 1,
      "2027-04-03T14:45Z": 1, "2027-04-03T15:00Z": 1, "2027-04-03T15:15Z": 1}),
]  # fmt: skip

IDS = [f"{zone}:{expr}:{start[:10]}" for zone, expr, start, _, _ in ROWS]


@pytest.mark.parametrize(("zone", "expression", "start", "end", "expected"), ROWS, ids=IDS)
def test_catch_up_runs_each_minute_as_often_as_debian_cron(
    zone: str, expression: str, start: str, end: str, expected: dict[str, int]
) -> None:
    task = make_task(expression, zone, misfire="catch-up")
    assert runs_per_minute(task, start, end) == expected


@pytest.mark.parametrize("misfire", ["coalesce", "skip"])
@pytest.mark.parametrize(("zone", "expression", "start", "end", "expected"), ROWS, ids=IDS)
def test_coalesce_and_skip_run_each_instant_once(
    misfire: str, zone: str, expression: str, start: str, end: str, expected: dict[str, int]
) -> None:
    task = make_task(expression, zone, misfire=misfire)
    assert runs_per_minute(task, start, end) == dict.fromkeys(expected, 1)


@pytest.mark.parametrize(("zone", "expression", "start", "end", "expected"), ROWS, ids=IDS)
def test_next_runs_lists_each_instant_once(
    zone: str, expression: str, start: str, end: str, expected: dict[str, int]
) -> None:
    task = make_task(expression, zone, misfire="catch-up")
    instants = task.next_runs(utc(start) - MINUTE, len(expected) + 1)
    listed = [f"{t:%Y-%m-%dT%H:%MZ}" for t in instants if t <= utc(end)]
    assert listed == list(expected)


def test_walls_at_names_the_swallowed_times_then_the_minute_itself() -> None:
    task = make_task("0 2-3 * * *", "Europe/Berlin")
    walls = task.walls_at(utc("2027-03-28T01:00Z"))
    assert [f"{w:%H:%M}" for w in walls] == ["02:00", "03:00"]


# --- the planner: identities, policies, windows --------------------------------------

LANDING = utc("2027-03-28T01:00Z")


def previous(task: Task, last: datetime) -> Previous:
    return Previous(task.fingerprint, last)


def test_catch_up_plans_one_run_per_swallowed_time_told_apart_by_seconds() -> None:
    task = make_task("0,30 2 * * *", "Europe/Berlin", misfire="catch-up")
    decided = plan(task, previous(task, LANDING - MINUTE), LANDING + 5 * SECOND)
    assert decided.run == [LANDING, LANDING + SECOND]
    assert decided.missed == [] and decided.missed_count == 0
    assert decided.last_occurrence == LANDING


@pytest.mark.parametrize("misfire", ["coalesce", "skip"])
def test_coalesce_and_skip_run_the_landing_minute_once_and_record_the_others_missed(
    misfire: str,
) -> None:
    task = make_task("0-59 2 * * *", "Europe/Berlin", misfire=misfire)
    decided = plan(task, previous(task, LANDING - MINUTE), LANDING)
    assert decided.run == [LANDING]
    assert decided.missed == [LANDING + i * SECOND for i in range(1, 60)]
    assert decided.missed_count == 59


def test_a_second_run_in_the_landing_minute_runs_nothing_again() -> None:
    task = make_task("0,30 2 * * *", "Europe/Berlin", misfire="catch-up")
    first = plan(task, previous(task, LANDING - MINUTE), LANDING)
    assert first.last_occurrence is not None
    again = plan(task, previous(task, first.last_occurrence), LANDING + 40 * SECOND)
    assert again.run == [] and again.missed == []


def test_the_window_after_the_landing_minute_holds_only_later_occurrences() -> None:
    task = make_task("0 0-23 * * *", "Europe/Berlin", misfire="catch-up")
    decided = plan(task, previous(task, LANDING), utc("2027-03-28T02:00Z"))
    assert decided.run == [utc("2027-03-28T02:00Z")]


def test_catch_up_after_downtime_over_the_gap_runs_every_identity_oldest_first() -> None:
    task = make_task("0 0-23 * * *", "Europe/Berlin", misfire="catch-up")
    decided = plan(task, previous(task, utc("2027-03-27T23:30Z")), utc("2027-03-28T01:30Z"))
    assert decided.run == [utc("2027-03-28T00:00Z"), LANDING, LANDING + SECOND]


def test_coalesce_after_downtime_over_the_gap_runs_the_latest_instant_once() -> None:
    task = make_task("0 0-23 * * *", "Europe/Berlin")
    decided = plan(task, previous(task, utc("2027-03-27T23:30Z")), utc("2027-03-28T01:30Z"))
    assert decided.run == [LANDING]
    assert decided.missed == [utc("2027-03-28T00:00Z"), LANDING + SECOND]


def test_catch_up_over_a_long_downtime_keeps_the_gap_identities() -> None:
    # A window wider than the minute-by-minute scan goes through next_run instead.
    task = make_task("0,30 2 * * *", "Europe/Berlin", misfire="catch-up")
    decided = plan(task, previous(task, utc("2027-03-20T00:00Z")), utc("2027-03-28T12:00Z"))
    assert decided.run[-2:] == [LANDING, LANDING + SECOND]
    assert decided.run[-3] == utc("2027-03-27T01:30Z")


@pytest.mark.parametrize(("zone", "expression", "start", "end", "expected"), ROWS, ids=IDS)
def test_window_scan_and_long_window_search_find_the_same_identities(
    zone: str, expression: str, start: str, end: str, expected: dict[str, int]
) -> None:
    task = make_task(expression, zone, misfire="catch-up")
    last = utc(start) - MINUTE
    identities = [
        utc(minute) + i * SECOND for minute, count in expected.items() for i in range(count)
    ]
    scanned, count = occurrences(task, last, utc(end))  # minute by minute up to 3 hours
    assert scanned == identities and count == len(identities)
    # A window wider than the scan limit goes occurrence by occurrence through next_run.
    searched, _ = occurrences(task, last - timedelta(hours=4), utc(end))
    assert [t for t in searched if t > last] == identities
