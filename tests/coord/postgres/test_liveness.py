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
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

from cronctl.coord.postgres.adapter import PostgresCoordinator
from cronctl.coord.postgres.lock import RESTART_GRACE_S
from cronctl.edge.process import procs
from tests.coord.conftest import PgServer
from tests.coord.postgres.kit import LONG, T1, T2, T, database_of
from tests.helpers import alive, wait_for, write_schedule

# A task that closes every descriptor it inherited (the lock's socket among them), says it
# started, then waits for the test to let it finish. `copies` logs each copy's start and end.
CLOSER = (
    "import os, pathlib, time\n"
    "os.closerange(3, 65536)\n"
    "pathlib.Path('copies').open('a').write('start\\n')\n"
    "pathlib.Path('started').write_text(str(os.getpid()))\n"
    "while not os.path.exists('release'):\n"
    "    time.sleep(0.05)\n"
    "pathlib.Path('finished').open('a').write('done\\n')\n"
    "pathlib.Path('copies').open('a').write('end\\n')\n"
)
#: A holder row as old as it is after FRESH_S without a heartbeat.
STALE = "UPDATE cronctl.holders SET seen = now() - interval '10 minutes'"
#: The boot id (with a pid namespace) of a machine that is not this one.
OTHER_BOOT = "0b0e8c1a-5d2f-4c3e-9a7b-000000000002/pid:[4026531836]"


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


def _leave_only_the_row(pg_server: PgServer, database: str) -> None:
    """Once the holder's cronctl is dead: wait for the server to free the advisory lock (no
    process holds the lock's socket any more) and for any server restart of another test to
    be older than the grace, then age the row as FRESH_S without a heartbeat does. Only the
    command's identity in the row is then left to tell that the task runs."""
    held = (
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    )
    wait_for(lambda: pg_server.sql(held, database) == [(0,)], "the server to free the lock")
    wait_for(lambda: _past_restart_grace(pg_server), "the restart grace to pass", timeout=60)
    pg_server.sql(STALE, database)


def _closer_left_running(
    machine: Callable[..., object], pg_url: str, pg_server: PgServer, tmp_path: Path, *args: str
) -> int:
    """The pid of a guarded CLOSER task that ``cronctl ARGS`` as host ``a`` started: once the
    holder row names it, that cronctl is killed -9 and only the row is left
    (`_leave_only_the_row`)."""
    command = json.dumps([sys.executable, "-c", CLOSER])
    write_schedule(
        tmp_path / "schedules.toml",
        [f'name = "long"\ncron = "* * * * *"\ncommand = {command}\nwithout_overlapping = true'],
    )
    holder = cast("subprocess.Popen[str]", machine("a", *args, background=True))
    database = database_of(pg_url)
    task_pid = _started(tmp_path)
    wait_for(
        lambda: pg_server.sql("SELECT command_pid FROM cronctl.holders", database) == [(task_pid,)],
        "the holder row to name the command",
    )
    holder.kill()  # SIGKILL
    holder.communicate(timeout=30)
    assert alive(task_pid)
    _leave_only_the_row(pg_server, database)
    return task_pid


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
    (row,) = pg_server.sql("SELECT host, command_pid, boot FROM cronctl.holders", database)
    assert row == ("a", task_pid, procs.boot_id())
    # Within the restart grace, another machine (another boot id: this one's processes are
    # not its own) cannot tell and still counts the row as held...
    _set_boot(pg_server, database, OTHER_BOOT)
    other = _run(machine("b", "run", "--json", "--now", T1), T1)
    assert other["outcome"] == "skipped: still running"
    # ...but the holder's own machine sees that its pid has exited: the next minute runs.
    _set_boot(pg_server, database, procs.boot_id())
    mine = _run(machine("a", "run", "--json", "--now", T2), T2)
    assert mine["outcome"] == "ok", mine
    assert (tmp_path / "finished").read_text().count("done") == 2


def test_a_task_that_closed_its_descriptors_keeps_its_host_out_after_kill_9(
    machine: Callable[..., object], pg_url: str, pg_server: PgServer, tmp_path: Path
) -> None:
    task_pid = _closer_left_running(machine, pg_url, pg_server, tmp_path, "run", "--now", T)
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


def test_exec_under_another_host_name_waits_for_a_task_whose_exec_was_killed(
    machine: Callable[..., object], pg_url: str, pg_server: PgServer, tmp_path: Path
) -> None:
    # CRONCTL_HOST may give one machine two names: the row's boot id (with the pid
    # namespace) says the holder is this machine, so its command's pid decides.
    task_pid = _closer_left_running(machine, pg_url, pg_server, tmp_path, "exec", "long")
    dry = _run(machine("b", "run", "--dry-run", "--json", "--now", T1), T1)
    assert dry["outcome"] == "skipped: still running", dry
    second = cast("subprocess.Popen[str]", machine("b", "exec", "long", background=True))
    started = tmp_path / "started"
    wait_for(lambda: second.poll() is not None or started.read_text() != str(task_pid), "exec")
    assert started.read_text() == str(task_pid), "a second copy started"
    _, err = second.communicate(timeout=30)
    assert second.returncode == 2, err
    assert f"task long is running (pid {task_pid} on a since " in err
    waiting = cast("subprocess.Popen[str]", machine("b", "exec", "long", "--wait", background=True))
    assert waiting.stderr is not None
    assert "waiting for it to end" in waiting.stderr.readline()  # it found the task running
    (tmp_path / "release").touch()
    _, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    assert (tmp_path / "copies").read_text() == "start\nend\n" * 2  # one after the other


def test_a_row_of_an_older_cronctl_counts_while_fresh_as_another_machines(
    pg_url: str, pg_server: PgServer
) -> None:
    # An older cronctl wrote the boot id bare, which cannot say in which pid namespace its
    # pids count (a container on this kernel has the same one): its row is judged by its
    # freshness, as another machine's, never by a pid that may be another process's here.
    command = subprocess.Popen([sys.executable, "-c", "input()"], stdin=subprocess.PIPE)
    store = PostgresCoordinator(pg_url, host="b", pid=1)
    database = database_of(pg_url)
    try:
        who = procs.identify(command.pid)
        assert who is not None
        store.check()  # creates the schema
        # The holder's cronctl and its command are one process here: both are alive.
        pid, start = command.pid, who.start_ticks
        values = f"'long', 'a', {pid}, now(), 0, now(), '{who.boot}', {start}, {pid}, {start}"
        columns = (
            "task, host, pid, started, backend, seen, boot, pid_start, command_pid, command_start"
        )
        insert = f"INSERT INTO cronctl.holders ({columns}) VALUES ({values})"  # noqa: S608
        pg_server.sql(insert, database)
        wait_for(lambda: _past_restart_grace(pg_server), "the restart grace to pass", timeout=60)
        pg_server.sql(STALE, database)
        # The row as this cronctl writes it: its command runs here, however old the row.
        assert store.overlap_held("long")
        assert _attempt(store) == "held"
        _set_boot(pg_server, database, who.boot.partition("/")[0])
        pg_server.sql("UPDATE cronctl.holders SET seen = now()", database)
        assert _attempt(store) == "held"
        pg_server.sql(STALE, database)
        assert not store.overlap_held("long")
        assert _attempt(store) == "acquired"
    finally:
        store.close()
        command.communicate(b"\n", timeout=30)


def _set_boot(pg_server: PgServer, database: str, boot: str) -> None:
    """Write the holder row's boot id (with the pid namespace, or bare as older cronctl)."""
    pg_server.sql(f"UPDATE cronctl.holders SET boot = '{boot}'", database)  # noqa: S608


def _attempt(store: PostgresCoordinator) -> str:
    """Try the lock of ``long`` once (a lock taken is let go at once, and its row with it)."""
    got = store.try_overlap("long", lease=None, now=datetime.now(UTC))
    if got.lock is not None:
        got.lock.release()
    return got.status
