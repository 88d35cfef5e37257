"""The "running" mark: durable before every command starts, even when marks are committed
ahead in batches (cronctl.run.occurrence._Queue), and bounded to what starts at once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.helpers import Cli, write_schedule

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
    time.sleep(0.2)
    db.execute("COMMIT")
    time.sleep(0.005)
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
    deadline = time.monotonic() + 20
    while len(list(started.iterdir())) < 2:
        assert time.monotonic() < deadline, "the first wave never started"
        time.sleep(0.02)
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


class _CommitLog:
    """A store that only records the marks each commit carries."""

    def __init__(self) -> None:
        self.commits: list[list[str]] = []

    def update_runs(
        self, changes: list[tuple[str, dict[str, object]]], *, pending_only: bool = False
    ) -> list[BaseException | None]:
        assert pending_only
        self.commits.append([run_id for run_id, _ in changes])
        return [None] * len(changes)


def test_quick_workers_commit_the_next_marks_a_wave_at_a_time_never_two_waves_ahead(
    tmp_path: Path,
) -> None:
    """Once a wave or less of marked rows is left, a quick worker whose command has started
    commits the next marks up to two waves: each commit carries a wave (100 quick tasks on 8
    workers: 12 commits after the plan's, not 23), and no row is marked more than two waves
    ahead of those taken."""
    from cronctl.core.due import Plan
    from cronctl.edge.schedfiles import load_paths
    from cronctl.run.occurrence import _Queue, _RowMark
    from cronctl.run.planning import make_row
    from tests.helpers import local_context

    tasks = [f'name = "t{i:03d}"\nevery_minute = true\ncommand = "true"' for i in range(100)]
    schedule = load_paths([write_schedule(tmp_path / "s.toml", tasks)])
    ctx = local_context(tmp_path)
    plans = {t.name: Plan(t, run=[T0]) for t in schedule.tasks}
    by_task = {t.name: [make_row(t, T0, "pending", ctx)] for t in schedule.tasks}
    ctx.marked.update(rows[0].id for rows in list(by_task.values())[:8])  # the plan's wave
    store = _CommitLog()
    queue = _Queue(store, plans, by_task, ctx)  # type: ignore[arg-type]
    taken = 0

    def start_next() -> None:
        nonlocal taken
        unit = queue.take()
        assert unit is not None
        name, rows = unit
        taken += 1
        mark = _RowMark(queue, plans[name].task, rows[0], quick=True)
        mark()  # committed before the start, by this worker or another
        mark.started()
        marked = {run_id for commit in store.commits for run_id in commit} | ctx.marked
        ahead = [rows for _, rows in list(by_task.items())[taken:] if rows[0].id in marked]
        assert len(ahead) <= 16

    for _ in range(100):
        start_next()
    assert sum(len(c) for c in store.commits) == 92
    assert all(len(c) >= 8 for c in store.commits[:-1]), [len(c) for c in store.commits]
    assert len(store.commits) == 12  # 92 marks: 9, then 8 at a time, then the last 3
