"""The "running" mark: durable before every command starts, and made ahead (by planning,
for the first wave) only for what starts at once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.helpers import Cli, wait_for, write_schedule

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)

# The command looks its own row up from outside cronctl (another process: SQLite's locks are
# per process) and writes what it found: the mark must be committed before it started.
_CHECK = """
import os, sqlite3, sys
db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True, timeout=30)
row = db.execute("SELECT outcome, started, log_path FROM runs WHERE id = ?",
                 (os.environ["CRONCTL_RUN_ID"],)).fetchone()
ok = row is not None and row[0] == "running" and row[1] is not None and row[2] is not None
open(sys.argv[2], "w").write("running" if ok else repr(row))
sys.exit(0 if ok else 1)
"""


# Holds the database's write lock in bursts while a run works, so that the commit carrying a
# batch of marks is held back: a worker that started its command before that commit ended
# would have the command find its row still "pending".
_BLOCKER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    db.execute("BEGIN IMMEDIATE")
    time.sleep(0.2)  # what is tested: a commit held back this long
    db.execute("COMMIT")
    time.sleep(0.005)  # a gap for the run's own commits
"""


def at(minutes: int) -> str:
    return (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_every_command_finds_its_row_committed_running_before_it_starts(
    cli: Cli, tmp_path: Path
) -> None:
    db = tmp_path / "home" / "state" / "cronctl" / "state.db"
    seen = tmp_path / "seen"
    seen.mkdir()
    script = tmp_path / "check.py"
    script.write_text(_CHECK)
    kinds = ["", "without_overlapping = true\n", "on_one_server = true\n"]
    tasks = [
        f'name = "t{i:02d}"\nevery_minute = true\n{kinds[i % 3]}'
        f'command = "{sys.executable} {script} {db} {seen}/t{i:02d}"'
        for i in range(24)
    ]
    header = (
        f'[cronctl]\nmax_parallel = 4\nlock_dir = "{tmp_path / "locks"}"\nlock_dir_shared = true\n'
    )
    write_schedule(tmp_path / "schedules.toml", tasks, header)
    for minute in (0, 1):
        blocker = None
        if minute == 1:  # the database exists now: hold its commits back
            blocker = subprocess.Popen([sys.executable, "-c", _BLOCKER, str(db), "3"])
        result = cli("run", "--now", at(minute), "--json")
        if blocker is not None:
            blocker.wait(timeout=30)
        assert result.returncode == 0, result.stdout + result.stderr
        outcomes = [r["outcome"] for r in json.loads(result.stdout)["runs"]]
        assert outcomes == ["ok"] * 24
        assert sorted(p.read_text() for p in seen.iterdir()) == ["running"] * 24
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT outcome, started FROM runs").fetchall()
    assert len(rows) == 48 and all(o == "ok" and s for o, s in rows)


def test_a_crash_in_a_slow_first_wave_leaves_the_queue_not_run_and_runs_nothing_twice(
    cli: Cli, tmp_path: Path
) -> None:
    """Marks go ahead only for the wave that starts at once, and for later waves only while
    commands end quickly: after a kill -9 the queued rows say "did not run", the started ones
    "outcome unknown", and none runs again."""
    gate = tmp_path / "gate"  # the slow commands wait while it exists
    started = tmp_path / "started"
    started.mkdir()
    slow = f'command = "touch {started}/$CRONCTL_TASK; while [ -e {gate} ]; do sleep 0.05; done"'
    quick = f'command = "touch {started}/$CRONCTL_TASK"'
    tasks = [f'name = "a{i}"\nevery_minute = true\n{slow if i < 2 else quick}' for i in range(6)]
    write_schedule(tmp_path / "schedules.toml", tasks, "[cronctl]\nmax_parallel = 2\n")
    assert cli("run", "--now", at(0)).returncode == 0  # no gate yet: every command ends at once
    for path in started.iterdir():
        path.unlink()
    gate.write_text("")
    proc = cli.popen("run", "--now", at(1))
    wait_for(lambda: len(list(started.iterdir())) >= 2, "the first wave to start")
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    gate.unlink()  # the orphaned slow commands end
    after = cli("run", "--now", at(1))
    assert after.returncode == 1, after.stderr  # what the crash interrupted is reported
    db = tmp_path / "home" / "state" / "cronctl" / "state.db"
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT task, outcome, message FROM runs WHERE occurrence = ?", (at(1),)
        ).fetchall()
    assert {outcome for _, outcome, _ in rows} == {"error"}
    messages = {task: message for task, _, message in rows}
    assert sorted(p.name for p in started.iterdir()) == ["a0", "a1"]  # nothing ran again
    assert {t: ("unknown" in m) for t, m in messages.items()} == {
        "a0": True,
        "a1": True,
        "a2": False,
        "a3": False,
        "a4": False,
        "a5": False,
    }
    assert all("did not run" in messages[f"a{i}"] for i in range(2, 6))
    # The killed run's reserved space (all zeros) went with the recovery.
    assert list((db.parent / "unsaved").iterdir()) == []
