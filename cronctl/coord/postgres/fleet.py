"""Fleet history in the coordination store: run records, output tails, hosts' check-ins."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

from cronctl._version import __version__
from cronctl.coord.history import (
    NAMED_FAILING,
    NAMED_NOT_OK,
    HostLatest,
    HostOutcome,
    HostSeen,
    RunQuery,
    TaskLatest,
)
from cronctl.coord.postgres import rows
from cronctl.coord.postgres.schema import RUN_COLUMNS
from cronctl.core.runs import RunRow

_SELECT = ", ".join(RUN_COLUMNS)
#: What a view reads of a record: ``latest`` holds no upstream run ids.
_READ = f"{_SELECT}, upstream"
_ORDER = "ORDER BY occurrence DESC, started DESC NULLS LAST, id DESC"
#: The keyset of the dashboard's pages, served by the runs_page indexes (schema.py).
_PAGE_ORDER = "ORDER BY occurrence DESC, id DESC"
#: What a record publishes beside RUN_COLUMNS: its ``tail`` and a chained run's upstream.
PUBLISHED_EXTRA: tuple[str, ...] = ("output", "upstream")
#: The published output tail is kept this long, as each machine keeps its logs.
OUTPUT_RETENTION_DAYS = 14
T = TypeVar("T")


def publish(cur: Any, rows: Sequence[RunRow], checked_in: bytes) -> None:
    """Upsert by id (a record sent twice stays one row) after the host's check-in, in one
    round trip. An empty ``tail`` is stored as none."""
    extra = PUBLISHED_EXTRA
    values = b",".join(
        cur.mogrify(
            f"({', '.join(['%s'] * (len(RUN_COLUMNS) + len(extra)))})",
            (*(getattr(row, c) for c in RUN_COLUMNS), *(_extra(row, c) for c in extra)),
        )
        for row in rows
    )
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in (*RUN_COLUMNS[1:], *extra))
    cur.execute(
        checked_in
        + f"; INSERT INTO cronctl.runs ({_SELECT}, {', '.join(extra)}) VALUES ".encode()  # noqa: S608
        + values
        + f" ON CONFLICT (id) DO UPDATE SET {updates}, published_at = now()".encode()
    )


def _extra(row: RunRow, column: str) -> str | None:
    return row.tail or None if column == "output" else row.upstream


def check_in(cur: Any, scope: Scope, host: str, clock: datetime) -> bytes:
    """This host's cronctl version and clock beside the store's now() (the clock skew)."""
    return bytes(
        cur.mogrify(
            "INSERT INTO cronctl.hosts (project, host, version, clock) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (project, host) DO UPDATE SET version = EXCLUDED.version, "
            "clock = EXCLUDED.clock, seen = now()",
            (scope.project or "", host, __version__, clock),
        )
    )


def _run(row: Sequence[Any], scope: Scope) -> RunRow:
    """Built by position: the overview of a large fleet builds tens of thousands."""
    rows.check_run(row)
    rid, task, occurrence, host, pid, outcome, exit_code, started, ended, *rest = row
    duration_s, message, trigger, attempt, upstream = rest
    return RunRow(
        rid, scope.name(task), occurrence, outcome, host, pid, exit_code, started, ended,
        duration_s, None, "", message, trigger, attempt, upstream,
    )  # fmt: skip


def _runs(cur: Any, scope: Scope, skipped: rows.Skipped, table: str = "runs") -> list[RunRow]:
    return skipped.keep(cur.fetchall(), lambda row: _run(row, scope), table, lambda row: row[0])


@dataclass(frozen=True, slots=True)
class Scope:
    """Tasks stored as ``PROJECT/TASK``; those of no project as ``TASK`` (never a ``/``)."""

    project: str | None

    @property
    def prefix(self) -> str:
        return f"{self.project}/" if self.project else ""

    def key(self, task: str) -> str:
        return self.prefix + task

    def name(self, key: str) -> str:
        return key[len(self.prefix) :]

    def owns(self, key: str) -> bool:
        return key.startswith(self.prefix) if self.project else "/" not in key

    def ours(self, by_key: dict[str, T]) -> dict[str, T]:
        return {self.name(k): v for k, v in by_key.items() if self.owns(k)}

    def stored(self, row: RunRow) -> RunRow:
        return replace(row, task=self.key(row.task)) if self.project else row

    def sql(self) -> tuple[str, dict[str, str]]:
        """The condition (and its parameter) that keeps a query to this scope's rows: LIKE
        rather than a function of ``task``, which the planner takes to match one row in 200,
        so that history pages were read whole and sorted instead of walked on their index."""
        if self.project:
            escaped = re.sub(r"([\\%_])", r"\\\1", self.prefix)
            return "task LIKE %(prefix)s", {"prefix": escaped + "%"}
        return "task NOT LIKE %(slash)s", {"slash": "%/%"}


def history(
    cur: Any,
    scope: Scope,
    skipped: rows.Skipped,
    task: str | None,
    host: str | None,
    limit: int,
    outcomes: Sequence[str] | None = None,
    since: datetime | None = None,
) -> list[RunRow]:
    mine, params = scope.sql()
    cur.execute(
        f"SELECT {_READ} FROM cronctl.runs WHERE {mine} "  # noqa: S608  (constant names)
        "AND (%(task)s::text IS NULL OR task = %(task)s) "
        "AND (%(host)s::text IS NULL OR host = %(host)s) "
        "AND (%(outcomes)s::text[] IS NULL OR outcome = ANY(%(outcomes)s::text[])) "
        "AND (%(since)s::timestamptz IS NULL OR occurrence >= %(since)s::timestamptz) "
        f"{_ORDER} LIMIT %(limit)s",
        {**params, "host": host, "limit": limit, "since": since,
         "task": None if task is None else scope.key(task),
         "outcomes": None if outcomes is None else list(outcomes)},
    )  # fmt: skip
    return _runs(cur, scope, skipped)


def latest(
    cur: Any, scope: Scope, skipped: rows.Skipped, task: str | None, host: str | None
) -> list[RunRow]:
    """The rows of ``latest``, which the runs_keep_latest trigger keeps (schema.py)."""
    mine, params = scope.sql()
    cur.execute(
        f"SELECT {_SELECT}, '' FROM cronctl.latest WHERE {mine} "  # noqa: S608  (constant names)
        "AND (%(task)s::text IS NULL OR task = %(task)s) "
        "AND (%(host)s::text IS NULL OR host = %(host)s) ORDER BY task, host",
        {**params, "host": host, "task": None if task is None else scope.key(task)},
    )
    return _runs(cur, scope, skipped, "latest")


def summary(
    cur: Any, scope: Scope, skipped: rows.Skipped, failing: Sequence[str]
) -> list[TaskLatest]:
    """One statement on ``latest``: hosts counted by outcome, and the first NAMED_NOT_OK not
    ok from the latest_not_ok index alone, never a row per host (docs/dashboard.md#speed)."""
    mine, params = scope.sql()
    cur.execute(
        "SELECT task, count(*) FILTER (WHERE outcome = 'ok'), "  # noqa: S608  (constant names)
        "count(*) FILTER (WHERE outcome <> 'ok'), "
        "count(*) FILTER (WHERE outcome = ANY(%(failing)s)), NULL, NULL, NULL "
        f"FROM cronctl.latest WHERE {mine} GROUP BY task "
        "UNION ALL (SELECT task, NULL, NULL, NULL, host, outcome, id FROM ("
        "SELECT task, host, outcome, id, row_number() OVER (PARTITION BY task ORDER BY host) "
        f"FROM cronctl.latest WHERE {mine} AND outcome <> 'ok') AS named (task, host, outcome, "
        "id, n) WHERE n <= %(named)s ORDER BY task, host)",
        {**params, "failing": list(failing), "named": NAMED_NOT_OK},
    )
    counts: dict[str, tuple[int, int, int]] = {}
    named: dict[str, list[HostOutcome]] = {}
    for task, ok, not_ok, failed, host, outcome, run_id in cur.fetchall():
        if ok is not None:
            counts[task] = (ok, not_ok, failed)
            continue
        try:  # a page links the id, and shows the host and outcome
            checked = HostOutcome(
                rows.name(host, "host"), rows.name(outcome, "outcome"), rows.run_id(run_id)
            )
        except rows.BadRow as problem:
            skipped.skip("latest", str(run_id), problem)
            continue
        named.setdefault(task, []).append(checked)
    return [TaskLatest(scope.name(key), *counts[key], named.get(key, [])) for key in sorted(counts)]


def host_summary(
    cur: Any, scope: Scope, skipped: rows.Skipped, failing: Sequence[str]
) -> list[HostLatest]:
    """Each host's runs counted on ``latest``, and its ``failing`` tasks counted and the
    first NAMED_FAILING named, from the latest_not_ok index: no row per task and host. (One
    pass for both would walk ``latest`` in host order through the heap, much slower.)"""
    mine, params = scope.sql()
    cur.execute(
        "SELECT a.host, a.seen, a.tasks, coalesce(b.failed, '{}'), "  # noqa: S608
        "coalesce(b.total, 0) FROM ("
        "SELECT host, max(coalesce(ended, started, occurrence)) "  # the runs' own are named
        f"FILTER (WHERE coalesce(ended, started, occurrence) {rows.IN_RANGE}) AS seen, "
        "count(*) AS tasks "
        f"FROM cronctl.latest WHERE {mine} GROUP BY host) AS a LEFT JOIN ("
        "SELECT host, (array_agg(task ORDER BY task))[1:%(named)s] AS failed, "
        f"count(*) AS total FROM cronctl.latest WHERE {mine} AND outcome <> 'ok' "
        "AND outcome = ANY(%(failing)s) GROUP BY host) AS b USING (host) ORDER BY a.host",
        {**params, "failing": list(failing), "named": NAMED_FAILING},
    )
    return skipped.keep(
        cur.fetchall(), lambda row: _host(row, scope), "latest", lambda row: f"host {row[0]}"
    )


def _host(row: Sequence[Any], scope: Scope) -> HostLatest:
    host, seen, tasks, failed, total = row
    failing = [scope.name(rows.name(task, "task")) for task in failed]
    return HostLatest(rows.name(host, "host"), rows.instant(seen, "seen"), tasks, failing, total)


def page(cur: Any, scope: Scope, skipped: rows.Skipped, query: RunQuery) -> list[RunRow]:
    """Every filter and the keyset cursor in SQL, on the runs_page index that fits, so a page
    deep in the history costs what the first does."""
    mine, params = scope.sql()
    terms = [mine]
    values: dict[str, Any] = {**params, "limit": query.limit}
    for column, value in (("task", None if query.task is None else scope.key(query.task)),
                          ("host", query.host), ("outcome", query.outcome),
                          ("trigger", query.trigger)):  # fmt: skip
        if value is not None:
            terms.append(f"{column} = %({column})s")
            values[column] = value
    if query.before is not None:
        terms.append("(occurrence, id) < (%(before_at)s, %(before_id)s)")
        values["before_at"], values["before_id"] = query.before
    cur.execute(
        f"SELECT {_READ} FROM cronctl.runs WHERE {' AND '.join(terms)} "  # noqa: S608
        f"{_PAGE_ORDER} LIMIT %(limit)s",
        values,
    )
    return _runs(cur, scope, skipped)


def one(cur: Any, scope: Scope, skipped: rows.Skipped, run_id: str) -> RunRow | None:
    mine, params = scope.sql()
    cur.execute(
        f"SELECT {_READ}, output FROM cronctl.runs WHERE id = %(id)s AND {mine}",  # noqa: S608
        {**params, "id": run_id},
    )
    found = skipped.keep(
        cur.fetchall(),
        lambda row: replace(_run(row[:-1], scope), tail=rows.maybe_text(row[-1], "output") or ""),
        "runs",
        lambda row: row[0],
    )
    return found[0] if found else None


def hosts(cur: Any, scope: Scope, skipped: rows.Skipped) -> list[HostSeen]:
    cur.execute(
        "SELECT host, version, clock, seen FROM cronctl.hosts WHERE project = %s ORDER BY host",
        (scope.project or "",),
    )
    return skipped.keep(cur.fetchall(), _check_in, "hosts", lambda row: row[0])


def _check_in(row: Sequence[Any]) -> HostSeen:
    host, version, clock, seen = row
    return HostSeen(
        rows.name(host, "host"), rows.name(version, "version"),
        rows.instant(clock, "clock"), rows.instant(seen, "seen"),
    )  # fmt: skip
