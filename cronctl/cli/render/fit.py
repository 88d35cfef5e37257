"""How a table gives way on a narrow terminal, never cutting a task name or a time
(docs/commands.md, "Tables that fit"). Each step is taken while it is too wide: ``TIMES``
writes every time short, ``"~NAME"`` lets free-text column NAME shrink to
``FREE_TEXT_FLOOR``, ``"NAME"`` drops column NAME."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from cronctl.core.zones import Zone

#: The step that writes every time short.
TIMES = "<times>"
#: How far a "~NAME" step lets a free-text column shrink.
FREE_TEXT_FLOOR = 24
#: The last resort's floor for free text.
_LAST_FLOOR = 8
_GAP = 2  # spaces between columns


@dataclass(frozen=True, slots=True)
class Layout:
    """The cells to print, the columns kept, their widths, and whether times are short."""

    rows: Sequence[Sequence[str]]
    keep: list[int]
    widths: list[int]
    fits: bool
    short_times: bool = False


def fit(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    steps: Sequence[str],
    shrink: Sequence[str],
    short: Callable[[], Sequence[Sequence[str]]] | None = None,
    floors: Mapping[str, int] | None = None,
) -> Layout:
    """The layout on a terminal `width` columns wide. `short` gives the rows with short times
    (asked only when needed: at 10,000 rows it costs); `floors`: a free-text column's least
    width (one holding a time)."""
    names = list(headers)
    full = _natural(headers, rows)
    kept = list(range(len(headers)))
    # How far each free-text column may shrink at this point: not at all, to begin with.
    limit = {i: full[i] for i, name in enumerate(names) if name in shrink}

    def floor(index: int, wanted: int) -> int:
        protected = (floors or {}).get(names[index], 0)
        return min(full[index], max(len(names[index]), wanted, protected))

    widths = _widths(full, kept, limit, width)
    if _total(widths, kept) > width:
        # A free-text column with nothing in it (NOTE, most of the time) goes first.
        kept = [i for i in kept if i not in limit or any(row[i] for row in rows)]
        widths = _widths(full, kept, limit, width)
    short_times = False
    for step in steps:
        if _total(widths, kept) <= width:
            break
        if step == TIMES and short is not None:
            rows, short_times = short(), True
            full = _natural(headers, rows)
            limit = {i: min(limit[i], full[i]) for i in limit}
        elif step.startswith("~"):
            index = names.index(step[1:])
            limit[index] = floor(index, FREE_TEXT_FLOOR)
        elif step in names:
            kept = [i for i in kept if names[i] != step]
        widths = _widths(full, kept, limit, width)
    if _total(widths, kept) > width:
        for index in limit:
            limit[index] = min(limit[index], floor(index, _LAST_FLOOR))
        widths = _widths(full, kept, limit, width)
    return Layout(rows, kept, widths, _total(widths, kept) <= width, short_times)


def _natural(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    return [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]


def _total(widths: Sequence[int], kept: Sequence[int]) -> int:
    return sum(widths[i] for i in kept) + _GAP * (len(kept) - 1)


def _widths(full: list[int], kept: list[int], limit: dict[int, int], width: int) -> list[int]:
    """Natural widths, the kept free-text columns shrunk (left to right) as needed and allowed."""
    widths = list(full)
    for index in [i for i in kept if i in limit]:
        excess = _total(widths, kept) - width
        if excess <= 0:
            break
        widths[index] = max(min(limit[index], full[index]), widths[index] - excess)
    return widths


def short_time(when: datetime, zone: Zone, now: datetime) -> str:
    """`09:00Z`, `12-24 09:00+01`, `2027-01-04 09:00-05`: `when` in `zone`, short but whole
    (the date goes on `now`'s day, the year in its year: a weekday would be ambiguous)."""
    wall = when.astimezone(zone.tz)
    today = now.astimezone(zone.tz).date()
    clock = f"{wall:%H:%M:%S}" if wall.second else f"{wall:%H:%M}"
    if wall.date() == today:
        text = clock
    elif wall.year == today.year:
        text = f"{wall:%m-%d} {clock}"
    else:
        text = f"{wall:%Y-%m-%d} {clock}"
    return text + _offset(wall.utcoffset() or timedelta(0))


def _offset(offset: timedelta) -> str:
    if not offset:
        return "Z"
    minutes = round(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    hours, rest = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}" + (f":{rest:02d}" if rest else "")
