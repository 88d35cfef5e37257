"""Faults with real processes against a real PostgreSQL: cronctl killed, the server crashed,
stopped, a lock's session cut. The invariants: an on_one_server occurrence runs at most once,
a without_overlapping task never runs twice at once, the history stays complete."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cronctl.coord.port import StoreUnavailable
from cronctl.coord.postgres.adapter import PostgresCoordinator
from cronctl.coord.postgres.schema import SCHEMA_VERSION, SchemaRefused
from tests.coord.conftest import PgServer
from tests.coord.postgres.kit import T1, T2, T, database_of, outcomes
from tests.helpers import Cli, alive, wait_for, write_schedule, written


def _coord(pg_url: str, host: str = "tester", pid: int = 1) -> PostgresCoordinator:
    return PostgresCoordinator(pg_url, host=host, pid=pid)


def test_kill_9_of_cronctl_leaves_the_lock_with_the_running_task(
    fleet: Callable[..., object], pg_url: str, tmp_path: Path
) -> None:
    a = fleet("a", "run", "--now", T, background=True)
    # The shell creates the file a moment before it writes the pid into it.
    task_pid = int(wait_for(lambda: written(tmp_path / "started"), "the task to start"))
    a.kill()  # type: ignore[attr-defined]  (SIGKILL)
    a.communicate(timeout=30)  # type: ignore[attr-defined]
    assert alive(task_pid)
    store = _coord(pg_url)
    try:
        assert store.overlap_held("long")
        assert (
            outcomes(fleet("b", "run", "--json", "--now", T1))["long"] == "skipped: still running"
        )
        (tmp_path / "release").touch()
        wait_for(lambda: not alive(task_pid), "the task to end")
        wait_for(lambda: not store.overlap_held("long"), "the server to free the lock")
    finally:
        store.close()
    # a's next run closes the interrupted row and publishes it: the fleet history is complete.
    fleet("a", "run", "--now", T2)
    history = json.loads(fleet("a", "history", "--fleet", "--json", "--host", "a").stdout)
    mine = {(r["task"], r["occurrence"]): r["outcome"] for r in history["runs"]}
    assert mine[("long", T)] == "error"
    assert all(r["host"] == "a" for r in history["runs"])


def test_server_crash_mid_run_keeps_claims_and_the_lock(
    fleet: Callable[..., object], pg_url: str, pg_server: PgServer, tmp_path: Path
) -> None:
    a = fleet("a", "run", "--json", "--now", T, background=True)
    wait_for(lambda: (tmp_path / "started").exists(), "the task to start")
    pg_server.restart_immediate()
    store = _coord(pg_url)
    try:
        # The holder's cronctl takes its lock back on a new session.
        wait_for(lambda: store.overlap_held("long"), "the holder to retake its lock")
        assert (
            outcomes(fleet("b", "run", "--json", "--now", T))["long"] == "skipped: another server"
        )
        assert (
            outcomes(fleet("c", "run", "--json", "--now", T1))["long"] == "skipped: still running"
        )
    finally:
        store.close()
    (tmp_path / "release").touch()
    out, err = a.communicate(timeout=60)  # type: ignore[attr-defined]
    assert a.returncode == 0, err  # type: ignore[attr-defined]
    assert json.loads(out)["runs"][0]["outcome"] in ("ok",)
    assert (tmp_path / "finished").read_text().count("done") == 1
    # a's record may have waited in its outbox (a run tries the store once: a record sent
    # while the server was starting up waits), and another machine may have noted the run as
    # of unknown outcome meanwhile, its session having ended: a's next run sends it, by id.
    fleet("a", "run", "--now", T2)
    runs = json.loads(fleet("b", "history", "--fleet", "--json", "long").stdout)["runs"]
    assert [(r["host"], r["outcome"]) for r in runs if r["occurrence"] == T] == [("a", "ok")]


def test_store_stopped_guarded_tasks_fail_others_run_nothing_twice_after(
    fleet: Callable[..., object], pg_server: PgServer, tmp_path: Path
) -> None:
    (tmp_path / "release").touch()
    fleet("a", "run", "--now", "2026-08-03T08:59:00Z")  # the schema exists; a window starts
    pg_server.stop()
    try:
        down = fleet("a", "run", "--json", "--now", T)
    finally:
        pg_server.start()
    assert down.returncode == 1  # type: ignore[attr-defined]
    assert outcomes(down) == {"long": "error", "free": "ok"}
    stderr = down.stderr  # type: ignore[attr-defined]
    assert "coordination store unreachable" in stderr
    assert stderr.count("cronctl: error: coordination store unreachable") == 1
    assert (tmp_path / "finished").read_text().count("done") == 1  # only 08:59's run
    # Back: the same minute again runs nothing; the next minute runs and publishes the backlog.
    again = fleet("a", "run", "--json", "--now", T)
    assert outcomes(again) == {}
    assert outcomes(fleet("a", "run", "--json", "--now", T1)) == {"long": "ok", "free": "ok"}
    runs = json.loads(fleet("a", "history", "--fleet", "--json").stdout)["runs"]
    at_t = {r["task"]: r["outcome"] for r in runs if r["occurrence"] == T}
    assert at_t == {"long": "error", "free": "ok"}
    assert (tmp_path / "free.log").read_text().split().count(T) == 1


def test_a_cut_lock_session_is_taken_back_and_no_one_overlaps(
    fleet: Callable[..., object], pg_url: str, pg_server: PgServer, tmp_path: Path
) -> None:
    a = fleet("a", "run", "--json", "--now", T, background=True)
    wait_for(lambda: (tmp_path / "started").exists(), "the task to start")
    database = pg_url.split("@/", 1)[1].split("?")[0]
    (backend,) = pg_server.sql("SELECT backend FROM cronctl.holders", database)[0]
    pg_server.sql(f"SELECT pg_terminate_backend({int(backend)})", database)  # type: ignore[arg-type]

    def retaken() -> bool:
        rows = pg_server.sql("SELECT backend FROM cronctl.holders", database)
        return bool(rows) and rows[0][0] != backend

    wait_for(retaken, "the holder to retake its lock")
    assert outcomes(fleet("b", "run", "--json", "--now", T1))["long"] == "skipped: still running"
    (tmp_path / "release").touch()
    _, err = a.communicate(timeout=60)  # type: ignore[attr-defined]
    assert a.returncode == 0, err  # type: ignore[attr-defined]
    assert (tmp_path / "finished").read_text().count("done") == 1


def test_password_is_never_printed_and_a_newer_schema_is_refused(
    fleet: Callable[..., object], cli: Cli, pg_url: str, pg_server: PgServer, tmp_path: Path
) -> None:
    (tmp_path / "release").touch()
    bad = "postgresql://cronctl:sekret@/x?host=/nonexistent&sslmode=disable"
    result = cli("run", "--coordination", bad, "--now", T, env={"CRONCTL_HOST": "a"})
    assert result.returncode == 1
    assert "sekret" not in result.stderr + result.stdout and "cronctl:***@" in result.stderr
    doctor = cli("doctor", "--coordination", bad)
    assert doctor.returncode == 1 and "sekret" not in doctor.stdout + doctor.stderr
    fleet("a", "run", "--now", T)
    database = pg_url.split("@/", 1)[1].split("?")[0]
    pg_server.sql("UPDATE cronctl.meta SET version = 99", database)
    refused = fleet("a", "run", "--now", T1)
    assert refused.returncode == 2  # type: ignore[attr-defined]
    assert "schema version 99" in refused.stderr  # type: ignore[attr-defined]


def test_pause_on_one_machine_holds_on_another_and_fleet_views_show_hosts(
    fleet: Callable[..., object], tmp_path: Path
) -> None:
    (tmp_path / "release").touch()
    assert fleet("a", "pause", "free", "--reason", "db move").returncode == 0  # type: ignore[attr-defined]
    assert outcomes(fleet("b", "run", "--json", "--now", T))["free"] == "skipped: paused"
    fleet("a", "resume", "free")
    assert outcomes(fleet("a", "run", "--json", "--now", T1))["free"] == "ok"
    status = fleet("a", "status", "--fleet")
    assert "HOST" in status.stdout  # type: ignore[attr-defined]
    rows = json.loads(fleet("a", "status", "--fleet", "--json").stdout)["tasks"]  # type: ignore[attr-defined]
    assert {(r["name"], r["host"]) for r in rows} >= {("free", "a"), ("long", "b")}
    only_b = json.loads(fleet("a", "history", "--fleet", "--json", "--host", "b").stdout)
    assert only_b["runs"] and {r["host"] for r in only_b["runs"]} == {"b"}


def test_a_pause_still_holds_while_the_store_is_unreachable(
    fleet: Callable[..., object], pg_server: PgServer, tmp_path: Path
) -> None:
    (tmp_path / "release").touch()
    assert fleet("a", "pause", "free").returncode == 0  # type: ignore[attr-defined]
    assert outcomes(fleet("a", "run", "--json", "--now", T))["free"] == "skipped: paused"
    pg_server.stop()
    try:
        down = fleet("a", "run", "--json", "--now", T1)
    finally:
        pg_server.start()
    assert outcomes(down) == {"long": "error", "free": "skipped: paused"}
    assert "pauses last read from it still hold (free)" in down.stderr  # type: ignore[attr-defined]
    assert not (tmp_path / "free.log").exists()
    # Resumed in the store: the next run that reaches it forgets the pause.
    fleet("a", "resume", "free")
    assert outcomes(fleet("a", "run", "--json", "--now", T2))["free"] == "ok"
    assert not (tmp_path / "a" / "coord-pauses").exists()


def test_check_never_connects(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "t"\ncron = "* * * * *"\ncommand = "true"\non_one_server = true'],
        header='[cronctl]\ncoordination = "postgresql://u:sekret@/x?host=/nonexistent"\n',
    )
    result = cli("check")
    assert result.returncode == 0, result.stdout + result.stderr
    write_schedule(tmp_path / "bad.toml", ['name = "t"\ncron = "* * * * *"\ncommand = "true"'],
                   header='[cronctl]\ncoordination = "mysql://u:sekret@db/x"\n')  # fmt: skip
    bad = cli("check", "-f", "bad.toml")
    assert bad.returncode == 1 and "postgresql://" in bad.stdout + bad.stderr
    assert "sekret" not in bad.stdout + bad.stderr


def test_a_role_with_rights_on_one_schema_is_enough(
    cli: Cli, pg_url: str, pg_server: PgServer, tmp_path: Path
) -> None:
    database = pg_url.split("@/", 1)[1].split("?")[0]
    role = f"r_{database}"
    pg_server.sql(f"CREATE ROLE {role} LOGIN")
    pg_server.sql(f"REVOKE CREATE ON SCHEMA public FROM PUBLIC; REVOKE CREATE ON DATABASE "
                  f"{database} FROM PUBLIC", database)  # fmt: skip
    pg_server.sql(f"CREATE SCHEMA cronctl AUTHORIZATION {role}", database)
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "t"\ncron = "* * * * *"\ncommand = "true"\non_one_server = true'],
    )
    env = {"CRONCTL_COORDINATION": pg_server.url(database, role), "CRONCTL_HOST": "a"}
    result = cli("run", "--json", "--now", T, env=env)
    assert result.returncode == 0, result.stderr
    assert outcomes(result) == {"t": "ok"}
    assert cli("doctor", env=env).returncode in (0, 1)  # reachable; dirs may be judged
    assert "reachable" in cli("doctor", env=env).stdout


def test_after_a_server_restart_a_holder_gets_time_to_take_its_lock_back(
    pg_url: str, pg_server: PgServer
) -> None:
    """A holder last seen long before the restart (a long outage) still keeps contenders out
    for the grace after the server's start, though its advisory lock is gone."""
    from datetime import UTC, datetime

    store = _coord(pg_url, "b", 7)
    try:
        store.check()  # creates the schema
        database = pg_url.split("@/", 1)[1].split("?")[0]
        pg_server.sql(
            "INSERT INTO cronctl.holders (task, host, pid, started, backend, seen) VALUES "
            "('long', 'a', 42, now() - interval '1 hour', 1, now() - interval '10 minutes')",
            database,
        )
        pg_server.restart_immediate()
        now = datetime.now(UTC)
        got = store.try_overlap("long", lease=None, now=now)
        assert got.status == "held" and got.holder is not None and got.holder.host == "a"
        assert not store.overlap_held("long")  # the advisory lock itself is free
    finally:
        store.close()


def test_check_does_not_ask_for_a_shared_lock_dir_when_a_store_coordinates(
    cli: Cli, tmp_path: Path
) -> None:
    task = 'name = "t"\ncron = "* * * * *"\ncommand = "true"\non_one_server = true'
    (tmp_path / "locks").mkdir()
    header = f'[cronctl]\nlock_dir = "{tmp_path / "locks"}"\n'
    write_schedule(tmp_path / "plain.toml", [task], header=header)
    assert "lock-dir-not-shared" in cli("check", "--format", "json", "-f", "plain.toml").stdout
    coordinated = header + 'coordination = "postgresql://u@/x?host=/nonexistent"\n'
    write_schedule(tmp_path / "pg.toml", [task], header=coordinated)
    result = cli("check", "--format", "json", "-f", "pg.toml")
    assert result.returncode == 0 and "lock-dir-not-shared" not in result.stdout


def test_doctor_finds_a_healthy_set_up_and_dry_run_reads_the_store(
    fleet: Callable[..., object], tmp_path: Path
) -> None:
    (tmp_path / "release").touch()
    fleet("a", "run", "--now", T)
    doctor = fleet("a", "doctor")
    out = doctor.stdout  # type: ignore[attr-defined]
    assert doctor.returncode == 0, out  # type: ignore[attr-defined]
    assert f"schema version {SCHEMA_VERSION} of {SCHEMA_VERSION}" in out
    assert "clock:" in out and "PROBLEM" not in out
    dry = fleet("b", "run", "--dry-run", "--json", "--now", T)
    assert outcomes(dry) == {"long": "skipped: another server", "free": "would run"}


def test_a_lock_taken_by_another_after_a_cut_is_reported(
    fleet: Callable[..., object], pg_url: str, tmp_path: Path
) -> None:
    import psycopg2

    from cronctl.coord.postgres.lock import lock_key

    a = fleet("a", "run", "--now", T, background=True)
    wait_for(lambda: (tmp_path / "started").exists(), "the task to start")
    thief = psycopg2.connect(pg_url)
    thief.autocommit = True
    try:
        with thief.cursor() as cur:
            cur.execute("SET statement_timeout = '20s'")  # never hang the suite
            # As a lease overtaker does: the holder row first, then end the session, then
            # take the lock (the holder only takes it back while the row names it).
            (backend,) = pg_server_backend(cur)
            cur.execute("UPDATE cronctl.holders SET host = 'thief', backend = pg_backend_pid()")
            cur.execute(
                "SELECT pg_terminate_backend(%s, 5000), pg_advisory_lock(%s)",
                (backend, lock_key("long")),
            )
        (tmp_path / "release").touch()
        _, err = a.communicate(timeout=60)  # type: ignore[attr-defined]
    finally:
        thief.close()
    assert "task long: another run took the overlap lock after this one lost it" in err, err


def test_a_lock_taken_by_another_as_the_task_ends_is_still_reported(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The task ends (release) the instant the thief has the lock, before the lock's watcher
    # has seen its session cut (made certain here: the watcher's select, once the socket is
    # readable, returns only after release began). It must still say what became of it.
    import select
    import threading
    import types
    from datetime import UTC, datetime

    import psycopg2

    from cronctl.coord.postgres import lock as pg_lock
    from cronctl.coord.postgres.lock import lock_key

    stopping: list[threading.Event] = []  # the lock's own: set first thing in release()

    def late(rlist: list[int], wlist: list[int], xlist: list[int], timeout: float) -> object:
        ready = select.select(rlist, wlist, xlist, timeout)
        if ready[0] and stopping:
            stopping[0].wait(10)
            ready = select.select(rlist, wlist, xlist, 0)
        return ready

    monkeypatch.setattr(pg_lock, "select", types.SimpleNamespace(select=late))
    coord = PostgresCoordinator(pg_url, host="m1", pid=1)
    thief = psycopg2.connect(pg_url)
    thief.autocommit = True
    try:
        got = coord.try_overlap("long", lease=None, now=datetime(2026, 8, 3, 9, tzinfo=UTC))
        assert got.lock is not None
        stopping.append(got.lock._stop)  # type: ignore[attr-defined]
        with thief.cursor() as cur:
            cur.execute("SET statement_timeout = '20s'")
            (backend,) = pg_server_backend(cur)
            cur.execute("UPDATE cronctl.holders SET host = 'thief', backend = pg_backend_pid()")
            cur.execute(
                "SELECT pg_terminate_backend(%s, 5000), pg_advisory_lock(%s)",
                (backend, lock_key("long")),
            )
        got.lock.release()
        assert getattr(got.lock, "lost", None) == (
            "another run took the overlap lock after this one lost it"
        )
    finally:
        thief.close()
        coord.close()


def pg_server_backend(cur: object) -> tuple[int]:
    """The holder's backend pid, from its row."""
    cur.execute("SELECT backend FROM cronctl.holders")  # type: ignore[attr-defined]
    return cur.fetchone()  # type: ignore[attr-defined, no-any-return]


def test_a_missing_driver_is_a_clear_error_before_anything_runs(cli: Cli, tmp_path: Path) -> None:
    # A psycopg2 that cannot be imported, first on the path: as on a machine without the extra.
    fake = tmp_path / "nodriver" / "psycopg2"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named psycopg2')\n")
    write_schedule(tmp_path / "schedules.toml",
                   ['name = "t"\ncron = "* * * * *"\ncommand = "touch ran"'])  # fmt: skip
    env = {"PYTHONPATH": f"{fake.parent}:{cli.env['PYTHONPATH']}",
           "CRONCTL_COORDINATION": "postgresql://u:sekret@/x?host=/nonexistent"}  # fmt: skip
    result = cli("run", "--now", T, env=env)
    assert result.returncode == 2
    assert "pip install 'cronctl[postgres]'" in result.stderr and "sekret" not in result.stderr
    assert not (tmp_path / "ran").exists()
    doctor = cli("doctor", env=env)
    assert doctor.returncode == 1 and "pip install 'cronctl[postgres]'" in doctor.stdout


def test_a_coordinator_closed_again_keeps_its_session_and_checks_a_refusal_afresh(
    pg_url: str, pg_server: PgServer
) -> None:
    """`work` closes its coordinator every minute: from the second on, the session stays (a
    minute costs its statements, no connection); one the server ended is replaced; a store
    migrated by a newer cronctl meanwhile is refused as at a connect."""
    database = database_of(pg_url)
    sessions = "SELECT pid FROM pg_stat_activity WHERE application_name = 'cronctl'"
    coord = PostgresCoordinator(pg_url, host="w", pid=1)
    try:
        coord.check()  # creates the schema
        coord.close()  # a `run`'s only close: the session ends with it
        wait_for(lambda: not pg_server.sql(sessions, database), "the first session's end")
        coord.paused_tasks()
        coord.close()
        kept = pg_server.sql(sessions, database)
        coord.paused_tasks()
        coord.close()
        assert pg_server.sql(sessions, database) == kept and len(kept) == 1
        pg_server.sql(f"SELECT pg_terminate_backend({kept[0][0]})", database)
        coord.paused_tasks()  # a new session, at once
        coord.close()
        pg_server.sql(
            "UPDATE cronctl.meta SET version = 99; DROP FUNCTION cronctl.orphans()", database
        )
        with pytest.raises(StoreUnavailable):
            coord.paused_tasks()  # the kept session meets the newer schema's refusal
        coord.close()
        with pytest.raises(SchemaRefused):
            coord.paused_tasks()
    finally:
        coord.close()
