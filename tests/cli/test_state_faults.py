"""State and records under faults (issue 9): real processes against one state.db."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cronctl.core.cronexpr import minute_floor
from cronctl.edge.files import load_paths
from cronctl.edge.store import Store
from cronctl.execute import RunContext, real_clock
from cronctl.work import Worker
from tests.helpers import REPO_ROOT, clean_env, write_schedule

# Each task records its run id, then outlives the next virtual minute boundary (a virtual
# minute lasts 0.25 s), so the ticks' store connections overlap inside the `work` process.
SPANNING = (
    'name = "{name}"\nevery_minute = true\n'
    "command = 'echo $CRONCTL_RUN_ID >> \"{ledger}\"; sleep {sleep}'"
)


class FastClock:
    """Virtual time for `work`: every wait lasts `real_s` and moves the clock to the boundary."""

    def __init__(self, start: datetime, stop: threading.Event, real_s: float) -> None:
        self.now = start
        self._stop = stop
        self._real_s = real_s

    def __call__(self) -> datetime:
        return self.now

    def wait(self, seconds: float) -> bool:
        if self._stop.wait(self._real_s):
            time.sleep(1.5)  # the tasks started finish on their own: no SIGTERM at shutdown
            return True
        self.now += timedelta(seconds=seconds)
        return False


def _readers(state: Path, schedule: Path, home: Path, stop: threading.Event) -> list[int]:
    """Other cronctl processes reading (and dry-running) the same store until stopped."""
    env = clean_env(home, {"CRONCTL_STATE_DIR": str(state)})
    commands = (["status"], ["history", "--limit", "5"], ["run", "--dry-run"])
    codes: list[int] = []
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
    return codes


def test_work_with_overlapping_ticks_and_readers_keeps_the_database_sound(tmp_path: Path) -> None:
    state, ledger = tmp_path / "state", tmp_path / "ledger"
    tasks = [
        SPANNING.format(name=f"t{i}", ledger=ledger, sleep=sleep)
        for i, sleep in enumerate((0.6, 1.1, 0.3))
    ]
    schedule = write_schedule(tmp_path / "s.toml", tasks)
    stop = threading.Event()
    # In the past, so every tick is a plain present-day run for cronctl.
    clock = FastClock(minute_floor(datetime.now(UTC)) - timedelta(hours=3), stop, 0.25)
    ctx = RunContext(
        state_dir=state,
        lock_dir=state / "locks",
        host="test",
        pid=os.getpid(),
        env=clean_env(tmp_path),
        clock=real_clock,
    )
    worker = Worker(
        load=lambda: load_paths([schedule]),
        paths=lambda: [schedule],
        ctx=ctx,
        report=lambda _report: None,
        grace_s=10,
        clock=clock,
        wait=clock.wait,
    )
    readers_done = threading.Event()
    codes: list[int] = []

    def read() -> None:
        while not ledger.exists() and not stop.is_set():
            time.sleep(0.05)
        codes.extend(_readers(state, schedule, tmp_path / "home", readers_done))

    reader = threading.Thread(target=read)
    reader.start()
    timer = threading.Timer(10.0, stop.set)
    timer.start()
    try:
        exit_code = worker.serve()
    finally:
        stop.set()
        readers_done.set()
        reader.join(30)
    assert exit_code == 0
    assert codes and set(codes) <= {0}, codes
    conn = sqlite3.connect(state / "state.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    ran = ledger.read_text().split()
    assert len(ran) > 30
    with Store.open(state) as store:
        outcomes = {r.id: r.outcome for r in store.history(limit=100_000)}
    assert all(outcomes.get(run_id) == "ok" for run_id in ran), [
        (run_id, outcomes.get(run_id)) for run_id in ran if outcomes.get(run_id) != "ok"
    ]


def _fast_worker(tmp_path: Path, schedule: Path, stop: threading.Event) -> tuple[Worker, FastClock]:
    clock = FastClock(minute_floor(datetime.now(UTC)) - timedelta(hours=3), stop, 0.1)
    state = tmp_path / "state"
    ctx = RunContext(
        state_dir=state,
        lock_dir=state / "locks",
        host="test",
        pid=os.getpid(),
        env=clean_env(tmp_path),
        clock=real_clock,
    )
    worker = Worker(
        load=lambda: load_paths([schedule]),
        paths=lambda: [schedule],
        ctx=ctx,
        report=lambda _report: None,
        grace_s=5,
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
        while not ledger.exists() or len(ledger.read_text().split()) < 2:
            time.sleep(0.02)
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
