"""cronctl's cron language: what it accepts, how it normalizes it, and what it rejects.

Table-driven: each case is an ``{input, expected}`` row. Rejections are a
product of patterns and bad values, so every field meets every kind of mistake.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from cronctl.core.cronexpr import CronExpr, parse_cron
from cronctl.core.cronwalk import next_wall
from cronctl.errors import CronSyntaxError

EVERY_MINUTE = frozenset(range(60))
EVERY_HOUR = frozenset(range(24))
EVERY_DAY = frozenset(range(1, 32))
EVERY_MONTH = frozenset(range(1, 13))
EVERY_WEEKDAY = frozenset(range(7))

# --- accepted expressions and their normalized text --------------------------------

NORMALIZED = [
    # (input, normalized text)
    ("* * * * *", "* * * * *"),
    ("0 9 * * *", "0 9 * * *"),
    # croniter 7 reads N-N as the whole field; cronctl hands it a single value.
    ("0 9-9 * * *", "0 9 * * *"),
    ("5-5 * * * *", "5 * * * *"),
    ("0 0 1-1 * *", "0 0 1 * *"),
    ("0 0 * 3-3 *", "0 0 * 3 *"),
    ("0 0 * * 2-2", "0 0 * * 2"),
    # 7 is Sunday, folded into 0.
    ("5-7 * * * 5-7", "5-7 * * * 0,5,6"),
    ("0 0 * * 7", "0 0 * * 0"),
    ("0 0 * * 0,7", "0 0 * * 0"),
    ("0 0 * * 6-7", "0 0 * * 0,6"),
    ("0 0 * * 0-7", "0 0 * * 0-6"),
    ("0 0 * * 1-7", "0 0 * * 0-6"),
    # Lists are sorted, deduplicated, and runs of three or more become ranges.
    ("3,1,2 * * * *", "1-3 * * * *"),
    ("1,2 * * * *", "1,2 * * * *"),
    ("1,1,1 * * * *", "1 * * * *"),
    ("0,1,2,3,10,20,21 * * * *", "0-3,10,20,21 * * * *"),
    ("10-20,15-25 * * * *", "10-25 * * * *"),
    # Leading zeros and extra blanks are not part of the meaning.
    ("00 09 01 01 00", "0 9 1 1 0"),
    ("  0   9  *  *  *  ", "0 9 * * *"),
    ("0\t9\t*\t*\t*", "0 9 * * *"),
    # Steps on ranges and on single values: N/S means N-max/S.
    ("0-30/10 * * * *", "0,10,20,30 * * * *"),
    ("30/15 * * * *", "30,45 * * * *"),
    ("0 20/2 * * *", "0 20,22 * * *"),
    ("0 0 25/3 * *", "0 0 25,28,31 * *"),
    ("0 0 1-31/10 * *", "0 0 1,11,21,31 * *"),
    ("0 0 1 10/1 *", "0 0 1 10-12 *"),
    ("0 0 * * 5/1", "0 0 * * 0,5,6"),
    ("0 0 * * 1/2", "0 0 * * 0,1,3,5"),
    ("0 0-23/6 * * *", "0 0,6,12,18 * * *"),
    # A field that starts with '*' is kept as written: the day fields' AND/OR rule reads it.
    ("*/5 * * * *", "*/5 * * * *"),
    ("*/1 * * * *", "*/1 * * * *"),
    ("0 */2 * * *", "0 */2 * * *"),
    ("0 0 */2 * 1", "0 0 */2 * 1"),
    ("0 0 1 * */2", "0 0 1 * */2"),
    # A list led by '*' (Vixie): the '*' item is its values, and may step past the field
    # (only the first value); kept led by '*/SPAN', which names just that first value.
    ("0 9 */100,1-7 * MON", "0 9 */31,1-7 * 1"),
    ("*,5 * * * *", "* * * * *"),
    ("*/15,5 2 * * *", "*/60,0,5,15,30,45 2 * * *"),
    ("0 */12,5 * * *", "0 */24,0,5,12 * * *"),
    ("0 0 1 */6,2 *", "0 0 1 */12,1,2,7 *"),
    ("0 0 * * */7,WED", "0 0 * * */8,0,3"),
    # Month and day names, any case.
    ("0 0 * JAN *", "0 0 * 1 *"),
    ("0 0 * jan *", "0 0 * 1 *"),
    ("0 0 * Dec *", "0 0 * 12 *"),
    ("0 0 * jan-MAR *", "0 0 * 1-3 *"),
    ("0 0 * JAN,jul,Oct *", "0 0 * 1,7,10 *"),
    ("0 0 * feb-dec/2 *", "0 0 * 2,4,6,8,10,12 *"),
    ("*/5 9-17 * * MON-FRI", "*/5 9-17 * * 1-5"),
    ("0 0 * * mon-fri", "0 0 * * 1-5"),
    ("0 0 * * Sun", "0 0 * * 0"),
    ("0 0 * * sat,SUN", "0 0 * * 0,6"),
    ("0 0 * * SUN-SAT", "0 0 * * 0-6"),
    ("0 0 * * MON/2", "0 0 * * 0,1,3,5"),
    ("0 0 * * fri-6", "0 0 * * 5,6"),
    # Both day fields restricted: kept, and read as OR.
    ("0 0 13 * 5", "0 0 13 * 5"),
    ("0 0 1,15 * MON-FRI", "0 0 1,15 * 1-5"),
    # Macros, any case.
    ("@hourly", "0 * * * *"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@weekly", "0 0 * * 0"),
    ("@monthly", "0 0 1 * *"),
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@DAILY", "0 0 * * *"),
    ("@Weekly", "0 0 * * 0"),
    ("  @hourly  ", "0 * * * *"),
    # Rare but real: an OR that fires on Sundays in February, and leap days.
    ("0 0 31 2 0", "0 0 31 2 0"),
    ("0 0 29 2 *", "0 0 29 2 *"),
    ("0 0 30 1-2 *", "0 0 30 1,2 *"),
    ("0 0 31 * *", "0 0 31 * *"),
]


@pytest.mark.parametrize(("source", "expected"), NORMALIZED)
def test_accepted_expression_is_normalized(source: str, expected: str) -> None:
    assert parse_cron(source).text == expected


@pytest.mark.parametrize(("source", "expected"), NORMALIZED)
def test_normalized_text_parses_to_itself(source: str, expected: str) -> None:
    again = parse_cron(expected)
    first = parse_cron(source)
    assert again.text == expected
    assert _value_sets(again) == _value_sets(first)


def _value_sets(expr: CronExpr) -> tuple[frozenset[int], ...]:
    return (expr.minutes, expr.hours, expr.days, expr.months, expr.weekdays)


VALUE_SETS = [
    # (input, (minutes, hours, days, months, weekdays))
    (
        "* * * * *",
        (EVERY_MINUTE, EVERY_HOUR, EVERY_DAY, EVERY_MONTH, EVERY_WEEKDAY),
    ),
    (
        "5-7 * * * 5-7",
        (frozenset({5, 6, 7}), EVERY_HOUR, EVERY_DAY, EVERY_MONTH, frozenset({0, 5, 6})),
    ),
    (
        "*/15 */6 */10 */3 */2",
        (
            frozenset({0, 15, 30, 45}),
            frozenset({0, 6, 12, 18}),
            frozenset({1, 11, 21, 31}),
            frozenset({1, 4, 7, 10}),
            frozenset({0, 2, 4, 6}),
        ),
    ),
    (
        "50/5 22/1 28/2 11/1 6/1",
        (
            frozenset({50, 55}),
            frozenset({22, 23}),
            frozenset({28, 30}),
            frozenset({11, 12}),
            frozenset({0, 6}),
        ),
    ),
    (
        "59 23 31 12 7",
        (frozenset({59}), frozenset({23}), frozenset({31}), frozenset({12}), frozenset({0})),
    ),
    (
        "0 0 1 jan-mar,oct SAT,SUN",
        (
            frozenset({0}),
            frozenset({0}),
            frozenset({1}),
            frozenset({1, 2, 3, 10}),
            frozenset({0, 6}),
        ),
    ),
]


@pytest.mark.parametrize(("source", "expected"), VALUE_SETS)
def test_accepted_expression_names_these_values(
    source: str, expected: tuple[frozenset[int], ...]
) -> None:
    assert _value_sets(parse_cron(source)) == expected


FLAGS = [
    # (input, (fixed_time, day_or_day))
    ("0 9 * * *", (True, False)),
    ("30 2 * * *", (True, False)),
    ("0,30 1-3 * * *", (True, False)),
    ("* 2 * * *", (False, False)),
    ("*/15 2 * * *", (False, False)),
    ("0 * * * *", (False, False)),
    ("0 */2 * * *", (False, False)),
    ("0 0 13 * 5", (True, True)),
    ("0 0 1-31 * 1", (True, True)),
    ("0 0 */2 * 1", (True, False)),
    ("0 0 1 * */2", (True, False)),
    ("0 0 * * 5", (True, False)),
    ("0 0 13 * *", (True, False)),
    ("@weekly", (True, False)),
    ("@hourly", (False, False)),
]


@pytest.mark.parametrize(("source", "expected"), FLAGS)
def test_fixed_time_and_day_or_day_follow_the_leading_star(
    source: str, expected: tuple[bool, bool]
) -> None:
    expr = parse_cron(source)
    assert (expr.fixed_time, expr.day_or_day) == expected


MATCHES = [
    # (input, naive wall minute, matches)
    ("0 9-9 * * *", datetime(2026, 8, 3, 9, 0), True),
    ("0 9-9 * * *", datetime(2026, 8, 3, 10, 0), False),
    ("0 9 * * *", datetime(2026, 8, 3, 9, 1), False),
    # 2026-08-02 is a Sunday; 7 and 0 both name it.
    ("0 0 * * 7", datetime(2026, 8, 2, 0, 0), True),
    ("0 0 * * 0", datetime(2026, 8, 2, 0, 0), True),
    ("0 0 * * SUN", datetime(2026, 8, 3, 0, 0), False),
    # Debian cron: both restricted -> OR. 2026-02-13 is a Friday, 2026-02-20 too.
    ("0 0 13 * 5", datetime(2026, 3, 13, 0, 0), True),  # a Friday the 13th
    ("0 0 13 * 5", datetime(2026, 2, 20, 0, 0), True),  # a Friday
    ("0 0 13 * 5", datetime(2026, 4, 13, 0, 0), True),  # a Monday the 13th
    ("0 0 13 * 5", datetime(2026, 4, 14, 0, 0), False),
    # A day field that starts with '*' makes it AND.
    ("0 0 */2 * 1", datetime(2026, 8, 3, 0, 0), True),  # Monday the 3rd
    ("0 0 */2 * 1", datetime(2026, 8, 10, 0, 0), False),  # Monday the 10th
    ("0 0 */2 * 1", datetime(2026, 8, 5, 0, 0), False),  # Wednesday the 5th
    ("0 0 1 * */2", datetime(2026, 2, 1, 0, 0), True),  # Sunday the 1st
    ("0 0 1 * */2", datetime(2026, 6, 1, 0, 0), False),  # Monday the 1st
    ("0 0 31 2 0", datetime(2026, 2, 22, 0, 0), True),  # a Sunday in February
    ("0 0 29 2 *", datetime(2028, 2, 29, 0, 0), True),
]


@pytest.mark.parametrize(("source", "wall", "expected"), MATCHES)
def test_matches_reads_the_wall_minute(source: str, wall: datetime, expected: bool) -> None:
    assert parse_cron(source).matches(wall) is expected


NEXT_WALL = [
    # (input, after, expected): strictly after, naive wall time.
    ("0 9-9 * * *", datetime(2026, 8, 3, 9, 0), datetime(2026, 8, 4, 9, 0)),
    ("0 9-9 * * *", datetime(2026, 8, 3, 8, 59), datetime(2026, 8, 3, 9, 0)),
    ("0 9-9 * * *", datetime(2026, 8, 3, 9, 0, 30), datetime(2026, 8, 4, 9, 0)),
    ("* * * * *", datetime(2026, 8, 3, 9, 0, 30), datetime(2026, 8, 3, 9, 1)),
    ("5-5 * * * *", datetime(2026, 8, 3, 9, 5), datetime(2026, 8, 3, 10, 5)),
    ("0 0 31 2 0", datetime(2026, 1, 31, 0, 0), datetime(2026, 2, 1, 0, 0)),
    ("0 0 29 2 *", datetime(2026, 1, 1, 0, 0), datetime(2028, 2, 29, 0, 0)),
    ("0 0 13 * 5", datetime(2026, 4, 10, 0, 0), datetime(2026, 4, 13, 0, 0)),
    ("0 0 */2 * 1", datetime(2026, 8, 3, 0, 0), datetime(2026, 8, 17, 0, 0)),
    ("0 0 1 * */2", datetime(2026, 1, 1, 0, 0), datetime(2026, 2, 1, 0, 0)),
    ("0 0 * * 7", datetime(2026, 8, 2, 0, 0), datetime(2026, 8, 9, 0, 0)),
    ("@yearly", datetime(2026, 12, 31, 23, 59), datetime(2027, 1, 1, 0, 0)),
]


@pytest.mark.parametrize(("source", "after", "expected"), NEXT_WALL)
def test_next_wall_is_the_first_named_minute_strictly_after(
    source: str, after: datetime, expected: datetime
) -> None:
    assert next_wall(parse_cron(source), after) == expected


# --- rejections: patterns x bad values -------------------------------------------

FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")


def _in_field(index: int, value: str) -> str:
    """A valid expression with `value` in field `index`."""
    fields = ["0", "0", "1", "1", "*"]
    fields[index] = value
    return " ".join(fields)


# Per field: (bad value, the part the message must quote).
BAD_VALUES: dict[int, list[tuple[str, str]]] = {
    0: [("60", "60"), ("-1", "-1"), ("99", "99"), ("5-1", "5-1"), ("59-0", "59-0")],
    1: [("24", "24"), ("-1", "-1"), ("23-1", "23-1"), ("25", "25")],
    2: [("0", "0"), ("32", "32"), ("31-1", "31-1"), ("0-5", "0")],
    3: [("0", "0"), ("13", "13"), ("12-1", "12-1"), ("DEC-JAN", "DEC-JAN")],
    4: [("8", "8"), ("-1", "-1"), ("6-1", "6-1"), ("SAT-MON", "SAT-MON"), ("7-8", "8")],
}
STEP_TOO_BIG = {0: "61", 1: "25", 2: "32", 3: "13", 4: "9"}
UNKNOWN_NAMES = {0: "MON", 1: "JAN", 2: "FOO", 3: "MONDAY", 4: "JANUARY"}

# Patterns that apply to every field: (pattern, the part the message must quote).
COMMON_PATTERNS = [
    ("*/0", "*/0"),
    ("1-2/0", "1-2/0"),
    ("1/0", "1/0"),
    ("*/{big}", "*/{big}"),
    # A '*' item only leads a list (Debian reads the wildcard flag from the first character).
    ("1,*", "1,*"),
    ("1,*/2", "1,*/2"),
    ("1-2,*/{big}", "1-2,*/{big}"),
    ("1,,2", "1,,2"),
    (",1", ",1"),
    ("1,", "1,"),
    ("1-", "1-"),
    ("1/", "1/"),
    ("1/x", "1/x"),
    ("{name}", "{name}"),
    ("x", "x"),
    ("1-x", "1-x"),
    ("*-1", "*-1"),
    ("1/2/3", "1/2/3"),
    # Non-ASCII look-alikes: Cyrillic capital EM, full-width five, en dash.
    ("\u041c", "\u041c"),
    ("\uff15", "\uff15"),
    ("1\u20132", "1\u20132"),
    # CYRILLIC CAPITAL LETTER O inside OCT, and an Arabic-Indic digit one.
    ("\u041eCT", "\u041eCT"),
    ("\u0661", "\u0661"),
]

REJECTED = [
    pytest.param(_in_field(i, value), FIELD_NAMES[i], quoted, id=f"{FIELD_NAMES[i]}:{value}")
    for i, rows in BAD_VALUES.items()
    for value, quoted in rows
] + [
    pytest.param(
        _in_field(i, pattern.format(big=STEP_TOO_BIG[i], name=UNKNOWN_NAMES[i])),
        FIELD_NAMES[i],
        quoted.format(big=STEP_TOO_BIG[i], name=UNKNOWN_NAMES[i]),
        id=f"{FIELD_NAMES[i]}:{pattern.format(big=STEP_TOO_BIG[i], name=UNKNOWN_NAMES[i])}",
    )
    for i in range(5)
    for pattern, quoted in COMMON_PATTERNS
]


@pytest.mark.parametrize(("source", "field", "quoted"), REJECTED)
def test_bad_value_is_rejected_naming_field_and_value(source: str, field: str, quoted: str) -> None:
    with pytest.raises(CronSyntaxError) as caught:
        parse_cron(source)
    assert caught.value.code == "cron-syntax"
    message = str(caught.value)
    assert f"the {field} field" in message
    assert quoted in message


def test_day_of_month_message_does_not_pass_for_a_month_message() -> None:
    # "month" is inside "day-of-month": the field must be named as a whole.
    with pytest.raises(CronSyntaxError) as caught:
        parse_cron("0 0 * 13 *")
    assert "the month field" in str(caught.value)
    assert "day-of-month" not in str(caught.value)


def test_cron_syntax_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="out of range"):
        parse_cron("60 * * * *")


FIELD_COUNTS = [
    # (input, code)
    ("0 0 * * * *", "cron-six-fields"),
    ("0 0 0 * * MON", "cron-six-fields"),
    ("*/30 * * * * *", "cron-six-fields"),
    ("", "cron-syntax"),
    ("   ", "cron-syntax"),
    ("*", "cron-syntax"),
    ("0 0 * *", "cron-syntax"),
    ("0 0 * * * * *", "cron-syntax"),
    ("0 0 * * * 2026 extra", "cron-syntax"),
]


@pytest.mark.parametrize(("source", "code"), FIELD_COUNTS)
def test_wrong_field_count_is_rejected_with_its_code(source: str, code: str) -> None:
    with pytest.raises(CronSyntaxError) as caught:
        parse_cron(source)
    assert caught.value.code == code


def test_six_fields_message_explains_the_seconds_field() -> None:
    with pytest.raises(CronSyntaxError, match="seconds") as caught:
        parse_cron("0 0 9 * * *")
    assert "once a minute" in str(caught.value)


@pytest.mark.parametrize(
    ("source", "count"), [("0 0 * *", "4"), ("0 0 * * * * *", "7"), ("*", "1")]
)
def test_wrong_field_count_message_says_how_many(source: str, count: str) -> None:
    with pytest.raises(CronSyntaxError, match=f"has {count} field"):
        parse_cron(source)


UNSUPPORTED = [
    # (input, the field named in the message or None for a macro, the part quoted)
    ("0 0 L * *", "day-of-month", "L"),
    ("0 0 l * *", "day-of-month", "l"),
    ("0 0 15W * *", "day-of-month", "15W"),
    ("0 0 W * *", "day-of-month", "W"),
    ("0 0 LW * *", "day-of-month", "LW"),
    ("0 0 L-3 * *", "day-of-month", "L"),
    ("0 0 * * 5L", "day-of-week", "5L"),
    ("0 0 * * L", "day-of-week", "L"),
    ("0 0 * * 1#2", "day-of-week", "1#2"),
    ("0 0 * * MON#1", "day-of-week", "MON#1"),
    ("0 0 ? * MON", "day-of-month", "?"),
    ("0 0 * * ?", "day-of-week", "?"),
    ("H * * * *", "minute", "H"),
    ("H/15 * * * *", "minute", "H/15"),
    ("0 H(0-3) * * *", "hour", "H(0-3)"),
    ("R * * * *", "minute", "R"),
    ("0 R * * *", "hour", "R"),
    ("@reboot", None, "@reboot"),
    ("@REBOOT", None, "@reboot"),
    ("@fortnightly", None, "@fortnightly"),
    ("@every 5m", None, "@every 5m"),
    ("@", None, "@"),
    ("@daily 0", None, "@daily 0"),
]


@pytest.mark.parametrize(("source", "field", "quoted"), UNSUPPORTED)
def test_non_standard_syntax_is_unsupported(source: str, field: str | None, quoted: str) -> None:
    with pytest.raises(CronSyntaxError) as caught:
        parse_cron(source)
    assert caught.value.code == "cron-unsupported"
    message = str(caught.value)
    assert "not supported" in message or "unknown macro" in message
    assert quoted.lower() in message.lower()
    if field is not None:
        assert f"the {field} field" in message


NEVER_FIRES = [
    "0 0 30 2 *",
    "0 0 31 2 *",
    "0 0 30,31 2 *",
    "0 0 31 4 *",
    "0 0 31 4,6,9,11 *",
    "0 0 31 APR,JUN,SEP,NOV *",
    "0 0 31 2 */2",  # AND with a '*'-led day-of-week: still never the 31st of February
    "0 0 30-31 2 *",
]


@pytest.mark.parametrize("source", NEVER_FIRES)
def test_expression_that_never_fires_is_rejected(source: str) -> None:
    with pytest.raises(CronSyntaxError, match="never fire") as caught:
        parse_cron(source)
    assert caught.value.code == "cron-never-fires"


RARE_BUT_REAL = [
    # (input, after, first occurrence)
    ("0 0 31 2 0", datetime(2026, 2, 2), datetime(2026, 2, 8)),  # OR: Sundays in February
    ("0 0 29 2 *", datetime(2026, 1, 1), datetime(2028, 2, 29)),  # leap years
    ("0 0 29 2 1", datetime(2026, 3, 1), datetime(2027, 2, 1)),  # OR: Mondays in February
    ("0 0 29 2 */7", datetime(2000, 3, 1), datetime(2004, 2, 29)),  # AND: leap day on Sunday
    ("0 0 31 4 1", datetime(2026, 1, 1), datetime(2026, 4, 6)),  # OR: Mondays in April
]


@pytest.mark.parametrize(("source", "after", "expected"), RARE_BUT_REAL)
def test_rare_expression_is_accepted_and_fires(
    source: str, after: datetime, expected: datetime
) -> None:
    assert next_wall(parse_cron(source), after) == expected
