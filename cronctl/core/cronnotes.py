"""Explanations of the Vixie corners an accepted expression relies on (for `check`).

Lists led by '*' (`*/100,1-7`: Debian cron ANDs such a day field with the other one) and
day-of-week steps from a start value, which count up to 7 (Sunday again): valid cron,
kept with Debian's reading, and worth a sentence each. So are minute and hour steps that do
not divide the field (`*/7` minutes: :56 then :00), which cron restarts every hour or day.
"""

from __future__ import annotations

from cronctl.core.cronexpr import _DAYS, _FIELDS, _MONTHS, CronExpr, _compress, _Field

_DAY_VALUES = {d: i for i, d in enumerate(_DAYS)}


def corner_notes(expr: CronExpr) -> list[tuple[str, str]]:
    """(problem code, sentence) for each corner `expr` uses; empty for plain expressions."""
    if len(expr.written) != 5:
        return []
    sets = [expr.minutes, expr.hours, expr.days, expr.months, expr.weekdays]
    return _corner_notes(list(expr.written), sets)


def _corner_notes(fields: list[str], sets: list[frozenset[int]]) -> list[tuple[str, str]]:
    notes: list[tuple[str, str]] = []
    for index, (spec, field) in enumerate(zip(fields, _FIELDS, strict=True)):
        if spec.startswith("*") and "," in spec:
            notes.append(("cron-star-list", _star_list_note(index, fields, sets)))
        if index in (0, 1):
            note = _uneven_step_note(spec, index)
            if note:
                notes.append(("cron-uneven-step", note))
        if field.name == "day-of-week":
            for item in spec.split(","):
                note = _weekday_step_note(item)
                if note:
                    notes.append(("cron-weekday-step", note))
    return notes


def _star_list_note(index: int, fields: list[str], sets: list[frozenset[int]]) -> str:
    field = _FIELDS[index]
    named = _describe(sets[index], field)
    head = f"{field.name} {fields[index]!r} is a list led by '*': it means {named}"
    if index in (0, 1):
        return (
            f"{head}, and the leading '*' makes the task a wildcard one for daylight "
            "saving (no runs in a spring-forward gap, runs in both passes of a fall-back hour)"
        )
    if index == 3:
        return head
    other = 4 if index == 2 else 2
    if fields[other].startswith("*"):
        return f"{head} (both day fields start with '*', so a day must match both)"
    other_named = _describe(sets[other], _FIELDS[other])
    return (
        f"{head}; because it starts with '*', cron ANDs it with {_FIELDS[other].name} "
        f"{fields[other]!r}: the task runs only on days that are both ({named} and "
        f"{other_named}){_nth_weekday(sets[2], sets[4])}"
    )


_NTH = {1: "first", 8: "second", 15: "third", 22: "fourth"}
_DAY_WORDS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


def _nth_weekday(days: frozenset[int], weekdays: frozenset[int]) -> str:
    """`*/100,1-7` with `MON` -> ': the first Monday of the month'."""
    first = min(days)
    if len(weekdays) != 1 or first not in _NTH or days != frozenset(range(first, first + 7)):
        return ""
    return f": the {_NTH[first]} {_DAY_WORDS[min(weekdays)]} of the month"


def _uneven_step_note(spec: str, index: int) -> str | None:
    """`*/7` minutes: cron restarts the step each hour, so the last gap is short (or long)."""
    base, slash, step_text = spec.partition("/")
    if not slash or "," in spec or "-" in base or not step_text.isdigit():
        return None
    if base != "*" and not base.isdigit():
        return None
    size = 60 if index == 0 else 24
    start, step = (0 if base == "*" else int(base)), int(step_text)
    values = range(start, size, step) if step else range(0)
    if len(values) < 2:
        return None
    last = values[-1]
    gap = size - last + start
    if gap == step:
        return None
    divisors = ", ".join(str(d) for d in range(1, size) if size % d == 0)
    if index == 0:
        where, unit, period = f":{last:02d} then :{start:02d}", "minute", "hour"
    else:
        where, unit, period = f"hour {last} then hour {start}", "hour", "day"
    article = "an" if gap in (8, 11, 18) else "a"
    return (
        f"{spec} in {unit}s runs at {where} \u2014 {article} {gap}-{unit} gap each {period}, not "
        f"{step}: cron starts the step again every {period} and {step} does not divide "
        f"{size}; use a step that divides {size} ({divisors}) for even spacing, or list the "
        f"{unit}s to show the uneven gap is meant"
    )


def _weekday_step_note(item: str) -> str | None:
    base, slash, step_text = item.partition("/")
    if not slash or base == "*" or "-" in base or not step_text.isdigit():
        return None
    start = _DAY_VALUES.get(base.upper(), int(base) if base.isdigit() else 0)
    days = range(start, 8, int(step_text))
    if start in (0, 7) or 7 not in days:
        return None
    names = [_DAYS[d % 7].title() for d in days]
    listed = ", ".join(names[:-1]) + f" and {names[-1]}"
    meant = ",".join(_DAYS[d] for d in days if d != 7)
    return (
        f"day-of-week {item!r} counts up to 7, which is Sunday again: it means {listed} "
        f"(and Debian's crontab rejects the form); write the days out ({meant} if Sunday "
        "is not meant)"
    )


def _describe(values: frozenset[int], field: _Field) -> str:
    if field.name == "day-of-week":
        return ", ".join(_DAYS[v].title() for v in sorted(values))
    if field.name == "month":
        return ", ".join(_MONTHS[v - 1].title() for v in sorted(values))
    noun = {"minute": "minutes", "hour": "hours", "day-of-month": "days"}[field.name]
    return f"{noun} {_compress(sorted(values))}"
