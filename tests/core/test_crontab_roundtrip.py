"""An imported task fires exactly when the crontab line it came from did.

The reference is a brute-force matcher written here from the crontab(5) rules,
independent of cronctl's parser: it expands the ORIGINAL line's fields into value
sets and walks the calendar. Debian's day rule: when either day field starts
with '*', a day must match both fields (AND); otherwise either (OR).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cronctl.commands.importer import import_crontab
from cronctl.core.assemble import build_schedule
from cronctl.core.crontab import parse_crontab
from cronctl.core.model import Task
from cronctl.core.schema import FileResult, parse_document
from cronctl.core.tomllines import index_lines

MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
# (low, high, names): minute, hour, day-of-month, month, day-of-week (7 is Sunday too).
FIELDS = [(0, 59, []), (0, 23, []), (1, 31, []), (1, 12, MONTHS), (0, 7, DAYS)]
OCCURRENCES = 50


# --- The reference: a brute-force matcher over the original fields --------------------


def expand(spec: str, low: int, high: int, names: list[str]) -> set[int]:
    """crontab(5): `*`, `N`, `A-B`, `/S` steps, `N/S` = N-high/S, lists, names."""

    def value(text: str) -> int:
        return int(text) if text.isdigit() else names.index(text.upper()) + low

    values: set[int] = set()
    for item in spec.split(","):
        base, slash, step = item.partition("/")
        if base == "*":
            first, last = low, high
        elif "-" in base:
            first, last = (value(part) for part in base.split("-"))
        else:
            first = value(base)
            last = high if slash else first
        values.update(range(first, last + 1, int(step) if slash else 1))
    return values


def brute_force(
    fields: list[str], offset: timedelta, after: datetime, count: int
) -> list[datetime]:
    """The first `count` UTC instants after `after` whose wall time (UTC+offset) matches."""
    minutes, hours, doms, months, dows = (
        expand(spec, *field) for spec, field in zip(fields, FIELDS, strict=True)
    )
    dows = {d % 7 for d in dows}
    either = not fields[2].startswith("*") and not fields[4].startswith("*")
    start = (after + offset).replace(tzinfo=None)
    found: list[datetime] = []
    for day in _days_from(start.date(), months):
        dom_ok, dow_ok = day.day in doms, (day.weekday() + 1) % 7 in dows
        if not ((dom_ok or dow_ok) if either else (dom_ok and dow_ok)):
            continue
        for hour in sorted(hours):
            for minute in sorted(minutes):
                wall = datetime(day.year, day.month, day.day, hour, minute)
                if wall > start:
                    found.append((wall - offset).replace(tzinfo=UTC))
                    if len(found) == count:
                        return found
    return found


def _days_from(first: date, months: set[int]) -> Iterator[date]:
    """Every day from `first` on, skipping whole months the month field leaves out."""
    day = first
    while day.year < 9000:
        if day.month not in months:
            day = (day.replace(day=1) + timedelta(days=32)).replace(day=1)
            continue
        yield day
        day += timedelta(days=1)


# --- Loading the import's TOML through cronctl's own loader ---------------------------


def imported_tasks(crontab: str) -> tuple[list[Task], tuple[str, ...]]:
    result = import_crontab(crontab, system=False, source_name="prop.crontab")
    file = FileResult(path=Path("prop.toml"), display="prop.toml")
    parse_document(tomllib.loads(result.toml), index_lines(result.toml), file)
    schedule = build_schedule([file])
    assert schedule.errors == []
    return list(schedule.tasks), result.report


# --- Random valid crontab lines ---------------------------------------------------------


@st.composite
def field(draw: st.DrawFn, low: int, high: int, names: list[str]) -> str:
    span = high - low + 1

    def atom(lo: int = low, hi: int = high) -> str:
        number = draw(st.integers(lo, hi))
        # 7 (Sunday) has no name of its own: SUN is 0, and MON-SUN would be reversed.
        if names and number - low < len(names) and draw(st.booleans()):
            name = names[number - low]
            return draw(st.sampled_from([name, name.lower(), name.title()]))
        return str(number)

    def item() -> str:
        kind = draw(st.sampled_from(["value", "range", "range-step", "value-step"]))
        if kind == "value":
            return atom()
        first = draw(st.integers(low, high))
        last = draw(st.integers(first, high))
        if kind == "range":
            return f"{atom(first, first)}-{atom(last, last)}"
        step = draw(st.integers(1, span))
        if kind == "range-step":
            return f"{first}-{last}/{step}"
        return f"{first}/{step}"

    shape = draw(st.sampled_from(["star", "star-step", "item", "list"]))
    if shape == "star":
        return "*"
    if shape == "star-step":
        return f"*/{draw(st.integers(1, span))}"
    if shape == "item":
        return item()
    return ",".join(item() for _ in range(draw(st.integers(2, 4))))


def random_line() -> st.SearchStrategy[str]:
    return st.tuples(*(field(*f) for f in FIELDS)).map(" ".join)


def friendly_shaped_line() -> st.SearchStrategy[str]:
    """Lines that look like the friendly keys, so the mapping to them is exercised."""
    minute, hour = st.integers(0, 59), st.integers(0, 23)
    dom, dow = st.integers(1, 31), st.sampled_from(["0", "1", "5", "7", "MON", "sun"])
    divisor = st.sampled_from([1, 2, 3, 4, 5, 6, 7, 9, 10, 12, 15, 20, 30, 45])
    days = st.sampled_from(["*", "1-5", "MON-FRI", "0,6", "SAT,SUN", "1,3,5", "*/2", "6"])
    return st.one_of(
        st.sampled_from(sorted(MACROS)),
        st.builds("{} {} * * {}".format, minute, hour, days),
        st.builds("*/{} * * * {}".format, divisor, days),
        st.builds("{} * * * {}".format, minute, days),
        st.builds("{} {} * * {}".format, minute, hour, dow),
        st.builds("{} {} {} * *".format, minute, hour, dom),
        st.builds("0 {},{} * * {}".format, hour, hour, days),
        st.builds("{} {} 1 1 *".format, minute, hour),
        st.builds("{} */{} * * *".format, minute, st.integers(1, 12)),
    )


ZONES = {
    None: timedelta(0),
    "+05:30": timedelta(hours=5, minutes=30),
    "-03:00": timedelta(hours=-3),
}
AFTER = st.datetimes(datetime(2000, 1, 1), datetime(2035, 12, 31), timezones=st.just(UTC))


@given(
    line=st.one_of(random_line(), friendly_shaped_line()),
    zone=st.sampled_from(sorted(ZONES, key=str)),
    after=AFTER,
)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_imported_task_fires_exactly_when_the_original_line_does(
    line: str, zone: str | None, after: datetime
) -> None:
    crontab = (f"CRON_TZ={zone}\n" if zone else "") + f"{line} /usr/local/bin/job --run\n"
    tasks, report = imported_tasks(crontab)
    if not tasks:
        # The only valid lines cronctl refuses are those that can never fire.
        assert len(report) == 1 and "can never fire" in report[0], report
        assume(False)
    fields = (MACROS[line] if line.startswith("@") else line).split()
    expected = brute_force(fields, ZONES[zone], after, OCCURRENCES)
    assert tasks[0].next_runs(after, OCCURRENCES) == expected


# --- Which keys an expression becomes ---------------------------------------------------


def keys_for(line: str) -> dict[str, Any]:
    (task,) = parse_crontab(f"{line} /bin/job\n", system=False).tasks
    return {k: v for k, v in task.items() if k not in ("name", "description", "command")}


@pytest.mark.parametrize(
    ("line", "keys"),
    [
        ("* * * * *", {"every_minute": True}),
        ("*/1 * * * *", {"every_minute": True}),
        ("*/5 * * * *", {"every_minutes": 5}),
        ("0,20,40 * * * *", {"every_minutes": 20}),
        ("@hourly", {"hourly": True}),
        ("0 * * * *", {"hourly": True}),
        ("30 * * * *", {"hourly_at": 30}),
        ("@daily", {"daily": True}),
        ("@midnight", {"daily": True}),
        ("0 3 * * *", {"daily_at": "03:00"}),
        ("0 9-9 * * *", {"daily_at": "09:00"}),
        ("0 1,13 * * *", {"twice_daily": [1, 13]}),
        ("@weekly", {"weekly": True}),
        ("0 0 * * 7", {"weekly": True}),
        ("0 9 * * 1", {"weekly_on": [1, "09:00"]}),
        ("0 9 * * Mon", {"weekly_on": ["Mon", "09:00"]}),
        ("@monthly", {"monthly": True}),
        ("0 0 15 * *", {"monthly_on": [15, "00:00"]}),
        ("@yearly", {"yearly": True}),
        ("@annually", {"yearly": True}),
        ("0 9 * * 1-5", {"daily_at": "09:00", "weekdays": True}),
        ("*/10 * * * MON-FRI", {"every_minutes": 10, "weekdays": True}),
        ("0 10 * * 0,6", {"daily_at": "10:00", "weekends": True}),
        ("15 * * * 1,3,5", {"hourly_at": 15, "days": "1,3,5"}),
    ],
)
def test_exact_expressions_become_friendly_keys(line: str, keys: dict[str, Any]) -> None:
    assert keys_for(line) == keys


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("*/7 * * * *", "every_minutes must divide 60: */7 restarts each hour"),
        ("5-55/10 * * * *", "offset steps have no key"),
        ("0 */12 * * *", "a '*' hour is a wildcard task under the DST rule, 0,12 is fixed-time"),
        ("0-59 0-23 * * *", "fixed-time under the DST rule, every_minute is not"),
        ("30 1,13 * * *", "twice_daily is on the hour"),
        ("0 9 1-31 * 1", "both day fields restricted: OR, so every day, not Mondays"),
        ("0 0 13 * 5", "the 13th or a Friday"),
        ("0 0 * * */2", "a '*/2' day-of-week has no days key"),
        ("0 0 25 12 *", "no yearly_on key"),
        ("0 6 1 1 *", "yearly is at midnight"),
        ("*/5 9-17 * * 1-5", "hours restrict every_minutes"),
    ],
)
def test_other_expressions_stay_cron_as_written(line: str, why: str) -> None:
    assert keys_for(line) == {"cron": line}, why


def test_fixed_offset_zone_from_cron_tz_becomes_timezone() -> None:
    tasks, _ = imported_tasks("CRON_TZ=+05:30\n0 9 * * * /bin/job\n")
    assert tasks[0].zone.name == "+05:30"
    assert tasks[0].next_run(datetime(2026, 1, 1, tzinfo=UTC)) == datetime(
        2026, 1, 1, 3, 30, tzinfo=UTC
    )
