"""Times on the dashboard's pages: words from the page's now, the exact instant in the
task's zone on hover (web/human_time.py, and the ``<time>`` the pages write)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronctl.core.zones import parse_zone
from cronctl.web.human_time import exact, relative
from cronctl.web.overview_html import time_tag

NOW = datetime(2026, 12, 3, 8, 3, tzinfo=UTC)
BERLIN = parse_zone("Europe/Berlin")
WORDS = re.compile(
    r"just now|in seconds|(in )?(?P<amount>[1-9][0-9]*) (?P<unit>min|h|days?)( ago)?"
)
UNITS = {"min": 60, "h": 3600, "day": 86400, "days": 86400}


@pytest.mark.parametrize(
    ("offset", "words"),
    [
        (timedelta(0), "just now"),
        (timedelta(seconds=1), "in seconds"),
        (timedelta(seconds=59), "in seconds"),
        (timedelta(seconds=-59), "just now"),
        (timedelta(seconds=59, microseconds=999_999), "in seconds"),
        (timedelta(seconds=60), "in 1 min"),
        (timedelta(seconds=-60), "1 min ago"),
        (timedelta(seconds=-90), "2 min ago"),
        (timedelta(seconds=89), "in 1 min"),
        (timedelta(seconds=90), "in 2 min"),
        (timedelta(minutes=12), "in 12 min"),
        (timedelta(minutes=59), "in 59 min"),
        (timedelta(minutes=-59, seconds=-29), "59 min ago"),
        (timedelta(minutes=59, seconds=30), "in 1 h"),
        (timedelta(minutes=-60), "1 h ago"),
        (timedelta(minutes=1409), "in 23 h"),
        (timedelta(minutes=-2160), "2 days ago"),
        (timedelta(minutes=89), "in 1 h"),
        (timedelta(minutes=90), "in 2 h"),
        (timedelta(hours=-3), "3 h ago"),
        (timedelta(hours=23), "in 23 h"),
        (timedelta(hours=-23, minutes=-29), "23 h ago"),
        (timedelta(hours=23, minutes=30), "in 1 day"),
        (timedelta(hours=-35, minutes=-59), "1 day ago"),
        (timedelta(hours=36), "in 2 days"),
        (timedelta(days=-400), "400 days ago"),
    ],
)
def test_words_from_now_at_each_boundary(offset: timedelta, words: str) -> None:
    assert relative(NOW + offset, NOW) == words


@given(st.integers(min_value=-(10**9), max_value=10**9))
def test_words_are_the_nearest_whole_unit_for_any_span(seconds: int) -> None:
    words = relative(NOW + timedelta(seconds=seconds), NOW)
    assert words.startswith("in ") == (seconds > 0)
    assert words.endswith(" ago") == (seconds <= -60)
    found = WORDS.fullmatch(words)
    assert found is not None, words
    if found["amount"]:
        amount, size = int(found["amount"]), UNITS[found["unit"]]
        assert abs(abs(seconds) - amount * size) <= size / 2
        assert amount < {"min": 60, "h": 24}.get(found["unit"], 10**9)
    else:
        assert abs(seconds) < 60


# UTC instant, the task's zone, the page's title. Berlin in winter and in summer; the night
# it springs forward (02:00-02:59 never happens) and the night it falls back (02:30 twice,
# told apart by the abbreviation); New York's fall back with seconds; fixed zones; an
# instant whose wall time would leave datetime's range, in UTC.
TITLES = """
2026-12-03T02:15:00Z Europe/Berlin    2026-12-03 03:15 CET (Europe/Berlin)
2026-08-03T07:30:00Z Europe/Berlin    2026-08-03 09:30 CEST (Europe/Berlin)
2026-03-29T00:59:00Z Europe/Berlin    2026-03-29 01:59 CET (Europe/Berlin)
2026-03-29T01:00:00Z Europe/Berlin    2026-03-29 03:00 CEST (Europe/Berlin)
2026-10-25T00:30:00Z Europe/Berlin    2026-10-25 02:30 CEST (Europe/Berlin)
2026-10-25T01:30:00Z Europe/Berlin    2026-10-25 02:30 CET (Europe/Berlin)
2026-11-01T05:30:09Z America/New_York 2026-11-01 01:30:09 EDT (America/New_York)
2026-11-01T06:30:09Z America/New_York 2026-11-01 01:30:09 EST (America/New_York)
2026-12-03T02:15:00Z UTC              2026-12-03 02:15 UTC
2026-12-03T02:15:07Z UTC              2026-12-03 02:15:07 UTC
2026-12-03T02:15:00Z +05:30           2026-12-03 07:45 UTC+05:30
2026-12-03T02:15:00Z -03:30           2026-12-02 22:45 UTC-03:30
0999-01-02T03:04:00Z UTC              0999-01-02 03:04 UTC
9999-12-31T23:30:00Z Europe/Berlin    9999-12-31 23:30 UTC
0001-01-01T00:30:00Z America/New_York 0001-01-01 00:30 UTC
"""


@pytest.mark.parametrize("line", TITLES.strip().splitlines())
def test_the_exact_instant_in_the_tasks_zone(line: str) -> None:
    at, zone, title = line.split(maxsplit=2)
    assert exact(datetime.fromisoformat(at), parse_zone(zone)) == title


def test_a_time_element_carries_utc_for_machines_and_the_zone_for_people() -> None:
    at = NOW + timedelta(minutes=12)
    assert time_tag(at, NOW, BERLIN) == (
        '<time datetime="2026-12-03T08:15:00Z" title="2026-12-03 09:15 CET (Europe/Berlin)">'
        "in 12 min</time>"
    )
    assert time_tag(None, NOW, BERLIN) == "-"
