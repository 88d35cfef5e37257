"""State and records under faults: real processes against one state.db."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronctl.core.minutes import minute_floor
from cronctl.edge.schedfiles import load_paths
from cronctl.edge.state.store import Store
from cronctl.run.context import RunContext
from cronctl.run.work import Worker
from tests.helpers import REPO_ROOT, clean_env, local_context, wait_for, write_schedule

# Each task records its run id, then outlives the next virtual minute boundary (a virtual
# minute lasts 0.25 s), so the ticks' store connections overlap inside the `work` process.
SPANNING = (
    'name = "{name}"\nevery_minute = true\n'
    "command = 'echo $CRONCTL_RUN_ID >> \"{ledger}\"; sleep {sleep}'"
)


class FastClock:
    """Virtual time for `work`: every wait lasts `real_s` and moves the clock to the boundary."""

    def __init__(self, start: datetime, stop: threading.Event, real_s: float, state: Path) -> None:
        self.now = start
        self._stop = stop
        self._real_s = real_s
        self._state = state

    def __call__(self) -> datetime:
        return self.now

    def wait(self, seconds: float) -> bool:
        if self._stop.wait(self._real_s):
            # The tasks started finish on their own and are recorded: no SIGTERM at shutdown.
            wait_for(lambda: not _unfinished(self._state), "the started runs to end", 60)
            return True
        self.now += timedelta(seconds=seconds)
        return False


def _unfinished(state: Path) -> int:
    """How many runs the state database holds as pending or running (none in one that is
    missing or not a database)."""
    try:
        with contextlib.closing(sqlite3.connect(state / "state.db", timeout=30)) as db:
            query = "SELECT count(*) FROM runs WHERE outcome IN ('pending', 'running')"
            return int(db.execute(query).fetchone()[0])
    except sqlite3.DatabaseError:
        return 0


def _ids(ledger: Path) -> list[str]:
    """The run ids the tasks wrote to ``ledger`` so far."""
    return ledger.read_text().split() if ledger.exists() else []


def _readers(
    state: Path, schedule: Path, home: Path, stop: threading.Event, codes: list[int]
) -> None:
    """Other cronctl processes reading (and dry-running) the same store until stopped;
    their exit codes go to `codes` as they finish."""
    env = clean_env(home, {"CRONCTL_STATE_DIR": str(state)})
    commands = (["status"], ["history", "--limit", "5"], ["run", "--dry-run"])
    while not stop.is_set():
        for args in commands:
            done = subprocess.run(
                [sys.executable, "-m", "cronctl", *args, "-f", str(schedule)],
                env=env,
                cwd=REPO_ROOT,
                capture_output=True,
                check=False,
            )
            assert b"Traceback" not in done.stderr, done.stderr
            codes.append(done.returncode)


@pytest.mark.long
def test_work_with_overlapping_ticks_and_readers_keeps_the_database_sound(tmp_path: Path) -> None:
    state, ledger = tmp_path / "state", tmp_path / "ledger"
    tasks = [
        SPANNING.format(name=f"t{i}", ledger=ledger, sleep=sleep)
        for i, sleep in enumerate((0.6, 1.1, 0.3))
    ]
    schedule = write_schedule(tmp_path / "s.toml", tasks)
    stop = threading.Event()
    worker, _ = _fast_worker(tmp_path, schedule, stop, step=0.25, grace_s=10)
    readers_done = threading.Event()
    codes: list[int] = []

    def read() -> None:
        wait_for(lambda: ledger.exists() or stop.is_set(), "the first run", 60)
        _readers(state, schedule, tmp_path / "home", readers_done, codes)

    def enough() -> None:
        # Until 40 runs were started and the readers made two rounds meanwhile (it used to
        # be a fixed 10 s); the bound only keeps a broken `work` from hanging the test.
        def ready() -> bool:
            return stop.is_set() or (len(_ids(ledger)) >= 40 and len(codes) >= 6)

        try:
            with contextlib.suppress(AssertionError):
                wait_for(ready, "40 runs and two rounds of readers", 60)
        finally:
            stop.set()

    reader = threading.Thread(target=read)
    reader.start()
    timer = threading.Thread(target=enough)
    timer.start()
    try:
        exit_code = worker.serve()
    finally:
        stop.set()
        readers_done.set()
        reader.join(30)
        timer.join(5)
    assert exit_code == 0
    assert codes and set(codes) <= {0}, codes
    conn = sqlite3.connect(state / "state.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    ran = _ids(ledger)
    assert len(ran) > 30
    with Store.open(state) as store:
        outcomes = {r.id: r.outcome for r in store.history(limit=100_000)}
    assert all(outcomes.get(run_id) == "ok" for run_id in ran), [
        (run_id, outcomes.get(run_id)) for run_id in ran if outcomes.get(run_id) != "ok"
    ]


def _fast_worker(
    tmp_path: Path, schedule: Path, stop: threading.Event, step: float = 0.1, grace_s: float = 5
) -> tuple[Worker, FastClock]:
    """A `work` in this process whose minutes pass every `step` seconds, state in tmp_path."""
    # In the past, so every tick is a plain present-day run for cronctl.
    state = tmp_path / "state"
    clock = FastClock(minute_floor(datetime.now(UTC)) - timedelta(hours=3), stop, step, state)
    ctx = local_context(tmp_path, clean_env(tmp_path))
    worker = Worker(
        load=lambda: load_paths([schedule]),
        paths=lambda: [schedule],
        ctx=ctx,
        report=lambda _report: None,
        grace_s=grace_s,
        clock=clock,
        wait=clock.wait,
    )
    return worker, clock


def test_work_stops_with_exit_2_once_when_the_database_becomes_unusable(
    tmp_path: Path, capsys: object
) -> None:
    ledger = tmp_path / "ledger"
    schedule = write_schedule(
        tmp_path / "s.toml", [SPANNING.format(name="t", ledger=ledger, sleep=0)]
    )
    stop = threading.Event()
    worker, _ = _fast_worker(tmp_path, schedule, stop)
    db = tmp_path / "state" / "state.db"

    def damage() -> None:
        wait_for(lambda: len(_ids(ledger)) >= 2, "two runs", 60)
        for name in ("state.db", "state.db-wal", "state.db-shm"):
            (db.parent / name).unlink(missing_ok=True)
        db.write_bytes(b"this is not a database, " * 400)

    saboteur = threading.Thread(target=damage)
    saboteur.start()
    guard = threading.Timer(20.0, stop.set)  # the test never hangs, even if work does not stop
    guard.start()
    try:
        exit_code = worker.serve()
    finally:
        guard.cancel()
        saboteur.join(5)
    assert not stop.is_set(), "work kept ticking on a database that is not one"
    assert exit_code == 2
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    lines = [line for line in err.splitlines() if "stopping: " in line]
    assert len(lines) == 1, err
    assert str(db) in lines[0] and "Move it aside" in lines[0]


def test_work_refuses_to_start_on_a_database_that_is_not_one(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "state.db").write_bytes(b"garbage " * 1000)
    schedule = write_schedule(tmp_path / "s.toml", [SPANNING.format(name="t", ledger="x", sleep=0)])
    done = subprocess.run(
        [sys.executable, "-m", "cronctl", "work", "-f", str(schedule)],
        env=clean_env(tmp_path, {"CRONCTL_STATE_DIR": str(state)}),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{state / 'state.db'}: the state database is damaged" in done.stderr


# --- recovery ---------------------------------------------------------------------------------


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _open_row(state: Path, run_id: str, host: str, started: datetime) -> None:
    from cronctl.core.runs import RunRow

    state.mkdir(mode=0o700, exist_ok=True)
    with Store.open(state) as store, store.transaction() as txn:
        txn.add_run(
            RunRow(
                run_id,
                "t",
                minute_floor(started),
                "running",
                host,
                pid=_dead_pid(),
                started=started,
            )
        )


def _no_tasks() -> object:
    from cronctl.core.model import Schedule, Settings

    return Schedule(files=(), tasks=(), problems=(), settings=Settings())


_EMPTY: Any = _no_tasks()


def _ctx(tmp_path: Path, host: str = "test") -> RunContext:
    return local_context(tmp_path, clean_env(tmp_path), host)


def test_recovery_never_overwrites_an_end_its_owner_recorded_meanwhile(
    tmp_path: Path, monkeypatch: object
) -> None:
    from cronctl.edge.process import procs
    from cronctl.run import recovery

    state = tmp_path / "state"
    _open_row(state, "r1", "test", datetime.now(UTC))

    def owner_finishes_then_exits(pid: int) -> bool:
        # Between recovery's read and its write, the owner records `ok` and exits.
        with Store.open(state) as store:
            store.update_run("r1", outcome="ok", exit_code=0)
        return False

    # recovery asks procs.alive when it looks at each open row
    monkeypatch.setattr(procs, "alive", owner_finishes_then_exits)  # type: ignore[attr-defined]
    with Store.open(state) as store:
        closed = recovery.recover(store, _ctx(tmp_path), _EMPTY)
        row = store.get_run("r1")
    assert closed == []
    assert row is not None and (row.outcome, row.exit_code) == ("ok", 0)


def test_a_run_left_open_under_an_old_host_name_is_recovered_once_old_enough(
    tmp_path: Path,
) -> None:
    from cronctl.run import recovery

    state = tmp_path / "state"
    now = datetime.now(UTC)
    _open_row(state, "old", "old-name", now - timedelta(days=2))
    _open_row(state, "recent", "old-name", now - timedelta(hours=1))
    with Store.open(state) as store:
        closed = recovery.recover(store, _ctx(tmp_path, host="new-name"), _EMPTY)
        outcomes = {r.id: r.outcome for r in store.history()}
    assert [r.id for r in closed] == ["old"]
    assert "old-name" in (closed[0].message or "")
    assert outcomes == {"old": "error", "recent": "running"}


# --- the same occurrence twice ----------------------------------------------------------------


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "cronctl", *args],
        env=clean_env(home, {"CRONCTL_STATE_DIR": str(tmp_path / "state")}),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _ran(result: subprocess.CompletedProcess[str]) -> list[str]:
    import json

    assert result.returncode in (0, 1), result.stderr
    return [r["occurrence"] for r in json.loads(result.stdout)["runs"] if r["outcome"] == "ok"]


def test_editing_the_schedule_within_a_minute_that_ran_does_not_run_it_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "schedules.toml"
    for expression in ("*/5 * * * *", "0 * * * *", "0 9 * * *"):
        write_schedule(path, [f'name = "t"\ncron = "{expression}"\ncommand = "true"'])
        result = _cli(tmp_path, "run", "-f", str(path), "--now", "2026-08-03T09:00:20Z", "--json")
        ran = _ran(result)
        assert ran == (["2026-08-03T09:00:00Z"] if expression == "*/5 * * * *" else []), ran
    # ...and a time zone edit, after the clock stepped back three minutes.
    write_schedule(path, ['name = "t"\ncron = "0 9 * * *"\ntimezone = "UTC"\ncommand = "true"'])
    assert (
        _ran(_cli(tmp_path, "run", "-f", str(path), "--now", "2026-08-03T08:57:00Z", "--json"))
        == []
    )
    write_schedule(
        path, ['name = "t"\ncron = "0 11 * * *"\ntimezone = "Europe/Berlin"\ncommand = "true"']
    )
    assert (
        _ran(_cli(tmp_path, "run", "-f", str(path), "--now", "2026-08-03T09:00:00Z", "--json"))
        == []
    )
    # The next minute is a new one, and the new schedule applies from it.
    write_schedule(path, ['name = "t"\ncron = "* * * * *"\ncommand = "true"'])
    ran = _ran(_cli(tmp_path, "run", "-f", str(path), "--now", "2026-08-03T09:01:00Z", "--json"))
    assert ran == ["2026-08-03T09:01:00Z"]


def test_catch_up_on_one_server_never_reaches_back_past_what_claims_cover(
    tmp_path: Path,
) -> None:
    from cronctl.core.due import CLAIM_REACH, CLAIM_SWEEP_AGE, Previous, plan

    assert CLAIM_REACH < CLAIM_SWEEP_AGE  # a swept claim is never wanted again
    path = write_schedule(
        tmp_path / "s.toml",
        [
            'name = "nightly"\ncron = "0 3 * * *"\ncommand = "true"\n'
            'misfire = "catch-up"\non_one_server = true'
        ],
    )
    (nightly,) = load_paths([path]).tasks
    now = datetime(2026, 8, 13, 3, 0, tzinfo=UTC)
    back = datetime(2026, 8, 3, 3, 0, tzinfo=UTC)  # ten days down
    decided = plan(nightly, Previous(nightly.fingerprint, back), now)
    assert min(decided.run) >= now - CLAIM_REACH
    assert len(decided.run) == 7  # 7..13 August; the three older nights are missed
    assert decided.missed_count == 3


# --- --now ----------------------------------------------------------------------------------


def test_a_run_with_a_future_now_never_stops_present_day_runs_or_deletes_their_data(
    tmp_path: Path,
) -> None:
    path = write_schedule(
        tmp_path / "s.toml",
        [
            'name = "t"\ncron = "* * * * *"\ncommand = "echo hi"',
            'name = "one"\ncron = "* * * * *"\ncommand = "true"\non_one_server = true',
        ],
        header=f'[cronctl]\nlock_dir = "{tmp_path / "locks"}"\nlock_dir_shared = true\n',
    )
    # Behind the clock, so a plain run, and fixed: from the real clock, the run a minute
    # later fell in the next year at 00:02 on 1 January.
    present = datetime(2026, 8, 3, 9, 30, tzinfo=UTC)

    def run(when: datetime) -> subprocess.CompletedProcess[str]:
        stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        return _cli(tmp_path, "run", "-f", str(path), "--now", stamp, "--json")

    assert len(_ran(run(present))) == 2
    with Store.open(tmp_path / "state") as store:
        (before,) = store.history("t")
    # 00:00 of a future year: the hourly sweep would have run by this pretended time.
    future = run(datetime(2099, 1, 1, tzinfo=UTC))
    assert _ran(future) == ["2099-01-01T00:00:00Z"] * 2, future.stderr
    assert "rehearsal" in future.stderr
    # Claims are TASK@STAMP: anchor on "@", or a present-day claim taken at 20:30 matches.
    assert not list((tmp_path / "locks" / "claims").glob("*@2099*"))
    later = run(present + timedelta(minutes=1))
    assert len(_ran(later)) == 2, later.stderr  # the present-day windows did not move
    with Store.open(tmp_path / "state") as store:
        occurrences = {r.occurrence.year for r in store.history()}
        kept = store.get_run(before.id)
    assert occurrences == {present.year}
    assert kept is not None and kept.log_path and Path(kept.log_path).is_file()
    assert len(list((tmp_path / "locks" / "claims").iterdir())) == 2


# --- reading commands -----------------------------------------------------------------------


def test_reading_commands_create_nothing_and_name_the_state_dir(tmp_path: Path) -> None:
    path = write_schedule(tmp_path / "s.toml", ['name = "t"\ncron = "* * * * *"\ncommand = "true"'])
    typo = tmp_path / "stat"  # meant: state
    for args in (["status"], ["history"], ["logs", "t"]):
        result = _cli(tmp_path, *args, "--file", str(path), "--state-dir", str(typo))
        assert result.returncode == 0, (args, result.stderr)
        assert f"nothing has run with state dir {typo} yet" in result.stderr
        assert not typo.exists()
    typo.mkdir(mode=0o700)  # an existing directory without a database: the same, still empty
    result = _cli(tmp_path, "history", "-f", str(path), "--state-dir", str(typo))
    assert result.returncode == 0 and f"state dir {typo}" in result.stderr
    assert list(typo.iterdir()) == []


def test_unknown_task_names_in_logs_and_history_are_said_so(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    write_schedule(path, ['name = "t"\ncron = "* * * * *"\ncommand = "true"'])
    assert _cli(tmp_path, "run", "-f", str(path), "--now", "2026-08-03T09:00:00Z").returncode == 0
    for args in (["history", "tt"], ["logs", "tt"]):
        result = _cli(tmp_path, *args, "--file", str(path))
        assert result.returncode == 2, result.stderr
        assert "no such task 'tt'" in result.stderr
    # A task removed from the schedule is still known by its history.
    write_schedule(path, ['name = "u"\ncron = "* * * * *"\ncommand = "true"'])
    result = _cli(tmp_path, "history", "t", "-f", str(path), "--json")
    assert result.returncode == 0 and '"task": "t"' in result.stdout
    assert _cli(tmp_path, "logs", "t", "--file", str(path)).returncode == 0


# --- a result that cannot be saved ----------------------------------------------------------

HOLD_LOCK = """
import sqlite3, sys, time
from pathlib import Path
db, locked, release = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
conn = sqlite3.connect(db, isolation_level=None, timeout=10)
conn.execute("BEGIN IMMEDIATE")
locked.touch()
while not release.exists():
    time.sleep(0.01)
conn.execute("ROLLBACK")
"""


def test_a_run_whose_record_cannot_be_saved_is_reported_once_as_it_happened(
    tmp_path: Path, monkeypatch: Any
) -> None:
    from cronctl.edge.state import dbfile
    from cronctl.run.once import run_once

    # Another process holds the write lock past the busy timeout (shortened from 30 s).
    monkeypatch.setattr(dbfile, "_BUSY_TIMEOUT_MS", 300)
    started, locked, release = (tmp_path / n for n in ("started", "locked", "release"))
    command = f"touch {started}; while [ ! -e {locked} ]; do sleep 0.02; done; echo done"
    path = write_schedule(
        tmp_path / "s.toml", [f'name = "t"\ncron = "* * * * *"\ncommand = "{command}"']
    )
    schedule = load_paths([path])
    warnings: list[str] = []
    ctx = local_context(tmp_path, clean_env(tmp_path), warn=warnings.append)
    holder: list[subprocess.Popen[bytes]] = []

    def hold_when_started() -> None:
        wait_for(started.exists, "the task to start", 60)
        db = str(tmp_path / "state" / "state.db")
        holder.append(subprocess.Popen([sys.executable, "-c", HOLD_LOCK, db, locked, release]))

    spy = threading.Thread(target=hold_when_started)
    spy.start()
    t0 = datetime(2026, 8, 3, 9, 1, tzinfo=UTC)
    try:
        first = run_once(schedule, t0, ctx)
    finally:
        spy.join(10)
        release.touch()
        for process in holder:
            process.wait(10)
    (run,) = first.runs
    assert (run.outcome, run.exit_code) == ("ok", 0)
    assert first.failed == []  # not "could not run"
    (warning,) = warnings
    assert "it ran: ok, exit 0" in warning and "could not be saved" in warning
    assert "stayed locked" in warning
    second = run_once(schedule, t0 + timedelta(minutes=1), ctx)
    assert [r.occurrence for r in second.runs] == [t0 + timedelta(minutes=1)]  # not reported again
    assert len(warnings) == 1
    with Store.open(tmp_path / "state") as store:
        saved = store.get_run(run.id)
    assert saved is not None and (saved.outcome, saved.exit_code) == ("ok", 0)
    assert not list((tmp_path / "state" / "unsaved").iterdir())


# --- a database that is not cronctl's ---------------------------------------------------------

FOREIGN = {
    "foreign tables at our names": [
        "CREATE TABLE runs (x)",
        "CREATE TABLE task_state (y)",
    ],
    "our version without our tables": ["CREATE TABLE other (x)", "PRAGMA user_version = 1"],
    "wrong column types": [
        "CREATE TABLE task_state (name TEXT, fingerprint TEXT, last_occurrence BLOB, "
        "missed_total INTEGER, done INTEGER)",
        "PRAGMA user_version = 1",
    ],
    "a negative version": ["PRAGMA user_version = -3"],
    "garbage timestamps": ["UPDATE task_state SET last_occurrence = 'yesterday-ish'"],
    "garbage counts": ["UPDATE task_state SET missed_total = 'many'"],
    "garbage run values": ["UPDATE runs SET occurrence = 12, exit_code = 'zero'"],
    "an unknown outcome": ["UPDATE runs SET outcome = 'splendid'"],
    "a naive timestamp": ["UPDATE runs SET started = '2026-08-03T09:00:00'"],
}


def _foreign_db(tmp_path: Path, case: str) -> Path:
    db = tmp_path / "state" / "state.db"
    statements = FOREIGN[case]
    if statements[0].startswith("UPDATE"):
        from cronctl.core.runs import RunRow
        from cronctl.edge.state.store import TaskState

        db.parent.mkdir(mode=0o700)
        t0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)
        with Store.open(db.parent) as store, store.transaction() as txn:
            txn.put_state(TaskState("t", "fp", t0))
            txn.add_run(RunRow("r1", "t", t0, "ok", "test", started=t0, log_path="x"))
    else:
        db.parent.mkdir(mode=0o700)
    conn = sqlite3.connect(db, isolation_level=None)
    for statement in statements:
        conn.execute(statement)
    conn.close()
    return db


@pytest.mark.parametrize("case", sorted(FOREIGN))
def test_a_database_that_is_not_cronctls_is_a_clear_error(tmp_path: Path, case: str) -> None:
    from cronctl.edge.state.store import StoreUnusableError

    db = _foreign_db(tmp_path, case)
    with pytest.raises(StoreUnusableError) as caught, Store.open(db.parent) as store:
        store.states()
        store.history()
    assert str(db) in str(caught.value)
    assert "Move it aside" in str(caught.value)


@pytest.mark.parametrize("case", ["foreign tables at our names", "garbage timestamps"])
def test_commands_on_a_foreign_database_exit_2_naming_it(tmp_path: Path, case: str) -> None:
    path = write_schedule(tmp_path / "s.toml", ['name = "t"\ncron = "* * * * *"\ncommand = "true"'])
    db = _foreign_db(tmp_path, case)
    for args in (["status"], ["run", "--now", "2026-08-03T09:05:00Z"]):
        result = _cli(tmp_path, *args, "-f", str(path))
        assert result.returncode == 2, (args, result.stderr)
        assert "internal error" not in result.stderr
        assert str(db) in result.stderr and "Move it aside" in result.stderr


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Any:
    """A 1 MiB tmpfs (root only); skipped where mount is not allowed."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(disk)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_full_disk_after_the_run_is_reported_once_and_honestly(
    tmp_path: Path, tiny_disk: Path
) -> None:
    state, fill = tiny_disk / "state", tiny_disk / "fill"
    # The task fills the disk that holds state.db, then exits 0: its record cannot be saved.
    once = tmp_path / "filled"
    command = f"[ -e {once} ] || head -c 4000000 /dev/zero > {fill} 2>/dev/null; touch {once}"
    path = write_schedule(
        tmp_path / "s.toml", [f'name = "t"\ncron = "* * * * *"\ncommand = "{command}"']
    )
    args = ("run", "-f", str(path), "--state-dir", str(state), "--now")
    first = _cli(tmp_path, *args, "2026-08-03T09:01:00Z")
    assert first.returncode == 0, first.stderr  # it ran and exited 0: not a failure
    lines = [line for line in first.stderr.splitlines() if "task t" in line]
    assert len(lines) == 1, first.stderr
    assert "it ran: ok, exit 0" in lines[0] and "could not be saved" in lines[0], lines
    assert "disk is full" in lines[0]
    fill.unlink()
    second = _cli(tmp_path, *args, "2026-08-03T09:02:00Z")
    assert second.returncode in (0, 1), second.stderr
    # The result's space was reserved before the run: it was kept, and is recorded quietly.
    assert "recorded by the next run" in lines[0], lines
    assert "outcome is unknown" not in second.stderr  # one report in all
    with Store.open(state) as store:
        (kept,) = [r for r in store.history("t") if r.occurrence.minute == 1]
    assert (kept.outcome, kept.exit_code) == ("ok", 0)
    assert not list((state / "unsaved").iterdir())


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
@pytest.mark.parametrize("name", ["state.db", "state.db-wal"])
def test_a_state_database_of_another_user_is_refused(tmp_path: Path, name: str) -> None:
    from cronctl.errors import UnsafeDirectoryError

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    Store.open(state).close()
    (state / "state.db-wal").touch()
    os.chown(state / name, 12345, 12345)
    with pytest.raises(UnsafeDirectoryError, match="owned by uid 12345"):
        Store.open(state)


def test_cronctl_never_opens_a_descriptor_of_the_database_itself(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # Only SQLite may hold descriptors of state.db: closing any other one drops SQLite's locks.
    import builtins

    from cronctl.run.once import run_once

    opened: list[str] = []
    real_os_open, real_open = os.open, builtins.open

    def spy_os_open(path: Any, *args: Any, **kwargs: Any) -> int:
        opened.append(os.fspath(path) if not isinstance(path, int) else "")
        return real_os_open(path, *args, **kwargs)

    def spy_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(os.fspath(path) if not isinstance(path, int) else "")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy_os_open)
    monkeypatch.setattr(builtins, "open", spy_open)
    path = write_schedule(tmp_path / "s.toml", ['name = "t"\ncron = "* * * * *"\ncommand = "true"'])
    ctx = _ctx(tmp_path)
    for minute in range(3):  # creates, then reopens with a connection of its own still live
        with Store.open(ctx.state_dir if minute else _made(ctx.state_dir)):
            run_once(load_paths([path]), datetime(2026, 8, 3, 9, minute, tzinfo=UTC), ctx)
    assert opened  # the spy works: logs and the like are opened through it
    assert not [p for p in opened if Path(p).name.startswith("state.db")], opened


def _made(directory: Path) -> Path:
    directory.mkdir(mode=0o700, exist_ok=True)
    return directory
