"""Rows read from the store are untrusted input (docs/guarantees.md#what-the-store-holds):
any fleet member, an older cronctl or a person with ``psql`` can write whatever a column
allows. A row that fails a check here is skipped, named once and counted; it never stops a
run, a ``work`` tick, another project or a view. Text is kept as written; views show it as
task output (core/visible.py).
"""

from __future__ import annotations

import math
import re
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from cronctl.coord.port import ChainEnd, Orphan, PauseInfo
from cronctl.core.runs import FINISHED
from cronctl.core.visible import visible

T = TypeVar("T")
U = TypeVar("U")
#: The longest name (task, host, outcome...) and free text a row may hold: far beyond
#: what cronctl writes.
NAME_MAX = 1024
TEXT_MAX = 64 * 1024
#: The condition (SQL) of an instant within years 1 to 9999, which Python can hold.
IN_RANGE = "BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00'"
#: A run id is a part of the dashboard's addresses, so never a ``/`` or a ``..``.
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:+-]{0,127}")


@dataclass(frozen=True, slots=True)
class Unreadable:
    """An instant the store holds but Python cannot: its text as the store sent it."""

    text: str


class BadRow(ValueError):
    """A value of a row that no reader may use: the column and what it holds."""

    def __init__(self, column: str, value: object) -> None:
        shown = value.text if isinstance(value, Unreadable) else value
        if isinstance(shown, str) and len(shown) > 40:
            shown = f"{len(shown)} characters"
        super().__init__(f"{column} = {shown!r}")


def register(conn: Any) -> None:
    """``timestamptz`` in UTC, an out-of-range one as :class:`Unreadable`: the driver's caster
    raises while fetching, which lost every row of the answer with the bad one."""
    import psycopg2.extensions as ext

    default = ext.PYDATETIMETZ

    def cast(value: str | None, cur: Any) -> datetime | Unreadable | None:
        if value is None:
            return None
        try:
            # The driver reads infinity as datetime.max: a time no reader can compute with.
            if value.endswith("infinity"):
                raise ValueError(value)
            moment: datetime = default(value, cur).astimezone(UTC)
        except (ValueError, OverflowError):
            return Unreadable(value)
        return moment

    ext.register_type(ext.new_type(default.values, "CRONCTL_TIMESTAMPTZ", cast), conn)


def instant(value: object, column: str) -> datetime:
    if not isinstance(value, datetime):
        raise BadRow(column, value)
    return value


def maybe_instant(value: object, column: str) -> datetime | None:
    return None if value is None else instant(value, column)


def iso_instant(value: object, column: str) -> datetime | None:
    """A time the store sent as JSON text, or None."""
    if value is None:
        return None
    try:
        return datetime.fromisoformat(str(value)).astimezone(UTC)
    except (ValueError, OverflowError):
        raise BadRow(column, value) from None


def number(value: object, column: str) -> float | None:
    if value is None:
        return None
    if not isinstance(value, int | float) or not math.isfinite(value):
        raise BadRow(column, value)
    return float(value)


def seconds(value: object, column: str) -> float | None:
    """0 to about 30 years, or None."""
    found = number(value, column)
    if found is not None and not 0 <= found <= 10**9:
        raise BadRow(column, value)
    return found


def name(value: object, column: str) -> str:
    return text(value, column, NAME_MAX)


def text(value: object, column: str, limit: int = TEXT_MAX) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise BadRow(column, value)
    return value


def maybe_text(value: object, column: str, limit: int = TEXT_MAX) -> str | None:
    return None if value is None else text(value, column, limit)


def run_id(value: object, column: str = "id") -> str:
    if not isinstance(value, str) or not _RUN_ID.fullmatch(value) or ".." in value:
        raise BadRow(column, value)
    return value


def pid(value: object, column: str) -> int | None:
    """Positive, or None: a reader may signal or look up what it names."""
    if value is None:
        return None
    if not isinstance(value, int) or not 0 < value < 2**31:
        raise BadRow(column, value)
    return value


def check_run(row: Sequence[Any]) -> None:
    """:class:`BadRow` for the first bad value of a record (schema.RUN_COLUMNS, upstream).
    One test of the whole row first: the fleet overview reads thousands, nearly all fine."""
    rid, task, occurrence, host, _pid, outcome, _code, started, ended, *rest = row
    duration_s, message, trigger, _attempt, upstream = rest
    if (
        type(occurrence) is datetime
        and (started is None or type(started) is datetime)
        and (ended is None or type(ended) is datetime)
        and (duration_s is None or math.isfinite(duration_s))
        and len(task) + len(host) + len(outcome) + len(trigger) <= NAME_MAX
        and (message is None or len(message) <= TEXT_MAX)
        and _RUN_ID.fullmatch(rid)
        and ".." not in rid
        and not upstream
    ):
        return
    run_id(rid)
    for up in text(upstream, "upstream").split():
        run_id(up, "upstream")
    for column, value in (("task", task), ("host", host), ("outcome", outcome),
                          ("trigger", trigger)):  # fmt: skip
        name(value, column)
    instant(occurrence, "occurrence")
    maybe_instant(started, "started")
    maybe_instant(ended, "ended")
    number(duration_s, "duration_s")
    maybe_text(message, "message")


def chain_end(row: Sequence[Any], task: str) -> ChainEnd:
    """A ``chain_ends`` row, its stored task name already made the task's (``task``)."""
    _task, occurrence, host, outcome, rid, ended = row
    if outcome not in FINISHED:
        raise BadRow("outcome", outcome)
    return ChainEnd(
        name(task, "task"),
        instant(occurrence, "occurrence"),
        outcome,
        run_id(rid, "run_id"),
        name(host, "host"),
        instant(ended, "ended"),
    )


def pauses(
    found: Iterable[Sequence[Any]], skipped: Skipped, owns: Callable[[str], bool]
) -> dict[str, PauseInfo]:
    """Stored task name -> its pause, of the rows ``owns`` keeps (another project's bad row
    would put a warning in its cron mail each minute). A pause with a value that cannot be
    read still pauses its task (a pause that vanished would run what an operator stopped)."""
    paused = {}
    for task, *values in found:
        if not owns(str(task)):
            continue
        fields: list[Any] = []
        for column, value in zip(("reason", "since", "host", "usr"), values, strict=True):
            try:
                read = iso_instant if column == "since" else maybe_text
                fields.append(read(value, column))
            except BadRow as problem:
                skipped.skip("pauses", str(task), problem, "the pause still holds without it")
                fields.append(None)
        paused[str(task)] = PauseInfo(*fields)
    return paused


def orphans(
    found: Iterable[Sequence[Any]], skipped: Skipped, owns: Callable[[str], bool]
) -> list[Orphan]:
    """One that cannot be read is skipped: taking it over would run what no reader can name."""
    ours = [row for row in found if owns(str(row[0]))]
    return skipped.keep(ours, _orphan, "claims", lambda row: f"{row[0]} {row[1]}")


def _orphan(row: Sequence[Any]) -> Orphan:
    task, when, left = row
    occurrence = iso_instant(when, "occurrence")
    if occurrence is None:
        raise BadRow("occurrence", when)
    if not isinstance(left, int | float) or left <= 0:
        raise BadRow("wait_until", left)
    return name(task, "task"), occurrence, timedelta(seconds=left)


class Skipped:
    """The rows this process could not read: each named once (``warn``), all counted."""

    def __init__(self, warn: Callable[[str], None] | None = None) -> None:
        self._warn = warn or (lambda message: print(message, file=sys.stderr, flush=True))
        self._named: set[tuple[str, str]] = set()
        self._mutex = threading.Lock()

    @property
    def count(self) -> int:
        return len(self._named)

    def skip(self, table: str, key: str, problem: BadRow, kept: str | None = None) -> None:
        """Named the first time only (``work`` reads it every minute); ``kept``: what is used."""
        with self._mutex:
            if (table, key) in self._named:
                return
            self._named.add((table, key))
        shown = key if len(key) <= 80 else key[:80] + "..."
        what = (
            "skipped a row of the coordination store that cannot be read"
            if kept is None
            else "a row of the coordination store holds a value that cannot be read"
        )
        self._warn(
            f"cronctl: warning: {what}: "
            + visible(f"cronctl.{table} {shown!r}: {problem}", one_line=True)
            + (f"; {kept}" if kept else "")
            + "; fix or delete the row (docs/guarantees.md#what-the-store-holds)"
        )

    def keep(
        self, rows: Iterable[T], build: Callable[[T], U], table: str, key: Callable[[T], object]
    ) -> list[U]:
        built = []
        for row in rows:
            try:
                built.append(build(row))
            except BadRow as problem:
                self.skip(table, str(key(row)), problem)
        return built
