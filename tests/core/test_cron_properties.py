"""Property tests: cronctl's calendar search (and croniter's) against a brute-force matcher.

The matcher below reads the raw field text itself (not cronexpr's value sets)
and walks the calendar day by day, then minute by minute within a matching
day. It is slow and obvious on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone
from functools import cache
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cronctl.core.cronexpr import CronExpr, parse_cron
from cronctl.core.cronwalk import matching_walls, next_wall
from cronctl.core.zones import (
    MAX_PER_INSTANT,
    fires_at,
    firing_minutes,
    next_occurrence,
    parse_zone,
    walls_at,
)
from cronctl.errors import CronSyntaxError

MINUTE = timedelta(minutes=1)
# Five years of days: every leap day from 2000 to 2045 is four years from the last one.
# Rarer expressions (a leap day on one weekday) are discarded with assume().
SEARCH_DAYS = 5 * 366
PROPERTY_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# --- the brute-force matcher -------------------------------------------------------

# (low, high, names) per field, as the cron man page states them.
RANGES = (
    (0, 59, ()),
    (0, 23, ()),
    (1, 31, ()),
    (1, 12, ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")),
    (0, 7, ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")),
)


def _number(text: str, field: int) -> int:
    names = RANGES[field][2]
    if text.upper() in names:
        return names.index(text.upper()) + (1 if field == 3 else 0)
    return int(text)


def field_set(text: str, field: int) -> set[int]:
    """The values one field names, read from its text."""
    low, high, _ = RANGES[field]
    values: set[int] = set()
    for item in text.split(","):
        base, slash, step_text = item.partition("/")
        step = int(step_text) if slash else 1
        if base == "*":
            first, last = low, high
        elif "-" in base:
            a, b = base.split("-")
            first, last = _number(a, field), _number(b, field)
        else:
            first = _number(base, field)
            last = high if slash else first
        values.update(range(first, last + 1, step))
    if field == 4 and 7 in values:
        values.discard(7)
        values.add(0)
    return values


@dataclass(frozen=True)
class Brute:
    """An expression read by the brute-force matcher."""

    minutes: list[int]
    hours: list[int]
    days: set[int]
    months: set[int]
    weekdays: set[int]
    both_restricted: bool

    @classmethod
    def read(cls, text: str) -> Brute:
        fields = text.split()
        sets = [field_set(f, i) for i, f in enumerate(fields)]
        return cls(
            minutes=sorted(sets[0]),
            hours=sorted(sets[1]),
            days=sets[2],
            months=sets[3],
            weekdays=sets[4],
            # Debian cron: a day field that starts with '*' makes the day match AND.
            both_restricted=not fields[2].startswith("*") and not fields[4].startswith("*"),
        )

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = day.isoweekday() % 7 in self.weekdays
        return (dom or dow) if self.both_restricted else (dom and dow)

    def minute_matches(self, wall: datetime) -> bool:
        return (
            wall.minute in self.minutes
            and wall.hour in self.hours
            and self.day_matches(wall.date())
        )

    def next_after(self, wall: datetime) -> datetime | None:
        """The first wall minute strictly after `wall`, searching SEARCH_DAYS days."""
        day = wall.date()
        for _ in range(SEARCH_DAYS):
            if self.day_matches(day):
                for hour in self.hours:
                    for minute in self.minutes:
                        candidate = datetime(day.year, day.month, day.day, hour, minute)
                        if candidate > wall:
                            return candidate
            day += timedelta(days=1)
        return None


def test_brute_force_matcher_reads_fields_as_the_man_page_says() -> None:
    assert field_set("*/15", 0) == {0, 15, 30, 45}
    assert field_set("50/5", 0) == {50, 55}
    assert field_set("mon-wed,7", 4) == {0, 1, 2, 3}
    assert field_set("nov/1", 3) == {11, 12}
    assert field_set("*/100,1-7", 2) == {1, 2, 3, 4, 5, 6, 7}
    brute = Brute.read("0 9 */100,1-7 * MON")  # the first Monday of the month
    assert brute.next_after(datetime(2027, 3, 2)) == datetime(2027, 4, 5, 9, 0)
    brute = Brute.read("0 0 13 * 5")
    assert brute.next_after(datetime(2026, 4, 10)) == datetime(2026, 4, 13)
    brute = Brute.read("0 0 */2 * 1")
    assert brute.next_after(datetime(2026, 8, 3)) == datetime(2026, 8, 17)


def croniter_next(expr: CronExpr, wall: datetime) -> datetime:
    """What croniter answers for the normalized text (cronctl searched with it until 2026-12)."""
    from croniter import croniter

    found: datetime = croniter(expr.text, wall, implement_cron_bug=True).get_next(datetime)
    return found


# --- strategies -------------------------------------------------------------------


@st.composite
def _value(draw: st.DrawFn, field: int) -> str:
    low, high, names = RANGES[field]
    value = draw(st.integers(low, high))
    if names and draw(st.booleans()):
        index = value - (1 if field == 3 else 0)
        if index < len(names):
            name = names[index]
            return draw(st.sampled_from([name, name.lower(), name.title()]))
    return str(value)


@st.composite
def _item(draw: st.DrawFn, field: int) -> str:
    low, high, _ = RANGES[field]
    span = high - low + 1
    kind = draw(st.sampled_from(["value", "range", "range-step", "value-step"]))
    if kind == "value":
        return draw(_value(field))
    if kind == "value-step":
        return f"{draw(_value(field))}/{draw(st.integers(1, span))}"
    first = draw(_value(field))
    last = draw(_value(field))
    if _number(first, field) > _number(last, field):
        first, last = last, first
    if kind == "range":
        return f"{first}-{last}"
    return f"{first}-{last}/{draw(st.integers(1, span))}"


@st.composite
def _field(draw: st.DrawFn, field: int, star_weight: int = 1) -> str:
    low, high, _ = RANGES[field]
    span = high - low + 1
    choice = draw(st.integers(0, 3 + star_weight))
    if choice == 0:
        return "*"
    if choice == 1:
        return f"*/{draw(st.integers(1, span))}"
    items = ",".join(draw(st.lists(_item(field), min_size=1, max_size=3)))
    if choice == 2 and star_weight:
        # A list led by '*' (Vixie): `*/100,1-7`, `*,5`, `*/15,5`; the step may pass the field.
        star = draw(st.sampled_from(["*", f"*/{draw(st.integers(1, span))}", "*/100"]))
        return f"{star},{items}"
    return items


@st.composite
def expressions(draw: st.DrawFn) -> str:
    """Random valid five-field expressions; day fields with and without '*'."""
    fields = [draw(_field(i)) for i in range(5)]
    return " ".join(fields)


@st.composite
def start_instants(draw: st.DrawFn) -> datetime:
    """Aware UTC instants across 2000-2040, sometimes off the minute."""
    start = draw(
        st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2040, 12, 31, 23, 59))
    )
    if draw(st.booleans()):
        start = start.replace(second=0, microsecond=0)
    return start.replace(tzinfo=UTC)


def _parsed(text: str) -> CronExpr:
    """The parsed expression; a never-firing draw is discarded, any other rejection fails."""
    try:
        return parse_cron(text)
    except CronSyntaxError as exc:
        assert exc.code == "cron-never-fires", f"{text!r} rejected: {exc}"
        assume(False)
        raise


# --- properties -------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(text=expressions())
def test_generated_expressions_are_accepted_with_the_brute_force_value_sets(text: str) -> None:
    expr = _parsed(text)
    fields = text.split()
    assert expr.minutes == frozenset(field_set(fields[0], 0))
    assert expr.hours == frozenset(field_set(fields[1], 1))
    assert expr.days == frozenset(field_set(fields[2], 2))
    assert expr.months == frozenset(field_set(fields[3], 3))
    assert expr.weekdays == frozenset(field_set(fields[4], 4))


@PROPERTY_SETTINGS
@given(text=expressions())
def test_normalized_text_reparses_to_the_same_expression(text: str) -> None:
    expr = _parsed(text)
    again = parse_cron(expr.text)
    assert again == expr  # same text, value sets and day-rule flags
    assert parse_cron(again.text).text == again.text


@PROPERTY_SETTINGS
@given(text=expressions(), start=start_instants())
def test_next_wall_equals_croniter_and_brute_force(text: str, start: datetime) -> None:
    expr = _parsed(text)
    wall = start.replace(tzinfo=None)
    expected = Brute.read(text).next_after(wall)
    assume(expected is not None)
    assert croniter_next(expr, wall) == expected
    assert next_wall(expr, wall) == expected  # cronctl's own search (cronctl.core.cronwalk)


@PROPERTY_SETTINGS
@given(text=expressions(), start=start_instants())
def test_next_occurrence_in_utc_equals_brute_force(text: str, start: datetime) -> None:
    expr = _parsed(text)
    expected = Brute.read(text).next_after(start.replace(tzinfo=None))
    assume(expected is not None)
    assert next_occurrence(expr, parse_zone("UTC"), start) == expected.replace(tzinfo=UTC)


@PROPERTY_SETTINGS
@given(
    text=expressions(),
    start=start_instants(),
    offset=st.sampled_from(["+05:45", "-03:30", "+14:00", "-09:30", "+00:00", "-12:00"]),
)
def test_next_occurrence_in_fixed_offset_equals_brute_force_on_shifted_wall_time(
    text: str, start: datetime, offset: str
) -> None:
    expr = _parsed(text)
    zone = parse_zone(offset)
    sign = -1 if offset.startswith("-") else 1
    shift = sign * timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6]))
    assert zone.tz == timezone(shift)
    expected = Brute.read(text).next_after((start + shift).replace(tzinfo=None))
    assume(expected is not None)
    assert next_occurrence(expr, zone, start) == (expected - shift).replace(tzinfo=UTC)


WINDOW = 120  # minutes either side of an occurrence


@PROPERTY_SETTINGS
@given(
    text=expressions(),
    start=start_instants(),
    zone_name=st.sampled_from(["UTC", "+05:45", "-03:30"]),
)
def test_fires_at_is_true_exactly_at_next_occurrence_instants(
    text: str, start: datetime, zone_name: str
) -> None:
    expr = _parsed(text)
    zone = parse_zone(zone_name)
    anchor = next_occurrence(expr, zone, start)
    low = anchor - WINDOW * MINUTE
    high = anchor + WINDOW * MINUTE
    occurrences: set[datetime] = set()
    cursor = next_occurrence(expr, zone, low - MINUTE)
    while cursor <= high:
        occurrences.add(cursor)
        cursor = next_occurrence(expr, zone, cursor)
    firing = {
        low + i * MINUTE for i in range(2 * WINDOW + 1) if fires_at(expr, zone, low + i * MINUTE)
    }
    assert firing == occurrences
    assert anchor in firing


# Zones with daylight saving: a 30-minute shift, a southern one changing at midnight,
# a 2-hour shift, and Samoa skipping a whole day (2011-12-30).
DST_ZONES = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "America/Santiago",
    "America/St_Johns",
    "Antarctica/Troll",
    "Pacific/Apia",
]


@cache
def _changes(name: str) -> tuple[datetime, ...]:
    """Every offset change of `name` in 2000-2040, found with zoneinfo alone."""
    tz = ZoneInfo(name)

    def offset(instant: datetime) -> timedelta | None:
        return instant.astimezone(tz).utcoffset()

    found: list[datetime] = []
    day = datetime(2000, 1, 1, tzinfo=UTC)
    while day.year <= 2040:
        following = day + timedelta(days=1)
        if offset(day) != offset(following):
            low, high = day, following
            while high - low > MINUTE:
                middle = low + (high - low) / 2
                low, high = (middle, high) if offset(middle) == offset(day) else (low, middle)
            found.append(high.replace(second=0, microsecond=0))
        day = following
    return tuple(found)


@st.composite
def near_transition(draw: st.DrawFn) -> tuple[str, datetime]:
    """An IANA zone and a minute within a day of one of its offset changes in 2000-2040."""
    name = draw(st.sampled_from(DST_ZONES))
    change = draw(st.sampled_from(_changes(name)))
    shift = draw(st.integers(-24 * 60, 24 * 60))
    return name, change + shift * MINUTE


@st.composite
def daily_expressions(draw: st.DrawFn) -> str:
    """Expressions that fire on most days, so a window around a transition has something to see."""
    minute = draw(_field(0, star_weight=draw(st.integers(0, 1))))
    hour = draw(_field(1, star_weight=draw(st.integers(0, 1))))
    weekday = draw(st.one_of(st.just("*"), _field(4, star_weight=0)))
    return f"{minute} {hour} * * {weekday}"


def debian_fires(expr: CronExpr, tz: ZoneInfo, minute: datetime) -> bool:
    """Debian cron's DST rule, read off zoneinfo directly, for one UTC minute."""
    local = minute.astimezone(tz)
    wall = local.replace(tzinfo=None)
    if expr.matches(wall):
        # A fixed-time task runs at the first pass of a repeated wall time only.
        first_pass = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
        return not (expr.fixed_time and first_pass < minute)
    before = (minute - MINUTE).astimezone(tz)
    offset, previous = local.utcoffset(), before.utcoffset()
    assert offset is not None and previous is not None
    if expr.fixed_time and offset > previous:
        # The first minute after a gap: run if any of the skipped wall minutes is named.
        skipped = before.replace(tzinfo=None) + MINUTE
        while skipped < wall:
            if expr.matches(skipped):
                return True
            skipped += MINUTE
    return False


@PROPERTY_SETTINGS
@given(text=daily_expressions(), where=near_transition())
def test_fires_at_follows_debian_dst_rule_read_off_zoneinfo(
    text: str, where: tuple[str, datetime]
) -> None:
    expr = _parsed(text)
    name, middle = where
    zone, tz = parse_zone(name), ZoneInfo(name)
    low = middle - WINDOW * MINUTE
    for i in range(2 * WINDOW + 1):
        minute = low + i * MINUTE
        assert fires_at(expr, zone, minute) == debian_fires(expr, tz, minute), minute


def debian_runs(expr: CronExpr, tz: ZoneInfo, minute: datetime) -> int:
    """How many runs Debian's daemon starts at one UTC minute: after a forward jump it
    queues a fixed-time job once per skipped wall minute it names, then the minute itself."""
    local = minute.astimezone(tz)
    wall = local.replace(tzinfo=None)
    runs = 0
    if expr.matches(wall):
        first_pass = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
        runs += not (expr.fixed_time and first_pass < minute)
    before = (minute - MINUTE).astimezone(tz)
    if expr.fixed_time and local.utcoffset() > before.utcoffset():  # type: ignore[operator]
        skipped = before.replace(tzinfo=None) + MINUTE
        while skipped < wall:
            runs += expr.matches(skipped)
            skipped += MINUTE
    return runs


@PROPERTY_SETTINGS
@given(text=daily_expressions(), where=near_transition())
def test_walls_at_counts_the_runs_debian_starts_at_each_minute(
    text: str, where: tuple[str, datetime]
) -> None:
    expr = _parsed(text)
    name, middle = where
    zone, tz = parse_zone(name), ZoneInfo(name)
    low = middle - WINDOW * MINUTE
    for i in range(2 * WINDOW + 1):
        minute = low + i * MINUTE
        expected = min(debian_runs(expr, tz, minute), MAX_PER_INSTANT)
        assert len(walls_at(expr, zone, minute)) == expected, minute


@PROPERTY_SETTINGS
@given(text=daily_expressions(), where=near_transition())
def test_fires_at_agrees_with_next_occurrence_around_dst_transitions(
    text: str, where: tuple[str, datetime]
) -> None:
    expr = _parsed(text)
    name, middle = where
    zone = parse_zone(name)
    low = middle - WINDOW * MINUTE
    high = low + 2 * WINDOW * MINUTE
    occurrences: set[datetime] = set()
    cursor = next_occurrence(expr, zone, low - MINUTE)
    while cursor <= high:
        assert cursor not in occurrences
        occurrences.add(cursor)
        cursor = next_occurrence(expr, zone, cursor)
    firing = {
        low + i * MINUTE for i in range(2 * WINDOW + 1) if fires_at(expr, zone, low + i * MINUTE)
    }
    assert firing == occurrences


@PROPERTY_SETTINGS
@given(
    text=expressions(),
    start=start_instants(),
    zone_name=st.sampled_from(["UTC", "+05:45", "Europe/Berlin", "Australia/Lord_Howe"]),
    written_in=st.integers(-12 * 60, 14 * 60).map(lambda m: timezone(m * MINUTE)),
)
def test_next_occurrence_depends_on_the_instant_not_the_offset_it_is_written_in(
    text: str, start: datetime, zone_name: str, written_in: timezone
) -> None:
    expr = _parsed(text)
    zone = parse_zone(zone_name)
    expected = next_occurrence(expr, zone, start)
    assert next_occurrence(expr, zone, start.astimezone(written_in)) == expected


# --- cronctl's own search (cronctl.core.cronwalk) against croniter and brute force ---------


def brute_minutes(
    brute: Brute, start: datetime, end: datetime, shift: timedelta = timedelta(0)
) -> list[datetime]:
    """The whole minutes in [start, end) whose wall time (minute + shift) the matcher names."""
    probe = start.replace(second=0, microsecond=0)
    probe += MINUTE if probe < start else timedelta(0)
    found = []
    while probe < end:
        if brute.minute_matches((probe + shift).replace(tzinfo=None)):
            found.append(probe)
        probe += MINUTE
    return found


@PROPERTY_SETTINGS
@given(text=expressions(), start=start_instants(), minutes=st.integers(0, 3 * 24 * 60))
def test_matching_walls_lists_every_brute_force_match_in_the_range(
    text: str, start: datetime, minutes: int
) -> None:
    expr = _parsed(text)
    low = start.replace(tzinfo=None)
    high = low + minutes * MINUTE
    assert list(matching_walls(expr, low, high)) == brute_minutes(Brute.read(text), low, high)


@PROPERTY_SETTINGS
@given(
    text=expressions(),
    start=start_instants(),
    offset=st.sampled_from(["UTC", "+05:45", "-03:30", "+14:00", "-09:30", "-12:00"]),
    minutes=st.integers(0, 2 * 24 * 60),
)
def test_firing_minutes_in_utc_and_fixed_offsets_equal_brute_force(
    text: str, start: datetime, offset: str, minutes: int
) -> None:
    expr = _parsed(text)
    zone = parse_zone(offset)
    shift = zone.tz.utcoffset(None)
    assert shift is not None
    end = start + minutes * MINUTE
    expected = brute_minutes(Brute.read(text), start, end, shift)
    assert firing_minutes(expr, zone, start, end) == expected


@PROPERTY_SETTINGS
@given(
    text=st.one_of(expressions(), daily_expressions()),
    where=near_transition(),
    seconds=st.integers(0, 59),
)
def test_firing_minutes_around_dst_transitions_follow_the_debian_rule(
    text: str, where: tuple[str, datetime], seconds: int
) -> None:
    expr = _parsed(text)
    name, middle = where
    zone, tz = parse_zone(name), ZoneInfo(name)
    low = middle - WINDOW * MINUTE
    expected = [
        low + i * MINUTE for i in range(2 * WINDOW) if debian_fires(expr, tz, low + i * MINUTE)
    ]
    assert firing_minutes(expr, zone, low, low + 2 * WINDOW * MINUTE) == expected
    # A start off the minute: the first minute counted is the next whole one.
    later = low + seconds * timedelta(seconds=1) + timedelta(microseconds=1)
    assert (
        firing_minutes(expr, zone, later, low + 2 * WINDOW * MINUTE)
        == expected[1 if expected and expected[0] == low else 0 :]
    )


@PROPERTY_SETTINGS
@given(text=expressions(), where=near_transition())
def test_next_occurrence_in_dst_zones_is_the_first_minute_the_debian_rule_fires(
    text: str, where: tuple[str, datetime]
) -> None:
    expr = _parsed(text)
    name, start = where
    zone, tz = parse_zone(name), ZoneInfo(name)
    expected = next(
        (
            start + i * MINUTE
            for i in range(1, 2 * WINDOW + 1)
            if debian_fires(expr, tz, start + i * MINUTE)
        ),
        None,
    )
    found = next_occurrence(expr, zone, start)
    if expected is None:
        assert found > start + 2 * WINDOW * MINUTE
    else:
        assert found == expected
