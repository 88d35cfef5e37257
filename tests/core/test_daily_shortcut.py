"""next_occurrence answers an expression that names the same minutes every day, in a fixed
zone, without the calendar walk: the answer must be the walk's, for any such expression,
zone and instant (seconds, day and year ends, leap days)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from cronctl.core.cronexpr import parse_cron
from cronctl.core.zones import _next_from, next_occurrence, parse_zone

FIXED = ["UTC", "+05:30", "-03:00", "+14:00", "-12:00", "+00:00"]
# Every day named, whatever the fields look like: the shortcut must take them all.
DAYS = ["* * *", "*/1 * *", "1-31 * 0-6", "* 1-12 *", "* * 0-7", "* JAN-DEC SUN-SAT"]

minute_field = st.one_of(
    st.just("*"),
    st.integers(1, 30).map(lambda n: f"*/{n}"),
    st.lists(st.integers(0, 59), min_size=1, max_size=5, unique=True).map(
        lambda xs: ",".join(map(str, xs))
    ),
)
hour_field = st.one_of(
    st.just("*"),
    st.integers(1, 12).map(lambda n: f"*/{n}"),
    st.lists(st.integers(0, 23), min_size=1, max_size=4, unique=True).map(
        lambda xs: ",".join(map(str, xs))
    ),
)
instants = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9998, 12, 31)).map(
    lambda d: d.replace(tzinfo=UTC)
)


def _walked(text: str, zone_name: str, after: datetime) -> datetime:
    expr, zone = parse_cron(text), parse_zone(zone_name)
    return _next_from(expr, zone, zone.segment_at(after), after)[0]


@settings(max_examples=600, deadline=None)
@given(minute_field, hour_field, st.sampled_from(DAYS), st.sampled_from(FIXED), instants)
def test_the_daily_shortcut_answers_as_the_calendar_walk(
    minutes: str, hours: str, days: str, zone: str, after: datetime
) -> None:
    text = f"{minutes} {hours} {days}"
    assert next_occurrence(parse_cron(text), parse_zone(zone), after) == _walked(text, zone, after)


def test_the_daily_shortcut_at_the_edges_of_a_day_and_a_year() -> None:
    for text in ("59 23 * * *", "0 0 * * *", "*/7 * * * *", "30 2 * * *"):
        for zone in FIXED:
            for base in (datetime(2024, 2, 28, tzinfo=UTC), datetime(2023, 12, 31, tzinfo=UTC)):
                for k in range(-3, 2 * 24 * 60, 13):
                    for second in (0, 59):
                        after = base + timedelta(minutes=k, seconds=second, microseconds=7)
                        got = next_occurrence(parse_cron(text), parse_zone(zone), after)
                        assert got == _walked(text, zone, after), (text, zone, after)
                        assert got.tzinfo is UTC
