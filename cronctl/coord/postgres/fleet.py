"""Fleet history in the coordination store: every machine's run records
(docs/fleets-postgresql.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from cronctl.core.runs import RunRow

_COLUMNS = ("id", "task", "occurrence", "host", "pid", "outcome", "exit_code", "started",
            "ended", "duration_s", "message")  # fmt: skip
_SELECT = ", ".join(_COLUMNS)
_ORDER = "ORDER BY occurrence DESC, started DESC NULLS LAST, id DESC"
T = TypeVar("T")


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


def _run(row: tuple[Any, ...], scope: Scope) -> RunRow:
    record = dict(zip(_COLUMNS, row, strict=True))
    record["task"] = scope.name(record["task"])
    for key in ("occurrence", "started", "ended"):
        value = record[key]
        if isinstance(value, datetime):
            record[key] = value.astimezone(UTC)
    return RunRow(**record)


@dataclass(frozen=True, slots=True)
class Scope:
    """One project's rows in the store: its tasks are stored as ``PROJECT/TASK``; those of no
    project (``project`` None) as ``TASK``, which never holds a ``/`` (a task name cannot)."""

    project: str | None

    @property
    def prefix(self) -> str:
        """What every stored name of the project starts with (empty for no project)."""
        return f"{self.project}/" if self.project else ""

    def key(self, task: str) -> str:
        """The stored name of ``task``."""
        return self.prefix + task

    def name(self, key: str) -> str:
        """The task name of a stored name of this scope."""
        return key[len(self.prefix) :]

    def owns(self, key: str) -> bool:
        """Whether a stored name is one of this scope's."""
        return key.startswith(self.prefix) if self.project else "/" not in key

    def ours(self, by_key: dict[str, T]) -> dict[str, T]:
        """This scope's entries of a mapping by stored name, by task name."""
        return {self.name(k): v for k, v in by_key.items() if self.owns(k)}

    def stored(self, row: RunRow) -> RunRow:
        """A record as the store keeps it."""
        return replace(row, task=self.key(row.task)) if self.project else row

    def sql(self) -> tuple[str, dict[str, str]]:
        """The condition (and its parameter) that keeps a query to this scope's rows; not
        LIKE: ``_`` in a project name would be a wildcard."""
        if self.project:
            return "left(task, length(%(prefix)s)) = %(prefix)s", {"prefix": self.prefix}
        return "strpos(task, '/') = 0", {}


def history(
    cur: Any,
    scope: Scope,
    task: str | None,
    host: str | None,
    limit: int,
    outcomes: Sequence[str] | None = None,
    since: datetime | None = None,
) -> list[RunRow]:
    """Newest first, optionally one task's and one host's, of some outcomes, since a time."""
    mine, params = scope.sql()
    cur.execute(
        f"SELECT {_SELECT} FROM cronctl.runs WHERE {mine} "  # noqa: S608  (constant names)
        "AND (%(task)s::text IS NULL OR task = %(task)s) "
        "AND (%(host)s::text IS NULL OR host = %(host)s) "
        "AND (%(outcomes)s::text[] IS NULL OR outcome = ANY(%(outcomes)s::text[])) "
        "AND (%(since)s::timestamptz IS NULL OR occurrence >= %(since)s::timestamptz) "
        f"{_ORDER} LIMIT %(limit)s",
        {**params, "host": host, "limit": limit, "since": since,
         "task": None if task is None else scope.key(task),
         "outcomes": None if outcomes is None else list(outcomes)},
    )  # fmt: skip
    return [_run(row, scope) for row in cur.fetchall()]


def latest(cur: Any, scope: Scope) -> list[RunRow]:
    """The newest finished record of every (task, host)."""
    mine, params = scope.sql()
    cur.execute(
        f"SELECT DISTINCT ON (task, host) {_SELECT} FROM cronctl.runs "  # noqa: S608
        f"WHERE {mine} AND outcome NOT IN ('missed', 'pending', 'running') "
        "ORDER BY task, host, occurrence DESC, started DESC NULLS LAST, id DESC",
        params,
    )
    return [_run(row, scope) for row in cur.fetchall()]
