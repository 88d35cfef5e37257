"""The fleet overview's store (docs/fleets-postgresql.md, docs/dashboard.md#speed): the
``latest`` table the runs_keep_latest trigger keeps, its backfill by the migration from
schema 3, the summary the overview reads, and the overview page built from it."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cronctl.coord.postgres import schema
from cronctl.coord.postgres.adapter import PostgresCoordinator
from cronctl.core.runs import RunRow
from tests.coord.conftest import PgServer
from tests.coord.postgres.kit import database_of, serving
from tests.helpers import Cli, write_schedule

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)


@pytest.fixture
def coord(pg_url: str) -> Iterator[PostgresCoordinator]:
    store = PostgresCoordinator(pg_url, host="viewer", pid=os.getpid())
    yield store
    store.close()


def run(run_id: str, minute: int, outcome: str = "ok", host: str = "a", task: str = "t",
        started: datetime | None = None) -> RunRow:  # fmt: skip
    at = T0 + timedelta(minutes=minute)
    return RunRow(run_id, task, at, outcome, host, started=started or at)


def latest_ids(coord: PostgresCoordinator) -> dict[tuple[str, str], str]:
    return {(r.task, r.host): r.id for r in coord.fleet_latest()}


def test_a_newer_run_replaces_the_latest_and_an_older_one_does_not(
    coord: PostgresCoordinator,
) -> None:
    coord.publish([run("r1", 1)])
    assert latest_ids(coord) == {("t", "a"): "r1"}
    coord.publish([run("r2", 2, "failed")])
    assert latest_ids(coord) == {("t", "a"): "r2"}
    coord.publish([run("r0", 0)])  # published late (an outbox drained after a later run)
    assert latest_ids(coord) == {("t", "a"): "r2"}
    coord.publish([run("r3", 5, host="b"), run("r4", 3, host="b")])  # out of order, at once
    assert latest_ids(coord) == {("t", "a"): "r2", ("t", "b"): "r3"}
    (newest,) = coord.fleet_latest(task="t", host="a")
    assert (newest.id, newest.outcome) == ("r2", "failed")
    assert newest.occurrence == T0 + timedelta(minutes=2)


def test_the_same_occurrence_is_ordered_by_start_then_id(coord: PostgresCoordinator) -> None:
    coord.publish([run("r-b", 1, started=T0 + timedelta(minutes=1, seconds=5))])
    coord.publish([run("r-a", 1, started=None)])  # no start: the oldest of the occurrence
    assert latest_ids(coord) == {("t", "a"): "r-b"}
    coord.publish([run("r-c", 1, started=T0 + timedelta(minutes=1, seconds=5))])
    assert latest_ids(coord) == {("t", "a"): "r-c"}  # same start: the greater id


def test_the_same_record_published_again_updates_in_place(coord: PostgresCoordinator) -> None:
    coord.publish([run("r1", 1, "failed")])
    coord.publish([replace(run("r1", 1, "ok"), message="again")])
    (row,) = coord.fleet_latest()
    assert (row.id, row.outcome, row.message) == ("r1", "ok", "again")


def test_unfinished_runs_never_become_the_latest(coord: PostgresCoordinator) -> None:
    coord.publish([run("r1", 1), run("r2", 2, "running"), run("r3", 3, "missed")])
    assert latest_ids(coord) == {("t", "a"): "r1"}


def test_a_latest_record_published_again_unfinished_gives_way_to_the_one_before(
    coord: PostgresCoordinator,
) -> None:
    coord.publish([run("r1", 1, "failed"), run("r2", 2)])
    assert latest_ids(coord) == {("t", "a"): "r2"}
    coord.publish([run("r2", 2, "running")])
    (row,) = coord.fleet_latest()
    assert (row.id, row.outcome) == ("r1", "failed")
    coord.publish([run("r1", 1, "pending")])
    assert coord.fleet_latest() == []  # no finished record of the pair is left


def test_the_sweep_drops_latest_rows_past_the_runs_retention(coord: PostgresCoordinator) -> None:
    coord.publish([run("r1", 1), run("r2", 1, host="b")])
    coord.publish([run("r3", 60 * 24 * 100, host="b")])
    coord.sweep(T0 + timedelta(days=100))
    assert latest_ids(coord) == {("t", "b"): "r3"}


def test_a_store_of_schema_3_is_migrated_with_its_latest_runs(
    pg_url: str, pg_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as old:
        old.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:3])
        old.setattr(schema, "SCHEMA_VERSION", 3)
        earlier = PostgresCoordinator(pg_url, host="old", pid=1)
        earlier.publish([run("r1", 1), run("r2", 2, "failed"), run("r3", 3, "running"),
                         run("r4", 1, host="b"), run("p1", 9, task="p/t")])  # fmt: skip
        assert earlier.check().version == 3
        earlier.close()
    now = PostgresCoordinator(pg_url, host="new", pid=2)
    try:
        assert now.check().version == schema.SCHEMA_VERSION == 4
        assert latest_ids(now) == {("t", "a"): "r2", ("t", "b"): "r4"}
        rows = pg_server.sql("SELECT task, id FROM cronctl.latest ORDER BY id", database_of(pg_url))
        assert rows == [("p/t", "p1"), ("t", "r2"), ("t", "r4")]  # every project's rows
        now.publish([run("r5", 5, host="b")])  # and the trigger keeps it from then on
        assert latest_ids(now) == {("t", "a"): "r2", ("t", "b"): "r5"}
    finally:
        now.close()


def test_the_summary_names_the_hosts_not_ok_and_counts_the_others(
    coord: PostgresCoordinator, pg_url: str
) -> None:
    coord.publish([run("a1", 1), run("b1", 3, host="b"), run("c1", 2, "failed", host="c"),
                   run("d1", 1, "timeout", host="d"), run("u1", 1, "failed", task="u"),
                   run("v1", 1, task="v")])  # fmt: skip
    other = PostgresCoordinator(pg_url, host="x", pid=1, project="p")
    try:
        other.publish([run("p1", 1, "failed", task="t")])  # another project's
        (theirs,) = other.fleet_summary()
        assert (theirs.task, [r.id for r in theirs.not_ok], theirs.ok_hosts) == ("t", ["p1"], 0)
    finally:
        other.close()
    summary = {s.task: s for s in coord.fleet_summary()}
    assert list(summary) == ["t", "u", "v"]
    t = summary["t"]
    assert [(r.host, r.outcome) for r in t.not_ok] == [("c", "failed"), ("d", "timeout")]
    assert t.ok_hosts == 2 and t.newest is not None and t.newest.id == "b1"
    u = summary["u"]
    assert (len(u.not_ok), u.ok_hosts, u.newest) == (1, 0, None)
    v = summary["v"]
    assert (v.not_ok, v.ok_hosts, v.newest is not None and v.newest.id) == ([], 1, "v1")


def test_the_overview_shows_the_failing_host_and_how_many_are_ok(
    cli: Cli, tmp_path: Path, pg_url: str, coord: PostgresCoordinator
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [f'name = "{name}"\ncron = "* * * * *"\ncommand = "true"' for name in ("t", "quiet")],
    )
    coord.publish([run("a1", 1), run("b1", 1, host="b"), run("c1", 1, host="c"),
                   run("bad1", 1, "failed", host="web-9")])  # fmt: skip
    with serving(cli, tmp_path, pg_url, "viewer") as server:
        status, page = server.get("/")
        _, api = server.get("/api/tasks")
        _, only_web9 = server.get("/?host=web-9")
    assert status == 200
    row = page.decode().split('href="/tasks/t"')[1].split("</tr>")[0]
    assert "web-9" in row and "failed" in row and "ok</a> on 3 hosts" in row
    assert 'href="/runs/b1"' in row or 'href="/runs/c1"' in row or 'href="/runs/a1"' in row
    assert "1 failing" in row
    quiet = page.decode().split('href="/tasks/quiet"')[1].split("</tr>")[0]
    assert "never ran" in quiet
    tasks = {t["name"]: t for t in json.loads(api)["tasks"]}
    assert tasks["t"]["ok_hosts"] == 3 and tasks["t"]["state"] == "failing"
    assert [r["host"] for r in tasks["t"]["last_runs"]] == ["web-9"]
    assert tasks["quiet"]["ok_hosts"] == 0 and tasks["quiet"]["state"] == "new"
    # One host's view names that host's run only.
    web9 = only_web9.decode().split('href="/tasks/t"')[1].split("</tr>")[0]
    assert "web-9" in web9 and " on 3 hosts" not in web9


def test_the_host_summary_counts_each_hosts_tasks_and_names_its_failing_ones(
    coord: PostgresCoordinator,
) -> None:
    coord.publish([run("a1", 1), run("a2", 2, "failed", task="u"),
                   run("a3", 3, "timeout", task="v"), run("b1", 5, "failed", host="b"),
                   run("b2", 1, "skipped: paused", host="b", task="u")])  # fmt: skip
    hosts = coord.fleet_host_summary(["failed"])
    assert [(h.host, h.tasks, h.failing) for h in hosts] == [("a", 3, ["u"]), ("b", 2, ["t"])]
    assert hosts[1].last_seen == T0 + timedelta(minutes=5)
