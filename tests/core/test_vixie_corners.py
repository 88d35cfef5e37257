"""Valid Debian cron that surprises: lists led by '*', weekday steps, and what `check` says.

Debian cron (entry.c) sets a field's wildcard flag from its first character only, and
ANDs the two day fields when either flag is set. So `0 9 */100,1-7 * MON` runs on Mondays
that fall on days 1-7 (the first Monday of the month), while `1-7,*/100` names the same
days but would be ORed with Monday: cronctl rejects that order.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from cronctl.core.analysis import task_warnings
from cronctl.core.cronexpr import parse_cron
from cronctl.core.model import Task
from cronctl.core.zones import next_occurrence, parse_zone
from cronctl.errors import CronSyntaxError
from tests.helpers import make_task

NOW = datetime(2027, 1, 1, tzinfo=UTC)


def warnings(task: Task, code: str) -> list[str]:
    return [p.message for p in task_warnings(task, NOW) if p.code == code]


def fire_days(expression: str, count: int) -> list[date]:
    expr, zone = parse_cron(expression), parse_zone("UTC")
    found: list[date] = []
    cursor = NOW
    for _ in range(count):
        cursor = next_occurrence(expr, zone, cursor)
        found.append(cursor.date())
    return found


def test_star_led_day_list_with_a_weekday_is_the_first_such_weekday_of_the_month() -> None:
    assert fire_days("0 9 */100,1-7 * MON", 4) == [
        date(2027, 1, 4),
        date(2027, 2, 1),
        date(2027, 3, 1),
        date(2027, 4, 5),
    ]


def test_check_explains_the_first_monday_idiom() -> None:
    [message] = warnings(make_task("0 9 */100,1-7 * MON"), "cron-star-list")
    assert "'*/100,1-7'" in message
    assert "ANDs it with day-of-week 'MON'" in message
    assert "the first Monday of the month" in message


def test_check_says_a_star_led_minute_list_makes_the_task_a_wildcard_one() -> None:
    [message] = warnings(make_task("*/15,5 2 * * *"), "cron-star-list")
    assert "minutes 0,5,15,30,45" in message
    assert "wildcard" in message and "spring-forward gap" in message


@pytest.mark.parametrize(
    ("expression", "days"),
    [
        ("0 9 * * MON/2", "Mon, Wed, Fri and Sun"),
        ("0 9 * * fri/2", "Fri and Sun"),
        ("0 9 * * 1/3", "Mon, Thu and Sun"),
    ],
)
def test_weekday_step_reaching_seven_is_kept_and_warned_naming_the_days(
    expression: str, days: str
) -> None:
    expr = parse_cron(expression)
    assert 0 in expr.weekdays  # Vixie's reading: 7 is Sunday again
    [message] = warnings(make_task(expression), "cron-weekday-step")
    assert f"it means {days}" in message


@pytest.mark.parametrize("expression", ["0 9 * * TUE/2", "0 9 * * 0/2", "0 9 * * 1-7/2"])
def test_weekday_step_that_stops_before_sunday_or_names_7_itself_is_not_warned(
    expression: str,
) -> None:
    assert warnings(make_task(expression), "cron-weekday-step") == []


@pytest.mark.parametrize(
    "expression",
    ["0 9 1-7,*/100 * MON", "5,* * * * *", "0 0,*/6 * * *", "0 0 1 1,*/3 *"],
)
def test_star_item_later_in_a_list_is_rejected_with_the_order_to_write(expression: str) -> None:
    with pytest.raises(CronSyntaxError, match="move it first"):
        parse_cron(expression)


def test_standalone_step_past_the_field_is_still_rejected() -> None:
    # Debian reads `*/100` in the minute field as minute 0 only: a misreading of "every 100".
    with pytest.raises(CronSyntaxError, match="must be between 1 and 60"):
        parse_cron("*/100 * * * *")


# --- check's DST gap warning: how many a gap swallows, and what the policy does --------


def gap_warning(expression: str, misfire: str, zone: str = "Europe/Berlin") -> str:
    [message] = [m for m in warnings(make_task(expression, zone, misfire=misfire), "dst-gap")]
    return message


def test_gap_warning_counts_the_swallowed_times_and_says_coalesce_runs_once() -> None:
    message = gap_warning("0,30 2 * * *", "coalesce")
    assert "02:00, 02:30 do not exist (2 occurrences swallowed)" in message
    assert "03:00 local (2027-03-28T01:00:00Z)" in message
    assert 'misfire = "coalesce" runs it once and records the other as missed' in message


def test_gap_warning_for_sixty_swallowed_minutes_counts_them() -> None:
    message = gap_warning("0-59 2 * * *", "coalesce")
    assert "(60 occurrences swallowed)" in message
    assert "records the other 59 as missed" in message


def test_gap_warning_says_catch_up_runs_each_including_its_own_landing_time() -> None:
    message = gap_warning("0 2-3 * * *", "catch-up")
    assert "(1 occurrence swallowed)" in message
    assert "besides its own 03:00 run" in message
    assert 'misfire = "catch-up" runs it 2 times in turn' in message


def test_gap_warning_for_one_swallowed_time_says_it_runs_once_after_the_gap() -> None:
    message = gap_warning("30 2 * * *", "skip")
    assert "it runs once at 03:00 local" in message


def test_gap_warning_for_a_wildcard_task_says_the_runs_do_not_happen() -> None:
    message = gap_warning("*/30 2 * * *", "catch-up")
    assert "those 2 occurrences do not happen" in message


def test_gap_warning_in_lord_howe_names_the_half_hour_gap() -> None:
    message = gap_warning("0,15 2 * * *", "catch-up", "Australia/Lord_Howe")
    assert "02:00, 02:15 do not exist" in message
    assert "02:30 local (2027-10-02T15:30:00Z)" in message
