"""Small value parsers shared by the schema: durations, times of day, day names, paths."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cronctl.errors import DurationError

# Patterns are compiled on first use (re's cache), not at import: many schedules need neither.
_DURATION = r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$"  # with re.ASCII
#: Far beyond any sensible timeout or grace, and small enough that adding it to any instant
#: cronctl works with stays inside datetime's range.
MAX_DURATION = timedelta(days=3650)
# More digits than any amount under MAX_DURATION needs: int() is never asked for a huge number.
_MAX_DIGITS = 9
#: The instants cronctl reasons about: ``--now``, ``--after`` and ``at`` must lie in
#: [EARLIEST, LATEST). The margins keep every window, scan and duration cronctl adds or
#: subtracts inside datetime's range (years 1-9999), so no date arithmetic can overflow.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
_TIME = r"^(\d{1,2}):(\d{2})$"
DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_DAY_NAMES = {n.upper(): i for i, day in enumerate(DAYS) for n in (day, day[:3])}
#: The type each schedule key's value must have, by kind (a bool is not an int).
KINDS: dict[str, Callable[[object], bool]] = {
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "list": lambda v: isinstance(v, list),
    "datetime": lambda v: isinstance(v, datetime),
    "bool_or_str": lambda v: isinstance(v, bool | str),
    "str_list": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "str_table": lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
    "str_or_list": lambda v: isinstance(v, str) or KINDS["str_list"](v),
    "command": lambda v: isinstance(v, str) or (bool(v) and KINDS["str_list"](v)),
}
#: A key's check: its kind, and what the value should be, for the message.
Check = tuple[str, str]


def resolve_path(kind: str, base: Path, text: str) -> Path:
    """A path written in a schedule file, read against the file's directory `base`, `~`
    expanded and links resolved; `metrics_file` only made absolute, so that the writer
    still sees the links in its path and checks them each time it writes."""
    path = base / Path(text).expanduser()
    if kind == "metrics_file":
        return Path(os.path.normpath(path.absolute()))
    return path.resolve()


def parse_duration(text: str) -> timedelta:
    """'1h30m' -> timedelta(hours=1, minutes=30)."""
    match = re.match(_DURATION, text.strip(), re.ASCII) if text.strip() else None
    if match is None or not any(match.groups()):
        raise DurationError(
            f"duration {text!r} is not understood; write a positive amount with units "
            'd, h, m, s in that order, e.g. "90s", "30m", "1h30m", "1d"'
        )
    if any(g and len(g.lstrip("0")) > _MAX_DIGITS for g in match.groups()):
        raise DurationError(_too_long(text))
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    try:
        delta = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    except OverflowError:
        raise DurationError(_too_long(text)) from None
    if delta > MAX_DURATION:
        raise DurationError(_too_long(text))
    if delta <= timedelta(0):
        raise DurationError(f"duration {text!r} must be longer than zero")
    return delta


def _too_long(text: str) -> str:
    shown = text if len(text) <= 40 else text[:37] + "..."
    return f"duration {shown!r} is too long; the most cronctl accepts is 3650d (ten years)"


def instant_problem(value: datetime) -> str | None:
    """Why an aware instant is outside what cronctl computes with."""
    try:
        if EARLIEST <= value.astimezone(UTC) < LATEST:
            return None
    except OverflowError:  # year 1 with a positive offset, 9999 with a negative one
        pass
    return "is outside the years 1970-8999, the range cronctl computes dates in"


def check_text(key: str, value: str) -> str | None:
    """A NUL byte cannot pass through exec or open: the file would check fine and every run
    fail."""
    if "\x00" in value:
        return f"{key!r} contains a NUL character (\\u0000), which no path or command may hold"
    return None


_CONTROL = "[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]"
#: Keys whose value is one line of text: a control character there is never meant, and
#: would reach a terminal, a log line or an exported unit as a new line or an escape.
ONE_LINE_KEYS = frozenset(
    ("description", "shell", "workdir", "timezone", "state_dir", "lock_dir", "metrics_file")
)


def control_char(value: str) -> str | None:
    """The first control character in `value` (C0, DEL, C1, or a Unicode line break). A tab is
    not one: it adds no line and moves no cursor (`import` keeps crontab lines' tabs)."""
    found = re.search(_CONTROL, value)
    return found.group() if found else None


def escape_controls(text: str) -> str:
    """`text` as one line, each control character written as its ``\\uXXXX`` escape."""
    return "".join(f"\\u{ord(c):04x}" if control_char(c) else c for c in text)


def check_line(key: str, value: str) -> str | None:
    """What is wrong with a one-line value (`ONE_LINE_KEYS`)."""
    char = control_char(value)
    if char is None:
        return None
    return (
        f"{key!r} contains a control character (\\u{ord(char):04x}); it must be one line of "
        "printable text: remove the newline or escape"
    )


def check_env(env: dict[str, str]) -> str | None:
    """What is wrong with an ``env`` table: names must be usable environment names."""
    for name, value in env.items():
        if not name or "=" in name or control_char(name):
            return (
                f"env name {name!r} cannot be an environment variable: it must be non-empty "
                "and hold neither '=' nor a control character"
            )
        if "\x00" in value:
            return f"env value of {name!r} contains a NUL character (\\u0000); remove it"
    return None


def parse_time_of_day(text: str) -> tuple[int, int]:
    """'03:30' -> (3, 30); ValueError with what to write for '24:00' or '3pm'."""
    match = re.match(_TIME, text)
    if match is None:
        raise ValueError(f'time {text!r} is not HH:MM on a 24-hour clock (e.g. "03:30")')
    hour, minute = int(match.group(1)), int(match.group(2))
    if hour > 23 or minute > 59:
        raise ValueError(f"time {text!r} is out of range; use 00:00 to 23:59")
    return hour, minute


def parse_day_of_week(value: object) -> int:
    """0-7 (0 and 7 are Sunday) or a day name such as "MON" or "Monday" -> 0-6."""
    if isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value <= 7:
            return value % 7
        raise ValueError(f"day of week {value} is out of range; use 0-7 (0 and 7 are Sunday)")
    if isinstance(value, str) and value.upper() in _DAY_NAMES:
        return _DAY_NAMES[value.upper()]
    raise ValueError(f'day of week {value!r} is not understood; use 0-7 or a name like "MON"')


#: Names other tools give a key (Kubernetes' and Ofelia's `schedule`, Compose's `depends_on`).
_OTHER_NAMES = {"schedule": "cron", "cmd": "command", "tz": "timezone", "depends_on": "after"}


def suggestion(key: str, known: list[str] | tuple[str, ...]) -> str | None:
    """The known key (or code) meant by a misspelt or foreign `key`, if one is close."""
    import difflib  # only for a misspelt key

    if _OTHER_NAMES.get(key.lower()) in known:
        return _OTHER_NAMES[key.lower()]
    return next(iter(difflib.get_close_matches(key, list(known), n=1, cutoff=0.7)), None)


def did_you_mean(key: str, known: list[str] | tuple[str, ...]) -> str:
    """' (did you mean "x"?)' when a known key (or code) is close, else ''."""
    close = suggestion(key, known)
    return f' (did you mean "{close}"?)' if close else ""
