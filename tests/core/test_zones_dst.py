"""Daylight saving, as Debian cron handles it, in explicit tables an operator can read.

The 2026 transitions used below (checked against zoneinfo by the first test):

- Europe/Berlin: 2026-03-29T01:00:00Z, 02:00 CET -> 03:00 CEST (gap 02:00-02:59);
  2026-10-25T01:00:00Z, 03:00 CEST -> 02:00 CET (02:00-02:59 twice).
- America/New_York: 2026-03-08T07:00:00Z, 02:00 EST -> 03:00 EDT (gap 02:00-02:59);
  2026-11-01T06:00:00Z, 02:00 EDT -> 01:00 EST (01:00-01:59 twice).
- Australia/Lord_Howe (a 30-minute shift): 2026-04-04T15:00:00Z, 02:00 +11 -> 01:30
  +10:30 (01:30-01:59 twice); 2026-10-03T15:30:00Z, 02:00 +10:30 -> 02:30 +11 (gap
  02:00-02:29).

Fixed-time tasks (neither minute nor hour starts with '*') run once at the first
minute after a gap and once, at the first pass, in an overlap; wildcard tasks have
no occurrences in a gap and run in both passes of an overlap.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from cronctl.core.analysis import task_warnings
from cronctl.core.cronexpr import parse_cron
from cronctl.core.model import Schedule
from cronctl.core.zones import fires_at, next_occurrence, parse_zone, transitions
from cronctl.edge.schedfiles import load

MINUTE = timedelta(minutes=1)
ON_DATE = re.compile(r"\bon (\d{4}-\d{2}-\d{2})\b")


def utc(text: str) -> datetime:
    """'2026-03-29T01:00:00Z' -> an aware UTC datetime."""
    return datetime.fromisoformat(text).astimezone(UTC)


def occurrences(expr_text: str, zone_name: str, start: str, count: int) -> list[str]:
    """The next `count` occurrences strictly after `start`, as UTC strings."""
    expr = parse_cron(expr_text)
    zone = parse_zone(zone_name)
    found: list[str] = []
    cursor = utc(start)
    for _ in range(count):
        cursor = next_occurrence(expr, zone, cursor)
        found.append(f"{cursor:%Y-%m-%dT%H:%M:%SZ}")
    return found


# --- the transitions themselves ---------------------------------------------------

TRANSITIONS_2026 = {
    "Europe/Berlin": ["2026-03-29T01:00:00Z", "2026-10-25T01:00:00Z"],
    "America/New_York": ["2026-03-08T07:00:00Z", "2026-11-01T06:00:00Z"],
    "Australia/Lord_Howe": ["2026-04-04T15:00:00Z", "2026-10-03T15:30:00Z"],
}


def _zoneinfo_changes(name: str, year: int) -> list[str]:
    tz = ZoneInfo(name)
    found: list[str] = []
    instant = datetime(year, 1, 1, tzinfo=UTC)
    previous = instant.astimezone(tz).utcoffset()
    while instant.year == year:
        instant += timedelta(minutes=15)
        offset = instant.astimezone(tz).utcoffset()
        if offset != previous:
            found.append(f"{instant:%Y-%m-%dT%H:%M:%SZ}")
            previous = offset
    return found


@pytest.mark.parametrize("zone_name", sorted(TRANSITIONS_2026))
def test_tables_use_the_transition_instants_zoneinfo_knows(zone_name: str) -> None:
    assert _zoneinfo_changes(zone_name, 2026) == TRANSITIONS_2026[zone_name]


@pytest.mark.parametrize("zone_name", sorted(TRANSITIONS_2026))
def test_transitions_lists_each_offset_change_of_the_year(zone_name: str) -> None:
    zone = parse_zone(zone_name)
    found = transitions(zone, utc("2026-01-01T00:00:00Z"), utc("2027-01-01T00:00:00Z"))
    assert [f"{seg.start:%Y-%m-%dT%H:%M:%SZ}" for seg in found] == TRANSITIONS_2026[zone_name]


@pytest.mark.parametrize("zone_name", ["UTC", "+05:45", "-09:30"])
def test_fixed_zone_has_no_transitions(zone_name: str) -> None:
    zone = parse_zone(zone_name)
    assert transitions(zone, utc("2026-01-01T00:00:00Z"), utc("2027-01-01T00:00:00Z")) == []


# --- spring forward -----------------------------------------------------------------

SPRING_FORWARD = [
    # (expression, zone, start, expected occurrences in UTC)
    pytest.param(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-03-28T00:00:00Z",
        ["2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"],
        id="berlin-fixed-in-gap-runs-at-03:00-local",
    ),
    pytest.param(
        "0,15,30,45 2 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00:00Z",
        ["2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z", "2026-03-30T00:15:00Z"],
        id="berlin-several-gap-times-make-one-run",
    ),
    pytest.param(
        "0-59 2 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00:00Z",
        ["2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z"],
        id="berlin-every-minute-of-the-gap-as-fixed-time-makes-one-run",
    ),
    pytest.param(
        "30 2 * * 0",
        "Europe/Berlin",
        "2026-03-22T12:00:00Z",
        ["2026-03-29T01:00:00Z", "2026-04-05T00:30:00Z"],
        id="berlin-weekly-sunday-in-gap",
    ),
    pytest.param(
        "*/15 2 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00:00Z",
        [
            "2026-03-30T00:00:00Z",
            "2026-03-30T00:15:00Z",
            "2026-03-30T00:30:00Z",
            "2026-03-30T00:45:00Z",
        ],
        id="berlin-wildcard-has-no-occurrences-in-gap",
    ),
    pytest.param(
        "* 2 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00:00Z",
        ["2026-03-30T00:00:00Z", "2026-03-30T00:01:00Z"],
        id="berlin-wildcard-minute-has-no-occurrences-in-gap",
    ),
    pytest.param(
        "0 2,3 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00:00Z",
        ["2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z", "2026-03-30T01:00:00Z"],
        id="berlin-gap-run-and-03:00-run-are-one-run",
    ),
    pytest.param(
        "59 1 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00:00Z",
        ["2026-03-29T00:59:00Z", "2026-03-29T23:59:00Z"],
        id="berlin-minute-before-gap-is-untouched",
    ),
    pytest.param(
        "0 3 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00:00Z",
        ["2026-03-29T01:00:00Z", "2026-03-30T01:00:00Z"],
        id="berlin-gap-end-is-untouched",
    ),
    pytest.param(
        "* * * * *",
        "Europe/Berlin",
        "2026-03-29T00:58:00Z",
        ["2026-03-29T00:59:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:01:00Z"],
        id="berlin-every-minute-follows-real-minutes",
    ),
    pytest.param(
        "30 2 * * *",
        "America/New_York",
        "2026-03-07T12:00:00Z",
        ["2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"],
        id="new-york-fixed-in-gap-runs-at-03:00-local",
    ),
    pytest.param(
        "*/30 2 * * *",
        "America/New_York",
        "2026-03-07T12:00:00Z",
        ["2026-03-09T06:00:00Z", "2026-03-09T06:30:00Z"],
        id="new-york-wildcard-has-no-occurrences-in-gap",
    ),
    pytest.param(
        "0 2,3 * * *",
        "America/New_York",
        "2026-03-07T12:00:00Z",
        ["2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z", "2026-03-09T07:00:00Z"],
        id="new-york-gap-run-and-03:00-run-are-one-run",
    ),
    pytest.param(
        "15 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-03T00:00:00Z",
        ["2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"],
        id="lord-howe-fixed-in-half-hour-gap-runs-at-02:30-local",
    ),
    pytest.param(
        "0,10,20 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-03T00:00:00Z",
        [
            "2026-10-03T15:30:00Z",
            "2026-10-04T15:00:00Z",
            "2026-10-04T15:10:00Z",
            "2026-10-04T15:20:00Z",
        ],
        id="lord-howe-several-gap-times-make-one-run",
    ),
    pytest.param(
        "0,30 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-03T00:00:00Z",
        ["2026-10-03T15:30:00Z", "2026-10-04T15:00:00Z", "2026-10-04T15:30:00Z"],
        id="lord-howe-gap-run-and-02:30-run-are-one-run",
    ),
    pytest.param(
        "*/10 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-03T00:00:00Z",
        [
            "2026-10-03T15:30:00Z",
            "2026-10-03T15:40:00Z",
            "2026-10-03T15:50:00Z",
            "2026-10-04T15:00:00Z",
        ],
        id="lord-howe-wildcard-skips-the-gap-keeps-the-rest-of-the-hour",
    ),
]


@pytest.mark.parametrize(("expr", "zone", "start", "expected"), SPRING_FORWARD)
def test_fixed_time_in_spring_gap_runs_once_after_the_gap_and_wildcard_skips_it(
    expr: str, zone: str, start: str, expected: list[str]
) -> None:
    assert occurrences(expr, zone, start, len(expected)) == expected


# --- fall back ----------------------------------------------------------------------

FALL_BACK = [
    pytest.param(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-10-24T12:00:00Z",
        ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"],
        id="berlin-fixed-runs-at-first-pass-only",
    ),
    pytest.param(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-10-25T00:45:00Z",
        ["2026-10-26T01:30:00Z"],
        id="berlin-fixed-not-rerun-when-asked-between-the-passes",
    ),
    pytest.param(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-10-25T01:10:00Z",
        ["2026-10-26T01:30:00Z"],
        id="berlin-fixed-not-rerun-when-asked-in-the-second-pass",
    ),
    pytest.param(
        "0,30 1-3 * * *",
        "Europe/Berlin",
        "2026-10-24T22:45:00Z",
        [
            "2026-10-24T23:00:00Z",
            "2026-10-24T23:30:00Z",
            "2026-10-25T00:00:00Z",
            "2026-10-25T00:30:00Z",
            "2026-10-25T02:00:00Z",
            "2026-10-25T02:30:00Z",
            "2026-10-26T00:00:00Z",
        ],
        id="berlin-fixed-range-of-hours-skips-the-second-pass",
    ),
    pytest.param(
        "*/20 2 * * *",
        "Europe/Berlin",
        "2026-10-24T12:00:00Z",
        [
            "2026-10-25T00:00:00Z",
            "2026-10-25T00:20:00Z",
            "2026-10-25T00:40:00Z",
            "2026-10-25T01:00:00Z",
            "2026-10-25T01:20:00Z",
            "2026-10-25T01:40:00Z",
            "2026-10-26T01:00:00Z",
        ],
        id="berlin-wildcard-runs-in-both-passes",
    ),
    pytest.param(
        "0 * * * *",
        "Europe/Berlin",
        "2026-10-24T22:30:00Z",
        [
            "2026-10-24T23:00:00Z",
            "2026-10-25T00:00:00Z",
            "2026-10-25T01:00:00Z",
            "2026-10-25T02:00:00Z",
        ],
        id="berlin-hourly-runs-every-real-hour",
    ),
    pytest.param(
        "0 2,3 * * *",
        "Europe/Berlin",
        "2026-10-24T12:00:00Z",
        [
            "2026-10-25T00:00:00Z",
            "2026-10-25T02:00:00Z",
            "2026-10-26T01:00:00Z",
            "2026-10-26T02:00:00Z",
        ],
        id="berlin-fixed-02:00-once-03:00-once",
    ),
    pytest.param(
        "30 1 * * *",
        "America/New_York",
        "2026-10-31T12:00:00Z",
        ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"],
        id="new-york-fixed-runs-at-first-pass-only",
    ),
    pytest.param(
        "*/30 1 * * *",
        "America/New_York",
        "2026-10-31T12:00:00Z",
        [
            "2026-11-01T05:00:00Z",
            "2026-11-01T05:30:00Z",
            "2026-11-01T06:00:00Z",
            "2026-11-01T06:30:00Z",
            "2026-11-02T06:00:00Z",
        ],
        id="new-york-wildcard-runs-in-both-passes",
    ),
    pytest.param(
        "0 1,2 * * *",
        "America/New_York",
        "2026-10-31T12:00:00Z",
        [
            "2026-11-01T05:00:00Z",
            "2026-11-01T07:00:00Z",
            "2026-11-02T06:00:00Z",
            "2026-11-02T07:00:00Z",
        ],
        id="new-york-fixed-01:00-once-02:00-once",
    ),
    pytest.param(
        "45 1 * * *",
        "Australia/Lord_Howe",
        "2026-04-04T00:00:00Z",
        ["2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"],
        id="lord-howe-fixed-in-half-hour-overlap-runs-at-first-pass",
    ),
    pytest.param(
        "15 1 * * *",
        "Australia/Lord_Howe",
        "2026-04-04T00:00:00Z",
        ["2026-04-04T14:15:00Z", "2026-04-05T14:45:00Z"],
        id="lord-howe-fixed-before-the-overlap-is-untouched",
    ),
    pytest.param(
        "*/10 1 * * *",
        "Australia/Lord_Howe",
        "2026-04-04T00:00:00Z",
        [
            "2026-04-04T14:00:00Z",
            "2026-04-04T14:10:00Z",
            "2026-04-04T14:20:00Z",
            "2026-04-04T14:30:00Z",
            "2026-04-04T14:40:00Z",
            "2026-04-04T14:50:00Z",
            "2026-04-04T15:00:00Z",
            "2026-04-04T15:10:00Z",
            "2026-04-04T15:20:00Z",
            "2026-04-05T14:30:00Z",
        ],
        id="lord-howe-wildcard-runs-the-repeated-half-hour-twice",
    ),
]


@pytest.mark.parametrize(("expr", "zone", "start", "expected"), FALL_BACK)
def test_fall_back_runs_fixed_time_once_at_first_pass_and_wildcard_in_both(
    expr: str, zone: str, start: str, expected: list[str]
) -> None:
    assert occurrences(expr, zone, start, len(expected)) == expected


# --- fixed offsets and UTC: no daylight saving, exact mapping -----------------------

FIXED_OFFSETS = [
    pytest.param(
        "30 2 * * *",
        "+05:45",
        "2026-03-29T00:00:00Z",
        ["2026-03-29T20:45:00Z", "2026-03-30T20:45:00Z"],
        id="plus-05:45",
    ),
    pytest.param(
        "30 2 * * *",
        "-09:30",
        "2026-03-29T00:00:00Z",
        ["2026-03-29T12:00:00Z", "2026-03-30T12:00:00Z"],
        id="minus-09:30",
    ),
    pytest.param(
        "30 2 * * *",
        "UTC",
        "2026-03-29T00:00:00Z",
        ["2026-03-29T02:30:00Z", "2026-03-30T02:30:00Z"],
        id="utc",
    ),
    pytest.param(
        "*/20 2 * * *",
        "UTC",
        "2026-10-25T00:00:00Z",
        ["2026-10-25T02:00:00Z", "2026-10-25T02:20:00Z", "2026-10-25T02:40:00Z"],
        id="utc-wildcard-on-berlin-fall-back-day",
    ),
    pytest.param(
        "0 0 * * 1",
        "+05:45",
        "2026-08-02T18:00:00Z",
        ["2026-08-02T18:15:00Z", "2026-08-09T18:15:00Z"],
        id="plus-05:45-monday-midnight-is-sunday-in-utc",
    ),
    pytest.param(
        "0 23 31 12 *",
        "-09:30",
        "2026-12-31T00:00:00Z",
        ["2027-01-01T08:30:00Z", "2028-01-01T08:30:00Z"],
        id="minus-09:30-new-years-eve-is-next-year-in-utc",
    ),
]


@pytest.mark.parametrize(("expr", "zone", "start", "expected"), FIXED_OFFSETS)
def test_fixed_offset_maps_wall_time_exactly(
    expr: str, zone: str, start: str, expected: list[str]
) -> None:
    assert occurrences(expr, zone, start, len(expected)) == expected


# --- fires_at agrees with next_occurrence, minute by minute -------------------------

AGREEMENT_EXPRESSIONS = [
    "30 2 * * *",
    "0,15,30,45 2 * * *",
    "0 2,3 * * *",
    "*/15 2 * * *",
    "* 2 * * *",
    "30 1 * * *",
    "45 1 * * *",
    "*/10 1 * * *",
    "0 * * * *",
    "*/7 * * * *",
    "0,30 1-3 * * *",
    "15 2 * * 0",
    "59 23 * * *",
]
AGREEMENT_CASES = [
    pytest.param(zone, transition, expr, id=f"{zone}-{transition[:10]}-{expr}")
    for zone, instants in TRANSITIONS_2026.items()
    for transition in instants
    for expr in AGREEMENT_EXPRESSIONS
]


@pytest.mark.parametrize(("zone_name", "transition", "expr_text"), AGREEMENT_CASES)
def test_fires_at_is_true_exactly_at_the_occurrences_around_a_transition(
    zone_name: str, transition: str, expr_text: str
) -> None:
    expr = parse_cron(expr_text)
    zone = parse_zone(zone_name)
    low = utc(transition) - timedelta(hours=24)
    high = utc(transition) + timedelta(hours=24)
    produced: list[datetime] = []
    cursor = next_occurrence(expr, zone, low - MINUTE)
    while cursor < high:
        produced.append(cursor)
        cursor = next_occurrence(expr, zone, cursor)
    firing = [low + i * MINUTE for i in range(48 * 60) if fires_at(expr, zone, low + i * MINUTE)]
    assert firing == produced  # same minutes, and none produced twice


# --- check's warnings -------------------------------------------------------------

SCHEDULE_TOML = """\
[[task]]
name = "berlin-gap"
command = "true"
cron = "30 2 * * *"
timezone = "Europe/Berlin"

[[task]]
name = "berlin-wildcard"
command = "true"
cron = "*/15 2 * * *"
timezone = "Europe/Berlin"

[[task]]
name = "berlin-every-hour"
command = "true"
every_minutes = 15
timezone = "Europe/Berlin"

[[task]]
name = "berlin-every-minute"
command = "true"
every_minute = true
timezone = "Europe/Berlin"

[[task]]
name = "berlin-hourly"
command = "true"
hourly_at = 30
timezone = "Europe/Berlin"

[[task]]
name = "new-york-overlap"
command = "true"
daily_at = "01:30"
timezone = "America/New_York"

[[task]]
name = "lord-howe-gap"
command = "true"
daily_at = "02:15"
timezone = "Australia/Lord_Howe"

[[task]]
name = "lord-howe-overlap"
command = "true"
daily_at = "01:45"
timezone = "Australia/Lord_Howe"

[[task]]
name = "berlin-noon"
command = "true"
daily_at = "12:00"
timezone = "Europe/Berlin"

[[task]]
name = "berlin-weekdays-gap"
command = "true"
daily_at = "02:30"
weekdays = true
timezone = "Europe/Berlin"

[[task]]
name = "offset-night"
command = "true"
daily_at = "02:30"
timezone = "+05:45"

[[task]]
name = "utc-night"
command = "true"
daily_at = "02:30"
"""

# task -> [(code, the date it names, a phrase saying what happens)]
EXPECTED_WARNINGS = {
    "berlin-gap": [
        ("dst-gap", "2026-03-29", "runs once at 03:00"),
        ("dst-overlap", "2026-10-25", "at the first pass"),
    ],
    # A wildcard task whose runs inside one hour are lost or doubled: worth a warning.
    "berlin-wildcard": [
        ("dst-gap", "2026-03-29", "do not happen"),
        ("dst-overlap", "2026-10-25", "both passes"),
    ],
    # A task that runs in every hour: losing or doubling the changed hour's runs is what its
    # schedule says (docs/schedule-file.md#warnings).
    "berlin-every-hour": [],
    "berlin-every-minute": [],
    "berlin-hourly": [],
    "new-york-overlap": [("dst-overlap", "2026-11-01", "at the first pass")],
    "lord-howe-gap": [("dst-gap", "2026-10-04", "runs once at 02:30")],
    "lord-howe-overlap": [("dst-overlap", "2026-04-05", "at the first pass")],
    "berlin-noon": [],
    # 2026-03-29 is a Sunday (no run to move); 2026-10-25 too.
    "berlin-weekdays-gap": [],
    "offset-night": [],
    "utc-night": [],
}


@pytest.fixture
def loaded(tmp_path: Path) -> Schedule:
    """The schedule above, loaded from a real file as `check` would."""
    path = tmp_path / "schedules.toml"
    path.write_text(SCHEDULE_TOML, encoding="utf-8")
    schedule = load(path, env={})
    assert not schedule.errors
    return schedule


@pytest.mark.parametrize("task_name", sorted(EXPECTED_WARNINGS))
def test_task_warnings_name_the_dst_gaps_and_overlaps_the_task_hits(
    loaded: Schedule, task_name: str
) -> None:
    task = loaded.task(task_name)
    warnings = [
        w for w in task_warnings(task, utc("2026-01-01T00:00:00Z")) if w.code.startswith("dst-")
    ]
    expected = EXPECTED_WARNINGS[task_name]
    assert [w.code for w in warnings] == [code for code, _, _ in expected]
    for warning, (_, day, phrase) in zip(warnings, expected, strict=True):
        assert warning.severity == "warning"
        assert warning.task == task_name
        assert ON_DATE.findall(warning.message) == [day]
        assert phrase in warning.message
        assert task.zone.name in warning.message


def test_dst_warnings_look_twelve_months_ahead_only(loaded: Schedule) -> None:
    task = loaded.task("berlin-gap")
    warnings = task_warnings(task, utc("2026-06-01T00:00:00Z"))
    days = [ON_DATE.findall(w.message) for w in warnings if w.code.startswith("dst-")]
    assert days == [["2026-10-25"], ["2027-03-28"]]


def test_loaded_task_next_runs_follow_the_dst_rule(loaded: Schedule) -> None:
    task = loaded.task("berlin-gap")
    runs = task.next_runs(utc("2026-03-28T12:00:00Z"), count=2)
    assert [f"{r:%Y-%m-%dT%H:%M:%SZ}" for r in runs] == [
        "2026-03-29T01:00:00Z",
        "2026-03-30T00:30:00Z",
    ]
    assert task.fires_at(utc("2026-03-29T01:00:00Z"))
    assert not task.fires_at(utc("2026-03-29T01:30:00Z"))


# --- an instant is an instant, whatever offset it is written with -------------------

AWARE_NON_UTC = [
    # (expression, zone, after written with an offset, expected first occurrence)
    pytest.param(
        "0 9 * * *",
        "UTC",
        "2026-08-03T10:30:00+02:00",  # 08:30Z
        "2026-08-03T09:00:00Z",
        id="utc-zone-after-written-in-plus-02:00",
    ),
    pytest.param(
        "0 9 * * *",
        "UTC",
        "2026-08-03T03:00:00-06:00",  # 09:00Z: strictly after excludes it
        "2026-08-04T09:00:00Z",
        id="utc-zone-after-written-in-minus-06:00",
    ),
    pytest.param(
        "0 9 * * *",
        "Europe/Berlin",
        "2026-08-03T08:30:00+02:00",  # 06:30Z, 08:30 CEST
        "2026-08-03T07:00:00Z",
        id="berlin-after-written-in-its-own-offset",
    ),
    pytest.param(
        "0 9 * * *",
        "+05:45",
        "2026-08-03T05:00:00+02:00",  # 03:00Z, 08:45 at +05:45
        "2026-08-03T03:15:00Z",
        id="fixed-offset-after-written-in-plus-02:00",
    ),
]


@pytest.mark.parametrize(("expr", "zone", "after", "expected"), AWARE_NON_UTC)
def test_next_occurrence_reads_an_aware_instant_whatever_its_offset(
    expr: str, zone: str, after: str, expected: str
) -> None:
    found = next_occurrence(parse_cron(expr), parse_zone(zone), datetime.fromisoformat(after))
    assert f"{found.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}" == expected


@pytest.mark.parametrize(
    ("minute", "expected"),
    [
        ("2026-08-03T11:00:00+02:00", True),  # 09:00Z
        ("2026-08-03T09:00:00+02:00", False),  # 07:00Z
    ],
)
def test_fires_at_reads_an_aware_minute_whatever_its_offset(minute: str, expected: bool) -> None:
    expr = parse_cron("0 9 * * *")
    assert fires_at(expr, parse_zone("UTC"), datetime.fromisoformat(minute)) is expected


def test_library_next_runs_and_due_accept_any_aware_datetime(loaded: Schedule) -> None:
    # The library API (docs/commands.md) is for users' own tests, who may hold local aware
    # times.
    task = loaded.task("utc-night")
    after = datetime.fromisoformat("2026-08-03T04:00:00+02:00")  # 02:00Z
    runs = task.next_runs(after, count=1)
    assert [f"{r.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}" for r in runs] == ["2026-08-03T02:30:00Z"]
    at = datetime.fromisoformat("2026-08-03T04:30:00+02:00")  # 02:30Z
    assert "utc-night" in [t.name for t in loaded.due(at)]


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        ("2026-03-29T00:59:00Z", ["2026-03-29T01:00:00Z"]),
        # [start, end): a segment that begins exactly at `start` is one of them.
        ("2026-03-29T01:00:00Z", ["2026-03-29T01:00:00Z"]),
        ("2026-03-29T01:01:00Z", []),
    ],
)
def test_transitions_include_a_segment_that_begins_exactly_at_start(
    start: str, expected: list[str]
) -> None:
    zone = parse_zone("Europe/Berlin")
    found = transitions(zone, utc(start), utc("2026-04-01T00:00:00Z"))
    assert [f"{seg.start:%Y-%m-%dT%H:%M:%SZ}" for seg in found] == expected


def test_transitions_exclude_a_segment_that_begins_exactly_at_end() -> None:
    zone = parse_zone("Europe/Berlin")
    found = transitions(zone, utc("2026-03-01T00:00:00Z"), utc("2026-03-29T01:00:00Z"))
    assert found == []


def test_an_overlap_of_one_time_says_it_happens_twice(loaded: Schedule) -> None:
    # berlin-gap runs daily at 02:30: one wall time repeats, so the verb is singular.
    task = loaded.task("berlin-gap")
    (overlap,) = [
        w for w in task_warnings(task, utc("2026-01-01T00:00:00Z")) if w.code == "dst-overlap"
    ]
    assert "02:30 happens twice" in overlap.message
