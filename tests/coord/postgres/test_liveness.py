"""Same-host liveness of an overlap lock's holder on PostgreSQL (docs/fleets-postgresql.md):
on the holder's own machine the holder row's process identities decide, as a pid in the
holder record does in file mode. Real processes, a real server stopped and started."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import cast

from cronctl.coord.postgres.adapter import PostgresCoordinator
from cronctl.coord.postgres.lock import RESTART_GRACE_S
from tests.coord.conftest import PgServer
from tests.coord.postgres.kit import LONG, T1, T2, T, alive, database_of, wait_for
from tests.helpers import write_schedule

# A task that closes every descriptor it inherited (the lock's socket among them), says it
# started, then waits for the test to let it finish.
CLOSER = (
    "import os, pathlib, time\n"
    "os.closerange(3, 65536)\n"
    "pathlib.Path('started').write_text(str(os.getpid()))\n"
    "while not os.path.exists('release'):\n"
    "    time.sleep(0.05)\n"
    "pathlib.Path('finished').open('a').write('done\\n')\n"
)


def _run(result: object, occurrence: str) -> dict[str, object]:
    """The run of ``occurrence`` in a `run --json` (the schedule has one task)."""
    runs = json.loads(result.stdout)["runs"]  # type: ignore[attr-defined]
    (row,) = [r for r in runs if r["occurrence"] == occurrence]
    assert isinstance(row, dict)
    return row


def _message(state_dir: Path, run_id: str) -> str:
    """The message column of one run in the state database."""
    with closing(sqlite3.connect(state_dir / "state.db")) as db:
        (message,) = db.execute("SELECT message FROM runs WHERE id = ?", (run_id,)).fetchone()
    return str(message)


def _started(tmp_path: Path) -> int:
    """The task's pid, once it has written it: the file exists, empty, for a moment first."""
    started = tmp_path / "started"
    wait_for(lambda: started.exists() and started.read_text().strip() != "", "the task to start")
    return int(started.read_text())


def _past_restart_grace(pg_server: PgServer) -> bool:
    grace = f"interval '{RESTART_GRACE_S} seconds'"
    ((past,),) = pg_server.sql(f"SELECT now() > pg_postmaster_start_time() + {grace}")
    return bool(past)


def test_a_holder_row_left_by_a_store_restart_does_not_block_its_own_host(
    machine: Callable[..., object], pg_url: str, pg_server: PgServer, tmp_path: Path
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [f'name = "long"\ncron = "* * * * *"\ncommand = "{LONG}"\nwithout_overlapping = true'],
    )
    a = machine("a", "run", "--now", T, background=True)
    task_pid = _started(tmp_path)
    # The task runs before cronctl names it in the row: stopping the store in between (a
    # loaded machine) left a row without the command, which the holder's machine then
    # judges by its cronctl instead.
    database = database_of(pg_url)
    wait_for(
        lambda: pg_server.sql("SELECT command_pid FROM cronctl.holders", database) == [(task_pid,)],
        "the holder row to name the command",
    )
    # The store goes away while the task runs, and the task ends meanwhile: the holder's
    # cronctl cannot delete its row, whose `seen` is from before the outage.
    pg_server.stop()
    try:
        (tmp_path / "release").touch()
        a.communicate(timeout=60)  # type: ignore[attr-defined]
        assert not alive(task_pid)
    finally:
        pg_server.start()
    (row,) = pg_server.sql("SELECT host, command_pid FROM cronctl.holders", database)
    assert row == ("a", task_pid)
    # Within the restart grace, another machine cannot tell and still counts the row as held...
    other = _run(machine("b", "run", "--json", "--now", T1), T1)
    assert other["outcome"] == "skipped: still running"
    # ...but the holder's own machine sees that its pid has exited: the next minute runs.
    mine = _run(machine("a", "run", "--json", "--now", T2), T2)
    assert mine["outcome"] == "ok", mine
    assert (tmp_path / "finished").read_text().count("done") == 2


def test_a_task_that_closed_its_descriptors_keeps_its_host_out_after_kill_9(
    machine: Callable[..., object], pg_url: str, pg_server: PgServer, tmp_path: Path
) -> None:
    command = json.dumps([sys.executable, "-c", CLOSER])
    write_schedule(
        tmp_path / "schedules.toml",
        [f'name = "long"\ncron = "* * * * *"\ncommand = {command}\nwithout_overlapping = true'],
    )
    a = cast("subprocess.Popen[str]", machine("a", "run", "--now", T, background=True))
    task_pid = _started(tmp_path)
    database = database_of(pg_url)
    wait_for(
        lambda: pg_server.sql("SELECT command_pid FROM cronctl.holders", database) == [(task_pid,)],
        "the holder row to name the command",
    )
    a.kill()  # SIGKILL
    a.communicate(timeout=30)
    assert alive(task_pid)
    store = PostgresCoordinator(pg_url, host="tester", pid=1)
    try:
        # No process holds the lock's socket any more: the server frees the advisory lock.
        wait_for(lambda: not store.overlap_held("long"), "the server to free the lock")
    finally:
        store.close()
    # The row is as old as it is after FRESH_S without a heartbeat (cronctl is dead), and no
    # server restart of another test is recent enough to count it as held meanwhile: only the
    # command's identity is left to tell that the task runs.
    wait_for(lambda: _past_restart_grace(pg_server), "the restart grace to pass", limit=60)
    pg_server.sql("UPDATE cronctl.holders SET seen = now() - interval '10 minutes'", database)
    # A dry run says what the real run then does.
    dry = _run(machine("a", "run", "--dry-run", "--json", "--now", T1), T1)
    assert dry["outcome"] == "skipped: still running", dry
    b = cast("subprocess.Popen[str]", machine("a", "run", "--json", "--now", T1, background=True))
    started = tmp_path / "started"
    wait_for(lambda: b.poll() is not None or started.read_text() != str(task_pid), "a decision")
    assert started.read_text() == str(task_pid), "a second copy started"
    out, err = b.communicate(timeout=30)
    second = _run(subprocess.CompletedProcess([], 0, out, err), T1)
    assert second["outcome"] == "skipped: still running", second
    assert f"pid {task_pid} on a" in _message(tmp_path / "a", str(second["id"]))
    (tmp_path / "release").touch()
    wait_for(lambda: not alive(task_pid), "the task to end")
    # Once the command is gone, its row holds nothing, however it got there.
    third = _run(machine("a", "run", "--json", "--now", T2), T2)
    assert third["outcome"] == "ok", third
    assert (tmp_path / "finished").read_text().count("done") == 2
