"""The friendly schedule keys (daily_at, weekly_on, ...) and the cron each stands for."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from cronctl.core.cronexpr import parse_cron
from cronctl.core.values import instant_problem, parse_day_of_week, parse_time_of_day
from cronctl.errors import CronSyntaxError

# Keys whose cron has a '*' day-of-week that weekdays/weekends/days may restrict.
TIME_OF_DAY_KEYS: tuple[str, ...] = ("every_minute", "every_minutes", "hourly", "hourly_at")
TIME_OF_DAY_KEYS += ("daily", "daily_at", "twice_daily")
_DIVISORS_OF_60 = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)
_FIXED = {
    "every_minute": "* * * * *",
    "hourly": "0 * * * *",
    "daily": "0 0 * * *",
    "weekly": "0 0 * * 0",
    "monthly": "0 0 1 * *",
    "yearly": "0 0 1 1 *",
}


class ScheduleProblem(Exception):
    def __init__(self, message: str, code: str = "bad-value", key: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.key = key


def to_cron(key: str, value: Any, task: dict[str, Any]) -> tuple[str | None, datetime | None]:
    """(cron text, None) for a recurring key, (None, instant) for `at`."""
    day_keys: list[str] = [k for k in ("weekdays", "weekends", "days") if k in task]
    if day_keys and key not in TIME_OF_DAY_KEYS:
        raise ScheduleProblem(
            f"{day_keys[0]!r} only combines with the time-of-day keys "
            f"({', '.join(TIME_OF_DAY_KEYS)}), not with {key!r}; "
            "put the days in the cron expression instead",
            code="schedule-conflict",
            key=day_keys[0],
        )
    if key == "at":
        if value.tzinfo is None:
            raise ScheduleProblem(
                f"at = {value.isoformat()} has no offset; add Z or +HH:MM so it names one instant"
            )
        if value.second or value.microsecond:
            raise ScheduleProblem("'at' must be on a whole minute; cronctl is woken once a minute")
        if problem := instant_problem(value):
            raise ScheduleProblem(f"at = {value.isoformat()} {problem}")
        return None, value.astimezone(UTC)
    cron = _FIXED.get(key) if value is True else None
    if cron is None:
        cron = _valued(key, value)
    return _restrict_days(cron, task, day_keys), None


def _valued(key: str, value: Any) -> str:
    if key in _FIXED:
        raise ScheduleProblem(f"{key!r} can only be true; remove the key instead of false")
    if key == "cron":
        return str(value)
    if key == "every_minutes":
        if value not in _DIVISORS_OF_60:
            raise ScheduleProblem(
                f"every_minutes = {value} does not divide 60, so '*/{value}' would restart "
                f"every hour and not be every {value} minutes; use one of "
                f"{', '.join(map(str, _DIVISORS_OF_60))} or a cron expression"
            )
        return "* * * * *" if value == 1 else f"*/{value} * * * *"
    if key == "hourly_at":
        if not 0 <= value <= 59:
            raise ScheduleProblem(f"hourly_at = {value} is not a minute 0-59")
        return f"{value} * * * *"
    if key == "daily_at":
        try:
            hour, minute = parse_time_of_day(value)
        except ValueError as exc:
            raise ScheduleProblem(str(exc)) from None
        return f"{minute} {hour} * * *"
    if key == "twice_daily":
        hours = [h for h in value if isinstance(h, int) and not isinstance(h, bool)]
        if len(value) != 2 or len(hours) != 2:
            raise ScheduleProblem("twice_daily must be two hours, e.g. [1, 13]", code="bad-type")
        if any(not 0 <= h <= 23 for h in hours) or hours[0] == hours[1]:
            raise ScheduleProblem(f"twice_daily = {value} needs two different hours 0-23")
        return f"0 {','.join(str(h) for h in sorted(hours))} * * *"
    if key == "weekly_on":
        day, (hour, minute) = _pair(value, "weekly_on", '[1, "09:00"]', parse_day_of_week)
        return f"{minute} {hour} * * {day}"
    if key == "monthly_on":
        day, (hour, minute) = _pair(value, "monthly_on", '[15, "00:00"]', _day_of_month)
        return f"{minute} {hour} {day} * *"
    raise ScheduleProblem(f"{key!r} is not a schedule key")  # pragma: no cover - guarded by schema


def _day_of_month(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 31:
        return value
    raise ValueError(f"day of month {value!r} is not 1-31")


def _pair(value: list[Any], key: str, example: str, day: Any) -> tuple[int, tuple[int, int]]:
    if len(value) != 2 or not isinstance(value[1], str):
        raise ScheduleProblem(f'{key} must be [day, "HH:MM"], e.g. {example}', code="bad-type")
    try:
        return day(value[0]), parse_time_of_day(value[1])
    except ValueError as exc:
        raise ScheduleProblem(f"{key}: {exc}") from None


def _restrict_days(cron: str, task: dict[str, Any], day_keys: list[str]) -> str:
    if not day_keys:
        return cron
    if len(day_keys) > 1:
        raise ScheduleProblem(
            f"{day_keys[0]!r} and {day_keys[1]!r} contradict each other; keep one",
            code="schedule-conflict",
            key=day_keys[1],
        )
    key = day_keys[0]
    if key == "days":
        days = str(task["days"])
        try:
            parse_cron(f"* * * * {days}")
        except CronSyntaxError as exc:
            raise ScheduleProblem(str(exc), code=exc.code, key="days") from None
    elif task[key] is not True:
        raise ScheduleProblem(f"{key!r} can only be true; remove the key instead of false", key=key)
    else:
        days = "1-5" if key == "weekdays" else "0,6"
    fields = cron.split()
    fields[4] = days
    return " ".join(fields)


def describe_value(value: Any) -> str:
    """The schedule value as a user wrote it, for display."""
    if isinstance(value, bool | datetime):
        return value.isoformat() if isinstance(value, datetime) else str(value).lower()
    if isinstance(value, list):
        return "[" + ", ".join(describe_value(v) for v in value) + "]"
    return f'"{value}"' if isinstance(value, str) else str(value)
