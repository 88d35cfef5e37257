"""`list` describes schedules in words that match cronctl's own rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronctl.core.cronexpr import parse_cron
from cronctl.core.describe import describe, describe_cron
from tests.core.test_calendar import make_task

CASES = [
    ("0 3 * * 1-5", "at 03:00, Monday through Friday"),
    ("*/5 8-18 * * MON-FRI", "every 5 minutes, 08:00-18:59, Monday through Friday"),
    ("15 * * * *", "every hour at :15"),
    ("* * * * *", "every minute"),
    ("0 6,18 * * *", "at 06:00 and 18:00"),
    ("0 0 1 1 *", "at 00:00, on day 1 of the month, in January"),
    ("0 9 * * 0,6", "at 09:00, on Saturday and Sunday"),
    ("0 */2 * * *", "every 2 hours at :00"),
    ("0 9-17 * * *", "every hour at :00, 09:00-17:59"),
    ("5 4 * * 7", "at 04:05, on Sunday"),
    # Both day fields restricted: either matches (Vixie cron's OR).
    ("0 0 13 * 5", "at 00:00, on day 13 of the month and on every Friday"),
    # A day field starting with '*' makes it AND: cron-descriptor says "or" here.
    ("0 0 */2 * 1", "at 00:00, on Monday, but only on days 1, 3, ..., 31 of the month"),
]


@pytest.mark.parametrize(("expr", "words"), CASES)
def test_expression_in_words(expr: str, words: str) -> None:
    assert describe_cron(parse_cron(expr)) == words


@pytest.mark.parametrize("expr", ["0 0 13 * 5", "0 0 */2 * 1"])
def test_the_words_about_days_agree_with_the_days_it_runs(expr: str) -> None:
    task = make_task(expr, "UTC")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    days = {t.date() for t in task.next_runs(start - timedelta(minutes=1), 60)}
    words = describe(task)
    if "but only" in words:  # AND: every run is a Monday on an odd day
        assert all(d.weekday() == 0 and d.day % 2 == 1 for d in days)
    else:  # OR: the 13th that is not a Friday runs, and Fridays that are not the 13th
        assert any(d.day == 13 and d.weekday() != 4 for d in days)
        assert any(d.weekday() == 4 and d.day != 13 for d in days)


def test_a_zone_other_than_utc_is_named() -> None:
    assert describe(make_task("0 9 * * 1-5", "Europe/Berlin")) == (
        "at 09:00, Monday through Friday (Europe/Berlin time)"
    )
