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

from cronctl.coord.history import NAMED_FAILING, NAMED_NOT_OK, HostOutcome, TaskLatest
from cronctl.coord.postgres import schema
from cronctl.coord.postgres.adapter import PostgresCoordinator
from cronctl.core.runs import RunRow
from tests.coord.conftest import PgServer
from tests.coord.postgres.kit import database_of, older_store, serving
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
    pg_url: str, pg_server: PgServer
) -> None:
    with older_store(pg_url, 3) as earlier:
        earlier.publish([run("r1", 1), run("r2", 2, "failed"), run("r3", 3, "running"),
                         run("r4", 1, host="b"), run("p1", 9, task="p/t")])  # fmt: skip
    now = PostgresCoordinator(pg_url, host="new", pid=2)
    try:
        assert now.check().version == schema.SCHEMA_VERSION
        assert latest_ids(now) == {("t", "a"): "r2", ("t", "b"): "r4"}
        rows = pg_server.sql("SELECT task, id FROM cronctl.latest ORDER BY id", database_of(pg_url))
        assert rows == [("p/t", "p1"), ("t", "r2"), ("t", "r4")]  # every project's rows
        now.publish([run("r5", 5, host="b")])  # and the trigger keeps it from then on
        assert latest_ids(now) == {("t", "a"): "r2", ("t", "b"): "r5"}
    finally:
        now.close()


def test_the_summary_counts_the_hosts_and_names_the_first_not_ok(
    coord: PostgresCoordinator, pg_url: str
) -> None:
    coord.publish([run("a1", 1), run("b1", 3, host="b"), run("c1", 2, "failed", host="c"),
                   run("d1", 1, "timeout", host="d"), run("e1", 1, "skipped: overlap", host="e"),
                   run("f1", 1, "failed", host="f"), run("u1", 1, "failed", task="u"),
                   run("v1", 1, task="v"), run("w1", 1, "running", task="w")])  # fmt: skip
    other = PostgresCoordinator(pg_url, host="x", pid=1, project="p")
    try:
        other.publish([run("p1", 1, "failed", task="t")])  # another project's
        (theirs,) = other.fleet_summary(["failed"])
        assert theirs == TaskLatest("t", 0, 1, 1, [HostOutcome("a", "failed", "p1")])
    finally:
        other.close()
    summary = {s.task: s for s in coord.fleet_summary(["failed", "timeout"])}
    assert list(summary) == ["t", "u", "v"]  # w has not finished anywhere
    t = summary["t"]
    assert (t.ok_hosts, t.not_ok_hosts, t.failing_hosts) == (2, 4, 3)  # skipped is not failing
    assert t.not_ok == [HostOutcome("c", "failed", "c1"), HostOutcome("d", "timeout", "d1"),
                        HostOutcome("e", "skipped: overlap", "e1")]  # fmt: skip
    assert len(t.not_ok) == NAMED_NOT_OK
    assert summary["u"] == TaskLatest("u", 0, 1, 1, [HostOutcome("a", "failed", "u1")])
    assert summary["v"] == TaskLatest("v", 1, 0, 0, [])
    coord.publish([run("c2", 4, host="c")])  # c recovers: f is named in its place
    t = {s.task: s for s in coord.fleet_summary(["failed", "timeout"])}["t"]
    assert (t.ok_hosts, t.not_ok_hosts, [h.host for h in t.not_ok]) == (3, 3, ["d", "e", "f"])


def test_the_overview_names_the_first_hosts_not_ok_and_counts_the_rest(
    cli: Cli, tmp_path: Path, pg_url: str, coord: PostgresCoordinator
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            f'name = "{name}"\ncron = "* * * * *"\ncommand = "true"'
            for name in ("t", "many", "quiet", "new")
        ],
    )
    many = [run(f"m{i}", 1, "failed", host=f"n{i}", task="many") for i in range(5)]
    coord.publish([run("a1", 1), run("b1", 1, host="b"), run("c1", 1, host="c"),
                   run("bad1", 1, "failed", host="web-9"), *many,
                   run("x1", 1, "failed", host="<i>evil</i>", task="quiet")])  # fmt: skip
    with serving(cli, tmp_path, pg_url, "viewer") as server:
        status, page = server.get("/")
        _, api = server.get("/api/tasks")
        _, only_web9 = server.get("/?host=web-9")
        _, many_page = server.get("/tasks/many")
    assert status == 200
    row = page.decode().split('href="/tasks/t"')[1].split("</tr>")[0]
    assert 'href="/runs/bad1">failed</a> web-9' in row and "1 failing" in row
    assert '<a class="outcome ok" href="/tasks/t?outcome=ok">ok</a> on 3 hosts' in row
    named = page.decode().split('href="/tasks/many"')[1].split("</tr>")[0]
    assert [h for h in ("n0", "n1", "n2", "n3", "n4") if h in named] == ["n0", "n1", "n2"]
    assert '<a href="/tasks/many#hosts">2 more not ok</a>' in named and "5 failing" in named
    hostile = page.decode().split('href="/tasks/quiet"')[1].split("</tr>")[0]
    assert "failed</a> &lt;i&gt;evil&lt;/i&gt;</div>" in hostile and "<i>" not in hostile
    new = page.decode().split('href="/tasks/new"')[1].split("</tr>")[0]
    assert "never ran" in new
    tasks = {t["name"]: t for t in json.loads(api)["tasks"]}
    assert tasks["new"]["hosts"] is None and tasks["new"]["state"] == "new"
    assert tasks["t"]["hosts"] == {
        "ok": 3, "not_ok": 1, "failing": 1,
        "not_ok_named": [{"host": "web-9", "outcome": "failed", "run_id": "bad1"}],
    }  # fmt: skip
    assert tasks["t"]["state"] == "failing" and tasks["t"]["last_runs"] == []
    assert tasks["many"]["hosts"]["not_ok"] == 5 and tasks["many"]["consecutive_failures"] == 5
    assert tasks["quiet"]["hosts"]["not_ok_named"][0]["host"] == "<i>evil</i>"
    # The task's page lists every host's last run; one host's view names that host's run.
    hosts = many_page.decode().split('id="hosts"')[1].split("</table>")[0]
    assert all(f"<td>n{i}</td>" in hosts and f'href="/runs/m{i}"' in hosts for i in range(5))
    web9 = only_web9.decode().split('href="/tasks/t"')[1].split("</tr>")[0]
    assert "web-9" in web9 and " on 3 hosts" not in web9


def test_the_host_summary_counts_each_hosts_tasks_and_names_its_failing_ones(
    coord: PostgresCoordinator,
) -> None:
    coord.publish([run("a1", 1), run("a2", 2, "failed", task="u"),
                   run("a3", 3, "timeout", task="v"), run("b1", 5, "failed", host="b"),
                   run("b2", 1, "skipped: paused", host="b", task="u"),
                   run("c1", 2, host="c"), run("c2", 1, "failed", host="c", task="w"),
                   run("c3", 3, "timeout", host="c", task="x")])  # fmt: skip
    hosts = coord.fleet_host_summary(["failed", "timeout"])
    assert [(h.host, h.tasks, h.failing) for h in hosts] == [
        ("a", 3, ["u", "v"]), ("b", 2, ["t"]), ("c", 3, ["w", "x"])
    ]  # fmt: skip
    assert hosts[1].last_seen == T0 + timedelta(minutes=5)
    assert [h.failing_total for h in hosts] == [2, 1, 2]
    coord.publish([run("d1", 1, host="d")])  # a host with nothing failing
    last = coord.fleet_host_summary(["failed"])[-1]
    assert (last.host, last.failing, last.failing_total) == ("d", [], 0)


def test_the_fleet_page_names_a_hosts_first_failing_tasks_and_counts_the_rest(
    cli: Cli, tmp_path: Path, pg_url: str, coord: PostgresCoordinator
) -> None:
    names = [f"t{i:02d}" for i in range(NAMED_FAILING + 3)]
    write_schedule(
        tmp_path / "schedules.toml",
        [f'name = "{name}"\ncron = "* * * * *"\ncommand = "true"' for name in names],
    )
    coord.publish([run(f"z{i}", 1, "failed", host="z", task=name) for i, name in enumerate(names)])
    (z,) = coord.fleet_host_summary(["failed"])
    assert (z.failing, z.failing_total) == (names[:NAMED_FAILING], NAMED_FAILING + 3)
    with serving(cli, tmp_path, pg_url, "viewer") as server:
        status, page = server.get("/fleet")
        _, api = server.get("/api/hosts")
    row = page.decode().split("<td>z</td>")[1].split("</tr>")[0]
    assert status == 200 and f'href="/tasks/{names[NAMED_FAILING - 1]}"' in row
    assert f'href="/tasks/{names[NAMED_FAILING]}"' not in row
    assert '<a href="/?host=z&amp;state=failing">3 more</a>' in row
    (host,) = [h for h in json.loads(api)["hosts"] if h["host"] == "z"]
    assert (len(host["failing"]), host["failing_total"]) == (NAMED_FAILING, NAMED_FAILING + 3)
