"""`on_start = true`: `cronctl work` runs the task once each time it starts; `run` never does."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from tests.helpers import Cli, command_recorded, history, stop_worker, wait_for, write_schedule
from tests.run.test_work import NEAR_BOUNDARY, clock_from

WARM = 'name = "warm"\non_start = true\ncommand = "echo $CRONCTL_OCCURRENCE >> warm-marks"'
# The clock just after a fixed minute's start (09:00:00.5 on 3 August 2026): `work`'s first
# tick is 59.5 s away, so it never deals with the minute 09:00 itself.
AFTER_BOUNDARY = clock_from("datetime(2026, 8, 3, 9, 0, 0, 500000, tzinfo=UTC)")


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _wait_lines(path: Path, count: int) -> None:
    wait_for(lambda: len(_lines(path)) >= count, f"{count} lines in {path.name}")


def _stop(worker: subprocess.Popen[str]) -> str:
    err = stop_worker(worker)
    assert worker.returncode == 0, err
    return err


def _settled(cli: Cli, task: str, count: int, timeout: float = 30) -> list[dict[str, object]]:
    """The task's runs once `count` of them have ended (the marks come before the record)."""

    def runs() -> list[dict[str, object]]:
        found = [r for r in history(cli, "--limit", "100") if r["task"] == task]
        ended = [r for r in found if r["outcome"] not in ("pending", "running")]
        return found if len(ended) >= count else []

    return wait_for(runs, f"{count} ended runs of {task}", timeout)


def test_work_started_twice_runs_the_start_task_exactly_twice(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", [WARM])
    for starts in (1, 2):
        worker = cli.popen("work", "--grace", "5")
        _wait_lines(tmp_path / "warm-marks", starts)
        _settled(cli, "warm", starts)
        # No wait for a second start-up run: one begun before the stop is a row of its own,
        # which the outcomes below would show.
        _stop(worker)
        assert len(_lines(tmp_path / "warm-marks")) == starts
    runs = [r for r in history(cli, "--limit", "100") if r["task"] == "warm"]
    assert [(r["outcome"], r["trigger"]) for r in runs] == [("ok", "start"), ("ok", "start")]
    # Each run's occurrence is the instant its `work` started, as the task was told.
    assert sorted(_lines(tmp_path / "warm-marks")) == sorted(str(r["occurrence"]) for r in runs)


def test_a_start_task_runs_once_per_start_and_never_at_a_minute(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            WARM,
            'name = "both"\non_start = true\nevery_minute = true\n'
            'command = "echo $CRONCTL_OCCURRENCE >> both-marks"',
        ],
    )
    worker = cli.popen_code(NEAR_BOUNDARY, "work", "--grace", "5")
    try:
        # The start-up run of `both`, then its run at the (shifted) minute boundary.
        _wait_lines(tmp_path / "both-marks", 2)
        # The tick that ran `both` planned every task due at its minute before it started
        # any: a warm it ran again would be a row of that tick, interrupted or not.
        _settled(cli, "both", 2)
    finally:
        _stop(worker)
    assert len(_lines(tmp_path / "warm-marks")) == 1  # the tick did not run it again
    warm = [r["trigger"] for r in history(cli, "--limit", "100") if r["task"] == "warm"]
    assert warm == ["start"]
    both = {r["trigger"]: r for r in history(cli, "--limit", "100") if r["task"] == "both"}
    assert set(both) == {"start", "schedule"}
    scheduled = datetime.fromisoformat(str(both["schedule"]["occurrence"]))
    assert scheduled.second == 0  # the minute's occurrence, the other run's is the start's


def test_run_ignores_on_start(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [WARM, 'name = "tick"\non_start = true\nevery_minute = true\ncommand = "true"'],
    )
    now = datetime.now(UTC).replace(second=0, microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
    ran = cli("run", "--now", now, "--json")
    assert ran.returncode == 0, ran.stderr
    assert [(r["task"], r["trigger"]) for r in json.loads(ran.stdout)["runs"]] == [
        ("tick", "schedule")
    ]
    assert not (tmp_path / "warm-marks").exists()


def test_a_start_run_holds_the_overlap_lock_against_a_scheduled_run(
    cli: Cli, tmp_path: Path
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "slow"\non_start = true\nevery_minute = true\nwithout_overlapping = true\n'
            "command = \"echo $CRONCTL_TASK >> slow-marks; trap 'exit 0' TERM; sleep 60 & wait\""
        ],
    )
    # Before, with the real clock: a minute boundary passing before `now` was read made `work`
    # deal with that minute first, and `run --now` of it had nothing due.
    worker = cli.popen_code(AFTER_BOUNDARY, "work", "--grace", "5")
    try:
        _wait_lines(tmp_path / "slow-marks", 1)
        # Past the moment `work` notes the command as running: a stop before it counts none.
        wait_for(lambda: command_recorded(tmp_path, "slow"), "the holder record to name it")
        ran = cli("run", "--now", "2026-08-03T09:00:00Z", "--json")
        assert ran.returncode == 0, ran.stderr
        (run,) = json.loads(ran.stdout)["runs"]
        assert run["outcome"] == "skipped: still running"
    finally:
        err = _stop(worker)
    assert "signalled 1 running task" in err
    (start,) = [r for r in history(cli, "--limit", "100") if r["trigger"] == "start"]
    assert start["outcome"] == "interrupted"
    assert _lines(tmp_path / "slow-marks") == ["slow"]


def test_a_paused_start_task_is_recorded_paused_and_a_failure_is_reported(
    cli: Cli, tmp_path: Path
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "held"\non_start = true\npaused = true\ncommand = "touch held-ran"',
            'name = "broken"\non_start = true\ncommand = "echo it broke; exit 3"',
        ],
    )
    worker = cli.popen("work", "--grace", "5")
    try:
        _settled(cli, "broken", 1)
        _settled(cli, "held", 1)
    finally:
        err = _stop(worker)
    outcomes = {r["task"]: (r["outcome"], r["exit_code"]) for r in history(cli, "--limit", "100")}
    assert outcomes == {"held": ("skipped: paused", None), "broken": ("failed", 3)}
    assert not (tmp_path / "held-ran").exists()
    assert "task broken failed (exit 3)" in err and "it broke" in err
