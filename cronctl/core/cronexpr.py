"""The cron language cronctl accepts: five fields validated, normalized (into text croniter
reads the same way: never ``N-N``, no reversed range, no ``R``) and matched."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as _record_field
from datetime import date, datetime
from functools import lru_cache
from itertools import groupby, product

from cronctl.core.values import DAYS
from cronctl.errors import CronSyntaxError

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = tuple(day[:3].upper() for day in DAYS)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int]


_FIELDS = (
    _Field("minute", 0, 59, {}),
    _Field("hour", 0, 23, {}),
    _Field("day-of-month", 1, 31, {}),
    _Field("month", 1, 12, {m: i + 1 for i, m in enumerate(_MONTHS)}),
    # Vixie cron: both 0 and 7 are Sunday.
    _Field("day-of-week", 0, 7, {d: i for i, d in enumerate(_DAYS)}),
)

MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}

_UNSUPPORTED_WORDS = {
    "L": "'L' (last day)",
    "W": "'W' (nearest weekday)",
    "LW": "'LW' (last weekday)",
    "H": "'H' (hashed value)",
    "R": "'R' (random value)",
}


@dataclass(frozen=True, slots=True)
class CronExpr:
    """A validated five-field expression: its value sets and its normalized text."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    day_star: bool
    weekday_star: bool
    fixed_time: bool
    # The fields as written (after macro expansion): `check` explains Vixie corners from them.
    written: tuple[str, ...] = _record_field(default=(), compare=False)

    def __hash__(self) -> int:
        # Equal expressions share their normalized text, and a str keeps its hash once
        # computed: a large schedule hashes every task's expression several times.
        return hash(self.text)

    @property
    def day_or_day(self) -> bool:
        """True when both day fields are restricted, so a day matches if either does."""
        return not self.day_star and not self.weekday_star

    def matches(self, wall: datetime) -> bool:
        """Whether the naive wall time `wall` (its minute) is named by this expression."""
        if (
            wall.minute not in self.minutes
            or wall.hour not in self.hours
            or wall.month not in self.months
        ):
            return False
        return self.matches_day(wall.date())

    def matches_day(self, day: date) -> bool:
        dom = day.day in self.days
        dow = (day.weekday() + 1) % 7 in self.weekdays
        # In Debian cron, if either the day-of-month or the day-of-week field starts with a
        # star, a day must match both fields; when neither does, matching one is enough.
        if self.day_star or self.weekday_star:
            return dom and dow
        return dom or dow


@lru_cache(maxsize=1024)
def parse_cron(source: str) -> CronExpr:
    """Validate `source` and return it normalized; raise CronSyntaxError naming field and value."""
    text = source.strip()
    if text.lower() == "@reboot":
        raise CronSyntaxError(
            "'@reboot' is not supported as a schedule: for a task that runs when cronctl work "
            "starts, use on_start = true instead of a schedule key",
            code="cron-unsupported",
        )
    if text.startswith("@"):
        if not text.isascii() or text.lower() not in MACROS:
            message = f"unknown macro {text!r}; known: {' '.join(MACROS)}"
            raise CronSyntaxError(message, code="cron-unsupported")
        text = MACROS[text.lower()]
    # Only ASCII blanks separate fields: a no-break space must not pass for one.
    fields = [f for f in re.split(r"[ \t]+", text) if f]
    stray = [n for n, f in enumerate(fields, start=1) if f.upper() == "L"]
    if len(fields) == 6 and stray:
        # `0 0 * * 1-5 L`: a lone 'L' made the sixth field, not a seconds field.
        raise CronSyntaxError(
            f"{source!r} has a stray 'L' as field {stray[0]} of six: 'L' (last day) is not "
            "supported by cronctl; remove it and use the five fields minute hour "
            "day-of-month month day-of-week",
            code="cron-unsupported",
        )
    if len(fields) == 6:
        raise CronSyntaxError(
            f"{source!r} has six fields; cronctl is woken once a minute, so a seconds "
            "field would promise what it cannot do: use the five fields "
            "minute hour day-of-month month day-of-week",
            code="cron-six-fields",
        )
    if len(fields) != 5:
        raise CronSyntaxError(
            f"{source!r} has {len(fields)} field{'s' if len(fields) != 1 else ''}; "
            "expected five: minute hour day-of-month month day-of-week"
        )
    sets: list[frozenset[int]] = []
    texts: list[str] = []
    for spec, field in zip(fields, _FIELDS, strict=True):
        try:
            values, normalized = _parse_field(spec, field)
        except CronSyntaxError as exc:
            exc.field = exc.field or field.name
            raise
        sets.append(values)
        texts.append(normalized)
    expr = CronExpr(
        text=" ".join(texts),
        minutes=sets[0],
        hours=sets[1],
        days=sets[2],
        months=sets[3],
        weekdays=sets[4],
        day_star=fields[2].startswith("*"),
        weekday_star=fields[4].startswith("*"),
        fixed_time=not fields[0].startswith("*") and not fields[1].startswith("*"),
        written=tuple(fields),
    )
    if not _fires_ever(expr):
        raise CronSyntaxError(
            f"{source!r} can never fire: no month it names has that day "
            "(check the day-of-month and month fields)",
            code="cron-never-fires",
        )
    return expr


def _parse_field(spec: str, field: _Field) -> tuple[frozenset[int], str]:
    if not spec.isascii():
        import unicodedata  # only to name a bad character: a valid schedule never loads it

        ch = next(ch for ch in spec if not ch.isascii())
        name = unicodedata.name(ch, "unknown character")
        raise CronSyntaxError(
            f"non-ASCII character {ch!r} (U+{ord(ch):04X} {name}) in the {field.name} "
            f"field ({spec!r}); retype it with plain ASCII letters, digits and '-'"
        )
    for mark in "?#":
        if mark in spec:
            what = "'?' (no specific value)" if mark == "?" else "'#' (nth weekday)"
            _unsupported(what, spec, field)
    items = spec.split(",")
    star_list = len(items) > 1 and items[0].startswith("*")
    # Debian cron reads a field's AND/OR (and wildcard) flag from its first character
    # only: `1-7,*/100` names the same days as `*/100,1-7` but ORs them with the day of
    # week. Only the first item of a list may be a '*' item, where it means what it says.
    for item in items[1:]:
        if item.startswith("*"):
            raise CronSyntaxError(
                f"'*' later in a list in the {field.name} field ({spec!r}); cron reads a "
                "'*' item as a wildcard marker only at the start of a field: move it first "
                f"(e.g. {','.join([item, *(i for i in items if i != item)])!r}) or drop it"
            )
    values: set[int] = set()
    for position, item in enumerate(items):
        values |= _parse_item(item, spec, field, any_step=star_list and position == 0)
    if field.name == "day-of-week" and 7 in values:
        values = (values - {7}) | {0}
    frozen = frozenset(values)
    span = field.high - field.low + 1
    if star_list:
        # `*/100,1-7` -> `*/31,1-7`: a leading '*' item croniter reads as the first value only
        # (a list led by '*' always holds it); every value of the field -> '*'.
        every = len(frozen) == span - (field.name == "day-of-week")  # 7 is 0 again
        return frozen, "*" if every else f"*/{span}," + _compress(sorted(frozen))
    if spec.startswith("*"):
        # Kept as written: croniter (implement_cron_bug) and Debian cron read the
        # day fields' AND/OR rule from a leading '*'.
        return frozen, spec
    return frozen, _compress(sorted(frozen))


def _parse_item(item: str, spec: str, field: _Field, any_step: bool = False) -> set[int]:
    if item == "":
        raise CronSyntaxError(f"empty value in the {field.name} field ({spec!r})")
    if item.startswith("-"):
        raise CronSyntaxError(
            f"negative value {item!r} in the {field.name} field ({spec!r}); "
            f"allowed: {field.low}-{field.high}"
        )
    base, slash, step_text = item.partition("/")
    step, span = 1, field.high - field.low + 1
    if slash and not _is_number(step_text):
        message = f"step {step_text!r} in the {field.name} field ({spec!r}) is not a number"
        raise CronSyntaxError(message)
    if slash:
        step = _bounded_int(step_text)
        # Vixie cron: a '*/S' item leading a list may step past the field (`*/100,1-7`:
        # only the first value), the classic way to mark a day field '*'.
        any_size = any_step and base == "*" and step > 0 and len(step_text) <= 4
        if not any_size and (step == 0 or step > span):
            raise CronSyntaxError(
                f"step {_shown(step_text)} in the {field.name} field ({spec!r}) must be "
                f"between 1 and {span}"
            )
    if base == "*":
        low, high = field.low, field.high
    elif "-" in base:
        first, _, last = base.partition("-")
        low = _parse_value(first, spec, field)
        high = _parse_value(last, spec, field)
        if low > high:
            hint = " (write SAT,SUN or 6-7)" if field.name == "day-of-week" else ""
            raise CronSyntaxError(
                f"reversed range {base!r} in the {field.name} field ({spec!r}); "
                f"write the smaller value first{hint}"
            )
    else:
        low = _parse_value(base, spec, field)
        # Vixie cron: N/S means N-max/S.
        high = field.high if slash else low
    return set(range(low, high + 1, step))


def _is_number(text: str) -> bool:
    # ASCII only: str.isdigit() also accepts "²" and other scripts' digits, which int() refuses.
    return text.isascii() and text.isdigit()


def _bounded_int(text: str) -> int:
    """The value of ASCII digits, capped (int() refuses more than 4,300 digits): every
    field's range ends below 100, so a capped value is out of range all the same."""
    digits = text.lstrip("0")
    return int(digits or "0") if len(digits) <= 4 else 10_000


def _shown(text: str) -> str:
    digits = text.lstrip("0") or "0"
    return digits if len(digits) <= 12 else f"{digits[:9]}... ({len(digits)} digits)"


def _parse_value(text: str, spec: str, field: _Field) -> int:
    if _is_number(text):
        value = _bounded_int(text)
        if not field.low <= value <= field.high:
            raise CronSyntaxError(
                f"{_shown(text)} is out of range in the {field.name} field ({spec!r}); "
                f"allowed: {field.low}-{field.high}"
            )
        return value
    word = text.upper()
    if word in field.names:
        return field.names[word]
    if word in _UNSUPPORTED_WORDS or (word[:-1].isdigit() and word[-1:] in ("L", "W")):
        _unsupported(_UNSUPPORTED_WORDS.get(word, f"{text!r}"), spec, field)
    if word.startswith("H("):
        _unsupported(_UNSUPPORTED_WORDS["H"], spec, field)
    if field.names:
        allowed = ", ".join(field.names)
        raise CronSyntaxError(
            f"unknown value {text!r} in the {field.name} field ({spec!r}); "
            f"use {field.low}-{field.high} or {allowed}"
        )
    raise CronSyntaxError(
        f"{text!r} is not a number in the {field.name} field ({spec!r}); "
        f"allowed: {field.low}-{field.high}"
    )


def _unsupported(what: str, spec: str, field: _Field) -> None:
    raise CronSyntaxError(
        f"{what} in the {field.name} field ({spec!r}) is not supported by cronctl; "
        "use plain values, ranges, lists and steps",
        code="cron-unsupported",
    )


def _compress(values: list[int]) -> str:
    """1,2,3,5 -> '1-3,5'; never 'N-N' (croniter would read that as the whole field)."""
    return ",".join(ranges(values, str, "-"))


def ranges(values: list[int], word: Callable[[int], str], sep: str, least: int = 3) -> list[str]:
    """Sorted values in words, each run of at least `least` as FIRST{sep}LAST."""
    parts: list[str] = []
    for first, last in spans(values):
        if last - first + 1 >= least:
            parts.append(f"{word(first)}{sep}{word(last)}")
        else:
            parts += map(word, range(first, last + 1))
    return parts


def spans(values: list[int]) -> list[tuple[int, int]]:
    """Sorted values as spans of consecutive numbers: [1, 2, 3, 5] -> (1, 3), (5, 5)."""
    # A run of consecutive values keeps value - position constant.
    runs = (list(run) for _, run in groupby(enumerate(values), lambda pair: pair[1] - pair[0]))
    return [(run[0][1], run[-1][1]) for run in runs]


def _fires_ever(expr: CronExpr) -> bool:
    """Whether some day has both day fields and the month field named."""
    if expr.day_or_day:
        return True  # a restricted day-of-week matches some day in every month
    # 2000-2027 covers leap years (2000 is one) and every weekday a date can fall on.
    for year, month, day in product(range(2000, 2028), expr.months, expr.days):
        try:
            if expr.matches_day(date(year, month, day)):
                return True
        except ValueError:  # no such day in that month
            continue
    return False
