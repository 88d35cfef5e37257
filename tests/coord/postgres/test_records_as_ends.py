"""A run's record reaches the fleet store as that run ends, not when the slowest task of
its minute does (docs/fleets-postgresql.md). Real processes, a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.coord.conftest import PgServer
from tests.coord.postgres.kit import T, database_of
from tests.helpers import wait_for


def test_a_quick_runs_record_reaches_the_store_while_a_slow_one_runs(
    fleet: Callable[..., object], pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    a = fleet("a", "run", "--now", T, background=True)
    wait_for(lambda: (tmp_path / "started").exists(), "the long task to start")

    def published() -> list[tuple[object, ...]]:
        sql = "SELECT task, outcome, host FROM cronctl.runs ORDER BY task"
        return pg_server.sql(sql, database_of(pg_url))

    # Before, the store had nothing until `long` ended and the run published its batch.
    wait_for(lambda: published() == [("free", "ok", "a")], "free's record in the store")
    assert a.poll() is None  # type: ignore[attr-defined]  (long still runs)
    (tmp_path / "release").touch()
    _, err = a.communicate(timeout=60)  # type: ignore[attr-defined]
    assert a.returncode == 0, err  # type: ignore[attr-defined]
    assert published() == [("free", "ok", "a"), ("long", "ok", "a")]
