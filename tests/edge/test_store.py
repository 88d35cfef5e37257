"""The per-machine SQLite state and history, with real files and real processes."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from cronctl.core.runs import RunRow
from cronctl.edge.state import dbfile
from cronctl.edge.state.dbfile import MIGRATIONS
from cronctl.edge.state.store import DB_NAME, SCHEMA_VERSION, Store, TaskState
from cronctl.errors import CronctlError, UnsafeDirectoryError

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)

# Run in another process: N transactions, each a read-modify-write of one counter plus a run row;
# the store is opened afresh every 10 transactions, as `cronctl run` opens it every minute.
INCREMENT = textwrap.dedent(
    """
    import sys, time
    from datetime import datetime, timezone
    from pathlib import Path
    from cronctl.core.runs import RunRow
    from cronctl.edge.state.store import Store, TaskState
    state_dir, worker, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    t0 = datetime(2026, 8, 3, 9, 0, tzinfo=timezone.utc)
    go = state_dir / "go"
    while not go.exists():  # a poll on the test's signal: all workers start together
        time.sleep(0.005)
    for batch in range(0, count, 10):
        with Store.open(state_dir) as store:
            for i in range(batch, min(batch + 10, count)):
                with store.transaction() as txn:
                    state = txn.get_state("counter")
                    total = 0 if state is None else state.missed_total
                    txn.put_state(TaskState("counter", "fp", t0, missed_total=total + 1))
                    txn.add_run(RunRow(f"{worker}-{i}", "counter", t0, "ok", worker))
                time.sleep(0.001)  # let the others in, so that the workers interleave
    """
)

# Run in another process: commit forever, printing how many transactions are committed.
COMMIT_FOREVER = textwrap.dedent(
    """
    import sys, time
    from datetime import datetime, timedelta, timezone
    from pathlib import Path
    from cronctl.core.runs import RunRow
    from cronctl.edge.state.store import Store, TaskState
    state_dir, prefix = Path(sys.argv[1]), sys.argv[2]
    t0 = datetime(2026, 8, 3, 9, 0, tzinfo=timezone.utc)
    with Store.open(state_dir) as store:
        i = 0
        while True:
            with store.transaction() as txn:
                state = txn.get_state("counter")
                total = 0 if state is None else state.missed_total
                txn.put_state(TaskState("counter", "fp", t0, missed_total=total + 1))
                time.sleep(0.002)  # widen the window in which the kill lands mid-transaction
                txn.add_run(RunRow(f"{prefix}-{i}", "counter", t0 + timedelta(minutes=i),
                                   "running", "h", tail="x" * 2000))
            i += 1
            print(i, flush=True)
    """
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path) as opened:
        yield opened


def _run(
    run_id: str,
    occurrence: datetime = T0,
    outcome: str = "ok",
    *,
    task: str = "backup",
    host: str = "h1",
    **fields: Any,
) -> RunRow:
    return RunRow(run_id, task, occurrence, outcome, host, **fields)


def _add(store: Store, *runs: RunRow) -> None:
    with store.transaction() as txn:
        for run in runs:
            txn.add_run(run)


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def _raw_value(path: Path, sql: str) -> object:
    conn = _raw(path)
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


# --- round trips ----------------------------------------------------------------------------


def test_task_state_round_trips_and_survives_reopening(tmp_path: Path) -> None:
    state = TaskState("backup", "0 3 * * *|Europe/Paris", T0, missed_total=9, done=True)
    with Store.open(tmp_path) as store, store.transaction() as txn:
        assert txn.get_state("backup") is None
        txn.put_state(state)
        assert txn.get_state("backup") == state
    with Store.open(tmp_path) as store:
        assert store.states() == {"backup": state}
        assert store.states()["backup"].last_occurrence.tzinfo is UTC


def test_put_state_replaces_the_previous_state(store: Store) -> None:
    with store.transaction() as txn:
        txn.put_state(TaskState("backup", "a", T0, missed_total=3))
        txn.put_state(TaskState("other", "x", T0))
    with store.transaction() as txn:
        txn.put_state(TaskState("backup", "b", T0 + timedelta(minutes=1)))
    assert store.states()["backup"] == TaskState("backup", "b", T0 + timedelta(minutes=1))
    assert set(store.states()) == {"backup", "other"}


def test_put_states_writes_each_state_with_its_own_instant(store: Store) -> None:
    # Most states of a run share one instant (formatted once); the others keep their own,
    # and the same instant in another offset is the same text.
    plus_two = timezone(timedelta(hours=2))
    states = [
        TaskState("a", "fp", T0),
        TaskState("b", "fp", T0 - timedelta(days=3), missed_total=2, done=True),
        TaskState("c", "fp", T0.astimezone(plus_two)),
        TaskState("d", "fp", T0 + timedelta(seconds=1)),
    ]
    with store.transaction() as txn:
        txn.put_states(states)
    assert store.states() == {s.name: s for s in states}
    assert {s.last_occurrence.utcoffset() for s in store.states().values()} == {timedelta(0)}


def test_stored_states_are_the_rows_as_stored_and_parse_to_the_states(store: Store) -> None:
    state = TaskState("backup", "fp", T0, missed_total=2, done=True)
    with store.transaction() as txn:
        txn.put_state(state)
        assert txn.stored_states() == {"backup": ("backup", "fp", "2026-08-03T09:00:00Z", 2, 1)}
    (row,) = store.stored_states().values()
    assert store.parse_state(row) == state


def test_a_stored_row_cronctl_did_not_write_is_refused_when_parsed(store: Store) -> None:
    with pytest.raises(CronctlError, match="did not write"):
        store.parse_state(("backup", "fp", "not a time", 0, 0))


def test_advance_states_moves_only_the_windows_still_as_they_were_read(store: Store) -> None:
    # The compare-and-set of work's second transaction: a row another process changed since
    # it was read (here: moved on, edited, counted a miss) keeps what that process wrote.
    minute = timedelta(minutes=1)
    names = ("same", "moved", "edited", "counted")
    with store.transaction() as txn:
        txn.put_states([TaskState(name, "fp", T0) for name in names])
    read = store.stored_states()
    with store.transaction() as txn:
        txn.put_states(
            [
                TaskState("moved", "fp", T0 + 2 * minute),
                TaskState("edited", "other", T0),
                TaskState("counted", "fp", T0, missed_total=1),
            ]
        )
    with store.transaction() as txn:
        moved = txn.advance_states([(read[name], T0 + minute) for name in names])
    assert moved == 1
    assert store.states() == {
        "same": TaskState("same", "fp", T0 + minute),
        "moved": TaskState("moved", "fp", T0 + 2 * minute),  # never moved back
        "edited": TaskState("edited", "other", T0),
        "counted": TaskState("counted", "fp", T0, missed_total=1),
    }


def test_add_states_inserts_only_the_tasks_that_have_no_row(store: Store) -> None:
    # The first windows of work's second transaction: a row another process wrote since
    # (here: a window further on, another schedule) keeps what that process wrote.
    minute = timedelta(minutes=1)
    with store.transaction() as txn:
        txn.put_states([TaskState("moved", "fp", T0 + minute), TaskState("edited", "other", T0)])
    with store.transaction() as txn:
        added = txn.add_states([TaskState(name, "fp", T0) for name in ("new", "moved", "edited")])
    assert added == 1
    assert store.states() == {
        "new": TaskState("new", "fp", T0),
        "moved": TaskState("moved", "fp", T0 + minute),  # never moved back
        "edited": TaskState("edited", "other", T0),
    }


def test_run_row_round_trips_every_field_in_utc(store: Store) -> None:
    paris = timezone(timedelta(hours=2))
    started = datetime(2026, 8, 3, 11, 0, 0, 123456, tzinfo=paris)
    run = RunRow(
        id="r1",
        task="backup",
        occurrence=datetime(2026, 8, 3, 11, 0, tzinfo=paris),
        outcome="failed",
        host="h1",
        pid=4242,
        exit_code=3,
        started=started,
        ended=started + timedelta(seconds=1.5),
        duration_s=1.5,
        log_path="/var/lib/cronctl/logs/r1.log",
        tail="line 1\nline 2 é\n",
        message="exit status 3",
    )
    _add(store, run)
    got = store.get_run("r1")
    assert got == run
    assert got is not None and got.occurrence == T0 and got.occurrence.tzinfo is UTC
    assert got.started is not None and got.started.tzinfo is UTC
    assert store.get_run("nope") is None


def test_times_are_stored_as_iso_text_with_z(store: Store) -> None:
    _add(store, _run("r1", started=T0 + timedelta(seconds=0.25)))
    with store.transaction() as txn:
        txn.put_state(TaskState("backup", "fp", T0))
    stored = [
        _raw_value(store.path, "SELECT occurrence FROM runs"),
        _raw_value(store.path, "SELECT started FROM runs"),
        _raw_value(store.path, "SELECT last_occurrence FROM task_state"),
    ]
    assert stored == [
        "2026-08-03T09:00:00Z",
        "2026-08-03T09:00:00.250000Z",
        "2026-08-03T09:00:00Z",
    ]


def test_update_run_changes_only_the_given_fields(store: Store) -> None:
    _add(store, _run("r1", outcome="running", pid=7, started=T0))
    end = T0 + timedelta(seconds=2)
    store.update_run("r1", outcome="ok", exit_code=0, ended=end, duration_s=2.0, tail="done\n")
    assert store.get_run("r1") == _run(
        "r1", pid=7, started=T0, exit_code=0, ended=end, duration_s=2.0, tail="done\n"
    )


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"colour": "red"}, ValueError),
        ({"id": "r2"}, ValueError),
        ({"outcome": "skipped"}, ValueError),
        ({"started": "2026-08-03T09:00:00Z"}, TypeError),
        ({"ended": datetime(2026, 8, 3, 9, 0)}, ValueError),  # naive
    ],
)
def test_update_run_refuses_bad_fields_and_changes_nothing(
    store: Store, fields: dict[str, object], error: type[Exception]
) -> None:
    _add(store, _run("r1", outcome="running"))
    with pytest.raises(error):
        store.update_run("r1", exit_code=0, **fields)
    assert store.get_run("r1") == _run("r1", outcome="running")


def test_update_run_of_an_unknown_id_raises_key_error(store: Store) -> None:
    with pytest.raises(KeyError):
        store.update_run("nope", outcome="ok")


def test_add_run_refuses_a_duplicate_id_and_an_unknown_outcome(store: Store) -> None:
    _add(store, _run("r1"))
    with pytest.raises(ValueError, match="already recorded"):
        _add(store, _run("r1"))
    with pytest.raises(ValueError, match="unknown outcome"):
        _add(store, _run("r2", outcome="succeeded"))


def test_add_runs_records_every_row_and_names_an_id_already_recorded(store: Store) -> None:
    rows = [_run(f"r{i}", outcome="pending", task=f"t{i}") for i in range(5)]
    with store.transaction() as txn:
        txn.add_runs(rows)
    assert [store.get_run(r.id) for r in rows] == rows
    fresh = [_run("r7", task="t7"), _run("r3", task="t3"), _run("r8", task="t8")]
    with (
        pytest.raises(ValueError, match="run 'r3' is already recorded"),
        store.transaction() as txn,
    ):
        txn.add_runs(fresh)
    assert store.get_run("r7") is None and store.get_run("r8") is None  # rolled back
    assert store.get_run("r3") == rows[3]
    with pytest.raises(ValueError, match="unknown outcome"), store.transaction() as txn:
        txn.add_runs([_run("r9"), _run("r10", outcome="succeeded")])
    assert store.get_run("r9") is None


def test_naive_or_fractional_occurrences_are_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="aware"):
        _add(store, _run("r1", occurrence=datetime(2026, 8, 3, 9, 0)))
    with pytest.raises(ValueError, match="whole second"):
        _add(store, _run("r1", occurrence=T0 + timedelta(microseconds=5)))
    with pytest.raises(ValueError, match="aware"), store.transaction() as txn:
        txn.put_state(TaskState("backup", "fp", datetime(2026, 8, 3, 9, 0)))


# --- transactions ---------------------------------------------------------------------------


def test_an_exception_rolls_the_whole_transaction_back(store: Store) -> None:
    with pytest.raises(RuntimeError, match="boom"), store.transaction() as txn:
        txn.put_state(TaskState("backup", "fp", T0))
        txn.add_run(_run("r1"))
        raise RuntimeError("boom")
    assert store.states() == {}
    assert store.history() == []


def test_a_txn_is_dead_after_its_block_and_transactions_do_not_nest(store: Store) -> None:
    with store.transaction() as txn:
        with pytest.raises(RuntimeError, match="already open"), store.transaction():
            pass
        with pytest.raises(RuntimeError, match="already open"):
            store.update_run("r1", outcome="ok")
    with pytest.raises(RuntimeError, match="has ended"):
        txn.get_state("backup")


def test_reads_inside_a_transaction_see_its_writes(store: Store) -> None:
    with store.transaction() as txn:
        txn.add_run(_run("r1"))
        assert store.get_run("r1") is not None


def test_threads_sharing_one_store_lose_no_update(store: Store) -> None:
    def bump() -> None:
        for _ in range(25):
            with store.transaction() as txn:
                state = txn.get_state("counter")
                total = 0 if state is None else state.missed_total
                txn.put_state(TaskState("counter", "fp", T0, missed_total=total + 1))

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.states()["counter"].missed_total == 100


# --- the file -------------------------------------------------------------------------------


def test_database_and_its_wal_are_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        with Store.open(tmp_path) as store:
            _add(store, _run("r1"))
            for name in (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm"):
                assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
    finally:
        os.umask(old)


def test_connection_uses_wal_full_sync_and_a_30_s_busy_timeout(store: Store) -> None:
    assert _raw_value(store.path, "PRAGMA journal_mode") == "wal"
    conn = store._conn  # per-connection settings can only be read on the connection itself
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000


@pytest.mark.parametrize("dangling", [False, True])
def test_a_symlink_planted_at_state_db_is_refused(tmp_path: Path, dangling: bool) -> None:
    target = tmp_path / "elsewhere.db"
    if not dangling:
        target.write_bytes(b"precious")
    (tmp_path / DB_NAME).symlink_to(target)
    with pytest.raises(UnsafeDirectoryError, match="symbolic link"):
        Store.open(tmp_path)
    if dangling:
        assert not target.exists()
    else:
        assert target.read_bytes() == b"precious"


def test_a_file_that_is_not_sqlite_gives_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / DB_NAME
    db.write_bytes(random.Random(1).randbytes(8192))
    with pytest.raises(CronctlError) as caught:
        Store.open(tmp_path)
    message = str(caught.value)
    assert str(db) in message
    assert "Move it aside" in message
    assert "history is lost" in message
    assert "scheduling restarts from now" in message


def test_a_damaged_database_gives_the_same_clear_error(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        _add(store, *(_run(f"r{i}", tail="x" * 500) for i in range(200)))
    db = tmp_path / DB_NAME
    data = bytearray(db.read_bytes())
    data[100:4096] = random.Random(2).randbytes(3996)  # page 1 after the header: the schema
    db.write_bytes(bytes(data))
    with pytest.raises(CronctlError, match="damaged") as caught, Store.open(tmp_path) as store:
        store.history()
    assert str(db) in str(caught.value)


def test_a_full_disk_is_reported_as_such_and_nothing_is_recorded(store: Store) -> None:
    # max_page_count makes SQLite fail exactly as on a full disk (SQLITE_FULL).
    pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
    store._conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(CronctlError, match="disk is full") as caught:
        _add(store, *(_run(f"r{i}", tail="x" * 4096) for i in range(50)))
    assert str(store.path) in str(caught.value)
    assert store.history() == []


# --- schema versions ------------------------------------------------------------------------


def test_an_empty_file_and_a_version_0_database_are_migrated_to_the_current_version(
    tmp_path: Path,
) -> None:
    conn = _raw(tmp_path / DB_NAME)  # a plain rollback-journal SQLite file, user_version 0
    conn.execute("CREATE TABLE unrelated (x)")
    conn.close()
    with Store.open(tmp_path) as store:
        _add(store, _run("r1"))
        assert store.get_run("r1") is not None
    version = _raw_value(tmp_path / DB_NAME, "PRAGMA user_version")
    assert version == SCHEMA_VERSION == len(MIGRATIONS)
    assert _raw_value(tmp_path / DB_NAME, "PRAGMA journal_mode") == "wal"


def test_migrations_run_in_order_from_the_recorded_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Store.open(tmp_path).close()  # the current version
    later = (
        ("CREATE TABLE v2 (x)", "INSERT INTO v2 VALUES ('two')"),
        ("INSERT INTO v2 SELECT x || '+three' FROM v2",),
    )
    monkeypatch.setattr(dbfile, "MIGRATIONS", dbfile.MIGRATIONS + later)
    monkeypatch.setattr(dbfile, "SCHEMA_VERSION", len(MIGRATIONS) + 2)
    Store.open(tmp_path).close()
    Store.open(tmp_path).close()  # already current: nothing runs twice
    conn = _raw(tmp_path / DB_NAME)
    try:
        assert conn.execute("SELECT x FROM v2 ORDER BY x").fetchall() == [
            ("two",),
            ("two+three",),
        ]
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) + 2
    finally:
        conn.close()


def test_a_failing_migration_leaves_the_database_at_its_old_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Store.open(tmp_path).close()
    later = (("CREATE TABLE v2 (x)",), ("CREATE TABLE v2 (x)",))  # the second one fails
    monkeypatch.setattr(dbfile, "MIGRATIONS", dbfile.MIGRATIONS + later)
    monkeypatch.setattr(dbfile, "SCHEMA_VERSION", len(MIGRATIONS) + 2)
    with pytest.raises(CronctlError, match="not a cronctl database"):
        Store.open(tmp_path)
    db = tmp_path / DB_NAME
    assert _raw_value(db, "PRAGMA user_version") == len(MIGRATIONS)
    assert _raw_value(db, "SELECT count(*) FROM sqlite_master WHERE name = 'v2'") == 0


def test_a_database_from_a_newer_cronctl_is_refused_with_upgrade_advice(tmp_path: Path) -> None:
    Store.open(tmp_path).close()
    conn = _raw(tmp_path / DB_NAME)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(CronctlError, match="Upgrade cronctl") as caught:
        Store.open(tmp_path)
    assert str(tmp_path / DB_NAME) in str(caught.value)
    assert f"schema version {SCHEMA_VERSION + 1}" in str(caught.value)


# --- several processes, and kill -9 ---------------------------------------------------------


def test_opening_waits_for_another_writer_while_switching_a_new_file_to_wal(
    tmp_path: Path,
) -> None:
    # SQLite fails at once, without its busy timeout, when the WAL switch meets a writer: this is
    # what two cronctl processes creating the file at the same moment run into.
    holder = _raw(tmp_path / DB_NAME)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("CREATE TABLE placeholder (x)")
    outcome: list[object] = []

    def open_and_close() -> None:
        try:
            Store.open(tmp_path).close()
            outcome.append("opened")
        except Exception as exc:  # reported through the list: a thread cannot raise to pytest
            outcome.append(exc)

    opener = threading.Thread(target=open_and_close)
    opener.start()
    opener.join(0.3)
    assert outcome == []  # still waiting
    holder.execute("COMMIT")
    holder.close()
    opener.join(10)
    assert outcome == ["opened"]


def test_eight_processes_creating_and_incrementing_one_counter_lose_no_update(
    tmp_path: Path,
) -> None:
    # No database yet: the workers also race to create it and to migrate it.
    workers = [
        subprocess.Popen([sys.executable, "-c", INCREMENT, str(tmp_path), f"w{n}", "50"])
        for n in range(8)
    ]
    (tmp_path / "go").touch()
    assert [worker.wait(timeout=60) for worker in workers] == [0] * 8
    with Store.open(tmp_path) as store:
        assert store.states()["counter"].missed_total == 400
        assert len(store.history(limit=1000)) == 400


def test_kill_9_mid_transaction_leaves_a_consistent_database_with_every_commit(
    tmp_path: Path,
) -> None:
    Store.open(tmp_path).close()
    rng = random.Random(3)
    committed = 0
    for round_ in range(10):
        child = subprocess.Popen(
            [sys.executable, "-c", COMMIT_FOREVER, str(tmp_path), f"k{round_}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        wanted = rng.randint(3, 25)
        seen = 0
        for line in child.stdout:
            seen = int(line)
            if seen >= wanted:
                break
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        assert seen >= wanted, "the child stopped by itself; run COMMIT_FOREVER by hand to see why"
        committed += seen
        assert _raw_value(tmp_path / DB_NAME, "PRAGMA integrity_check") == "ok"
        with Store.open(tmp_path) as store:
            rows = len(store.history(limit=100_000))
            # Every printed commit survived; a killed transaction left nothing half-done.
            assert rows >= committed
            assert store.states()["counter"].missed_total == rows
        committed = rows


# --- history and its questions --------------------------------------------------------------


def test_history_is_newest_first_by_occurrence_then_start_then_id(store: Store) -> None:
    t1 = T0 + timedelta(minutes=1)
    _add(
        store,
        _run("a", occurrence=T0),
        _run("b", occurrence=t1, started=t1 + timedelta(seconds=1)),
        _run("c", occurrence=t1, started=t1 + timedelta(seconds=2)),
        _run("d", occurrence=t1, started=t1 + timedelta(seconds=2)),
        _run("e", occurrence=T0 + timedelta(minutes=2), task="other"),
        _run("f", occurrence=t1),  # not started: after the started rows of its occurrence
    )
    assert [r.id for r in store.history()] == ["e", "d", "c", "b", "f", "a"]
    assert [r.id for r in store.history("backup")] == ["d", "c", "b", "f", "a"]
    assert [r.id for r in store.history("backup", limit=2)] == ["d", "c"]
    assert store.history(limit=0) == []
    assert store.history("nobody") == []
    with pytest.raises(ValueError, match="limit"):
        store.history(limit=-1)


def test_history_limit_defaults_to_50(store: Store) -> None:
    _add(store, *(_run(f"r{i:03}", occurrence=T0 + timedelta(minutes=i)) for i in range(60)))
    rows = store.history()
    assert len(rows) == 50
    assert rows[0].id == "r059"


def test_last_run_is_the_newest_row_that_is_not_missed_or_pending(store: Store) -> None:
    assert store.last_run("backup") is None
    _add(
        store,
        _run("old", occurrence=T0, outcome="ok"),
        _run("skip", occurrence=T0 + timedelta(minutes=1), outcome="skipped: condition"),
        _run("miss", occurrence=T0 + timedelta(minutes=2), outcome="missed"),
        _run("wait", occurrence=T0 + timedelta(minutes=3), outcome="pending"),
        _run("else", occurrence=T0 + timedelta(minutes=4), task="other"),
    )
    last = store.last_run("backup")
    assert last is not None and last.id == "skip"
    store.update_run("wait", outcome="running")
    last = store.last_run("backup")
    assert last is not None and last.id == "wait"


@pytest.mark.parametrize(
    ("oldest_first", "expected"),
    [
        ([], 0),
        (["ok"], 0),
        (["failed"], 1),
        (["failed", "ok", "failed", "timeout", "error"], 3),
        (["ok", "failed", "skipped: paused", "missed", "failed", "skipped: still running"], 2),
        (["failed", "ok", "skipped: condition"], 0),
        (["failed", "running"], 1),
        (["failed", "failed", "pending"], 2),
    ],
)
def test_consecutive_failures_count_back_to_the_latest_ok_skipping_skips_and_misses(
    store: Store, oldest_first: list[str], expected: int
) -> None:
    _add(
        store,
        *(
            _run(f"r{i}", occurrence=T0 + timedelta(minutes=i), outcome=outcome)
            for i, outcome in enumerate(oldest_first)
        ),
        _run("x", occurrence=T0 + timedelta(hours=1), outcome="failed", task="other"),
    )
    assert store.consecutive_failures("backup") == expected


def test_unfinished_runs_are_this_hosts_pending_and_running_rows(store: Store) -> None:
    _add(
        store,
        _run("p", occurrence=T0, outcome="pending", pid=10),
        _run("r", occurrence=T0 + timedelta(minutes=1), outcome="running", pid=11),
        _run("done", occurrence=T0 + timedelta(minutes=2), outcome="ok"),
        _run("theirs", occurrence=T0, outcome="running", host="h2"),
    )
    assert [r.id for r in store.unfinished_runs("h1")] == ["r", "p"]
    assert [r.id for r in store.unfinished_runs("h2")] == ["theirs"]
    store.update_run("r", outcome="error", message="cronctl died")
    assert [r.id for r in store.unfinished_runs("h1")] == ["p"]


def test_prune_deletes_finished_rows_older_than_the_cutoff(store: Store) -> None:
    old = T0 - timedelta(days=30)
    _add(
        store,
        _run("old-ok", occurrence=old),
        _run("old-missed", occurrence=old, outcome="missed"),
        _run("old-running", occurrence=old, outcome="running"),
        _run("at-cutoff", occurrence=T0),
        _run("new", occurrence=T0 + timedelta(minutes=1)),
    )
    assert store.prune(T0) == 2
    assert {r.id for r in store.history()} == {"old-running", "at-cutoff", "new"}
    assert store.prune(T0 + timedelta(microseconds=1)) == 1  # at-cutoff is now older
    assert {r.id for r in store.history()} == {"old-running", "new"}


def test_rows_round_trip_through_history_unchanged(store: Store) -> None:
    run = _run("r1", started=T0, ended=T0 + timedelta(seconds=1), tail="é" * 100, pid=3)
    _add(store, run, replace(run, id="r2", task="other"))
    assert store.history("backup") == [run]


def test_a_version_1_database_gains_trigger_and_attempt_and_keeps_its_rows(tmp_path: Path) -> None:
    conn = _raw(tmp_path / DB_NAME)
    for statement in MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute(
        "INSERT INTO runs (id, task, occurrence, outcome, host) "
        "VALUES ('old', 'a', '2026-08-03T09:00:00Z', 'ok', 'h')"
    )
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    with Store.open(tmp_path) as store:
        old = store.get_run("old")
        _add(store, replace(_run("new"), trigger="manual", attempt=3))
        new = store.get_run("new")
    assert old is not None and (old.trigger, old.attempt) == ("schedule", 1)
    assert new is not None and (new.trigger, new.attempt) == ("manual", 3)


def test_run_ids_of_one_minute_do_not_collide() -> None:
    """The id is state.db's key and the fleet store's: a collision failed a whole run's
    planning (it happened with six random hex digits, n^2 / 2^25 a run)."""
    import re

    from cronctl.run.context import new_run_id

    minute = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)
    ids = [new_run_id(minute) for _ in range(200_000)]
    assert all(re.fullmatch(r"20260803T0900Z-[0-9a-f]{16}", i) for i in ids[:100])
    assert len(set(ids)) == len(ids)  # 2^24 values would hold ~1,200 collisions here
