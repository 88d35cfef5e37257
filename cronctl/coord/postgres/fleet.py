"""Fleet history in the coordination store: every machine's run records
(docs/fleets-postgresql.md)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from cronctl.core.runs import RunRow

_COLUMNS = ("id", "task", "occurrence", "host", "pid", "outcome", "exit_code", "started",
            "ended", "duration_s", "message")  # fmt: skip
_SELECT = ", ".join(_COLUMNS)
_ORDER = "ORDER BY occurrence DESC, started DESC NULLS LAST, id DESC"


def publish(cur: Any, rows: Sequence[RunRow]) -> None:
    """Upsert the records by id in one statement (a record sent twice stays one row)."""
    from psycopg2.extras import execute_values

    values = [tuple(getattr(row, column) for column in _COLUMNS) for row in rows]
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in _COLUMNS[1:])
    execute_values(
        cur,
        f"INSERT INTO cronctl.runs ({_SELECT}) VALUES %s "  # noqa: S608  (constant names)
        f"ON CONFLICT (id) DO UPDATE SET {updates}, published_at = now()",
        values,
        page_size=max(1, len(values)),
    )


def _run(row: tuple[Any, ...]) -> RunRow:
    record = dict(zip(_COLUMNS, row, strict=True))
    for key in ("occurrence", "started", "ended"):
        value = record[key]
        if isinstance(value, datetime):
            record[key] = value.astimezone(UTC)
    return RunRow(**record)


def history(
    cur: Any,
    task: str | None,
    host: str | None,
    limit: int,
    outcomes: Sequence[str] | None = None,
    since: datetime | None = None,
) -> list[RunRow]:
    """Newest first, optionally one task's and one host's, of some outcomes, since a time."""
    cur.execute(
        f"SELECT {_SELECT} FROM cronctl.runs "  # noqa: S608  (constant names)
        "WHERE (%(task)s::text IS NULL OR task = %(task)s) "
        "AND (%(host)s::text IS NULL OR host = %(host)s) "
        "AND (%(outcomes)s::text[] IS NULL OR outcome = ANY(%(outcomes)s::text[])) "
        "AND (%(since)s::timestamptz IS NULL OR occurrence >= %(since)s::timestamptz) "
        f"{_ORDER} LIMIT %(limit)s",
        {"task": task, "host": host, "limit": limit, "since": since,
         "outcomes": None if outcomes is None else list(outcomes)},
    )  # fmt: skip
    return [_run(row) for row in cur.fetchall()]


def latest(cur: Any) -> list[RunRow]:
    """The newest finished record of every (task, host)."""
    cur.execute(
        f"SELECT DISTINCT ON (task, host) {_SELECT} FROM cronctl.runs "  # noqa: S608
        "WHERE outcome NOT IN ('missed', 'pending', 'running') "
        "ORDER BY task, host, occurrence DESC, started DESC NULLS LAST, id DESC"
    )
    return [_run(row) for row in cur.fetchall()]
