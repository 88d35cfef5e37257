"""Each run is recorded the moment it ends, whatever its siblings are doing
(docs/guarantees.md, Records): a quick task beside a slow one that waits for the test."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.helpers import Cli, read_until, reaped, wait_for, write_schedule
from tests.run.test_work import clock_from

T0 = "2026-08-03T09:00:00Z"
T1 = "2026-08-03T09:01:00Z"


def _quick_and_slow(tmp_path: Path, *more: str) -> Path:
    """`quick` prints and ends; `slow` touches `started`, then waits while `gate` exists."""
    gate = tmp_path / "gate"
    gate.write_text("")
    slow = f"touch {tmp_path / 'started'}; while [ -e {gate} ]; do sleep 0.05; done"
    tasks = [
        f'name = "slow"\nevery_minute = true\ncommand = "{slow}"',
        'name = "quick"\nevery_minute = true\ncommand = "echo quick says hi"',
        *more,
    ]
    write_schedule(tmp_path / "schedules.toml", tasks)
    return gate


def _outcome(cli: Cli, task: str) -> str | None:
    runs = json.loads(cli("history", "--json", "--task", task).stdout)["runs"]
    return runs[0]["outcome"] if runs else None


def test_a_quick_run_is_recorded_while_a_slow_one_of_the_same_minute_runs(
    cli: Cli, tmp_path: Path
) -> None:
    gate = _quick_and_slow(tmp_path)
    run = cli.popen("run", "--now", T0)
    try:
        wait_for((tmp_path / "started").exists, "slow to start")
        # Before, the quick run stayed "running" in every view until the slow one ended.
        wait_for(lambda: _outcome(cli, "quick") == "ok", "quick's record")
        status = json.loads(cli("status", "--json").stdout)["tasks"]
        last = {t["name"]: (t["last_run"] or {}).get("outcome") for t in status}
        assert last == {"quick": "ok", "slow": "running"}
        # `logs -f` of the ended run prints it and returns (before: it followed until the
        # slow task ended, and the timeout here failed the test).
        follow = cli("logs", "quick", "-f")
        assert follow.returncode == 0, follow.stderr
        assert "quick says hi" in follow.stdout
        assert run.poll() is None  # all of it while the slow one still runs
    finally:
        gate.unlink()
        _, err = run.communicate(timeout=60)
    assert run.returncode == 0, err


def test_kill_9_of_run_while_a_slow_task_runs_keeps_the_quick_tasks_outcome(
    cli: Cli, tmp_path: Path
) -> None:
    gate = _quick_and_slow(tmp_path)
    run = cli.popen("run", "--now", T0)
    wait_for((tmp_path / "started").exists, "slow to start")
    # The quick task's process has ended once its record says so; before, it never did
    # while the slow one ran, and the kill came after the wait gave up.
    wait_for(lambda: _outcome(cli, "quick") == "ok", "quick's record")
    os.kill(run.pid, signal.SIGKILL)  # cronctl alone: the tasks have process groups of their own
    run.communicate(timeout=30)
    gate.unlink()  # the orphaned slow command ends
    cli("run", "--now", T1)  # recovers what the killed run left
    db = tmp_path / "home" / "state" / "cronctl" / "state.db"
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT task, outcome, exit_code, message FROM runs WHERE occurrence = ?", (T0,)
        ).fetchall()
    found = {task: (outcome, code) for task, outcome, code, _ in rows}
    assert found["quick"] == ("ok", 0), rows  # before: error, "outcome unknown"
    assert found["slow"][0] == "error", rows  # it was running: its outcome is unknown


def test_work_verbose_prints_each_outcome_and_failure_report_as_its_run_ends(
    cli: Cli, tmp_path: Path
) -> None:
    gate = _quick_and_slow(tmp_path, 'name = "bad"\nevery_minute = true\ncommand = "exit 3"')
    pinned = clock_from("datetime(2026, 8, 3, 9, tzinfo=UTC) + timedelta(seconds=59.5)")
    worker = subprocess.Popen(
        [sys.executable, "-c", pinned, "work", "-v"],
        cwd=tmp_path, env=dict(cli.env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        with reaped(worker):
            # Either may end first: both outcomes, in any order.
            # Whole lines: a read may stop inside one.
            both = r"(?s)^(?=.*  quick  ok [0-9.]+s\n)(?=.*  bad  failed exit 3 [0-9.]+s\n)"
            got = read_until(worker, {"out": both, "err": r"task bad failed"})
            # Before, both came only as the slow task ended.
            assert re.search(r"  quick  ok [0-9.]+s\n", got["out"]), got
            assert re.search(r"  bad  failed exit 3 [0-9.]+s\n", got["out"]), got
            assert "cronctl: task bad failed (exit 3)" in got["err"], got
            assert "slow" not in got["out"].split("starting:", 1)[1].split("\n", 1)[1], got
            gate.unlink()
            rest = read_until(worker, {"out": r"slow  ok"})
            worker.send_signal(signal.SIGTERM)
            out, err = worker.communicate(timeout=30)
    finally:
        if gate.exists():
            gate.unlink()
    assert worker.returncode == 0, err
    printed = got["out"] + rest["out"] + out.decode()
    assert re.search(r"  slow  ok [0-9.]+s\n", printed), printed
    # Each outcome once: the end of the minute does not say them again.
    assert [printed.count(f"  {t}  ") for t in ("quick", "bad", "slow")] == [1, 1, 1], printed
    assert (got["err"] + err.decode()).count("task bad failed") == 1
