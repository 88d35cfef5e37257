"""The overlap lock's watcher on PostgreSQL in normal operation: no false alarm, a bounded
number of connections and transactions, ``seen`` kept fresh (docs/faults.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from cronctl.coord.postgres.lock import HEARTBEAT_S
from tests.coord.conftest import PgServer
from tests.coord.postgres.kit import T, database_of, outcomes
from tests.helpers import wait_for, write_schedule

TASKS = 8


def _counts(pg_server: PgServer, database: str) -> tuple[int, int]:
    """(sessions, committed transactions) of ``database`` so far, once no other session is
    open there (a backend's counts reach pg_stat_database when it exits)."""

    def alone() -> bool:
        others = f"datname = '{database}' AND pid <> pg_backend_pid()"
        rows = pg_server.sql(f"SELECT count(*) FROM pg_stat_activity WHERE {others}")  # noqa: S608
        return rows[0][0] == 0

    wait_for(alone, "cronctl's sessions to end")
    pg_server.sql("SELECT pg_stat_force_next_flush()")
    (row,) = pg_server.sql(
        f"SELECT sessions, xact_commit FROM pg_stat_database WHERE datname = '{database}'"  # noqa: S608
    )
    return int(row[0]), int(row[1])  # type: ignore[call-overload]


def test_healthy_guarded_runs_never_warn_and_use_few_connections_and_transactions(
    machine: Callable[..., object], pg_url: str, pg_server: PgServer, tmp_path: Path
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            f'name = "g{i}"\ncron = "* * * * *"\ncommand = "sleep 3"\nwithout_overlapping = true'
            for i in range(TASKS)
        ],
        header="[cronctl]\nmax_parallel = 8\n",
    )
    database = database_of(pg_url)
    machine("a", "run", "--now", "2026-08-03T08:59:00Z")  # the schema exists; a window starts
    sessions, commits = _counts(pg_server, database)
    began = time.monotonic()
    result = machine("a", "run", "--json", "--now", T)
    # A lock held past HEARTBEAT_S refreshes its row (one statement more): on a loaded
    # machine the 3 s tasks hold theirs longer, never longer than the run.
    beats = int((time.monotonic() - began) / HEARTBEAT_S)
    assert result.returncode == 0, result.stderr  # type: ignore[attr-defined]
    assert set(outcomes(result).values()) == {"ok"}
    assert "lost" not in result.stderr, result.stderr  # type: ignore[attr-defined]
    after_sessions, after_commits = _counts(pg_server, database)
    # One session for the run, one for each task's lock; a handful of statements a task
    # (take, record, name the command, forget, and the heartbeats) and a few for the run.
    # Before the fix a watcher that took a reply for a lost session opened a connection
    # every 0.1 s.
    assert after_sessions - sessions <= 1 + TASKS + 2, after_sessions - sessions
    assert after_commits - commits <= 10 + (6 + beats) * TASKS, (after_commits - commits, beats)


def test_the_holder_row_is_seen_fresh_while_the_task_runs(
    fleet: Callable[..., object], pg_url: str, pg_server: PgServer, tmp_path: Path
) -> None:
    a = fleet("a", "run", "--now", T, background=True)
    wait_for(lambda: (tmp_path / "started").exists(), "the task to start")
    database = database_of(pg_url)
    (first,) = pg_server.sql("SELECT seen FROM cronctl.holders", database)[0]

    def refreshed() -> bool:
        rows = pg_server.sql("SELECT seen FROM cronctl.holders", database)
        return bool(rows) and rows[0][0] - first >= timedelta(seconds=4)  # type: ignore[operator]

    wait_for(refreshed, "seen to be refreshed", timeout=20)
    (tmp_path / "release").touch()
    _, err = a.communicate(timeout=60)  # type: ignore[attr-defined]
    assert a.returncode == 0 and "lost" not in err, err  # type: ignore[attr-defined]
