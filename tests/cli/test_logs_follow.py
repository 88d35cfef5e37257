"""`cronctl logs --follow` streams a running task's output until the run ends; `--tail N`.

Before: `logs -f` meant `--file` (so `logs -f NAME` was an error), and there was neither
`--follow` nor `--tail`.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import Cli, read_until, wait_for, write_schedule

NOW = "2026-08-03T09:00:00Z"


@pytest.fixture
def gate(cli: Cli) -> Path:
    """A task that prints `first`, waits for the file `gate` to appear, prints `second` and
    exits 4; the path of that file."""
    gate = cli.cwd / "gate"
    command = f"echo first; while [ ! -e {gate} ]; do sleep 0.05; done; echo second; exit 4"
    write_schedule(
        cli.cwd / "schedules.toml", [f'name = "slow"\ncommand = "{command}"\nevery_minute = true']
    )
    return gate


def _running_log(cli: Cli, runner: subprocess.Popen[str]) -> Path:
    """Wait until the run has written its first line; its log."""
    logs = Path(cli.env["CRONCTL_STATE_DIR"]) / "logs" / "slow"

    def written_log() -> Path | None:
        assert runner.poll() is None, runner.communicate()
        found = list(logs.glob("*.log")) if logs.is_dir() else []
        return found[0] if found and found[0].read_bytes() else None

    return wait_for(written_log, "the run's first line", 60)


def _follower(cli: Cli, *args: str) -> subprocess.Popen[str]:
    return cli.popen("logs", "slow", *args)


def test_follow_prints_the_output_as_it_comes_and_stops_when_the_run_ends(
    cli: Cli, gate: Path
) -> None:
    runner = cli.popen("run", "--now", NOW)
    _running_log(cli, runner)
    follower = _follower(cli, "-f")
    assert read_until(follower, {"out": "first\n"})["out"] == "first\n"
    time.sleep(0.5)  # what is tested: no end while the run goes on (an absence has no event)
    assert follower.poll() is None  # still following: the run is not over
    gate.touch()
    rest, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    assert rest == "second\n"
    assert "running; following, Ctrl-C to stop" in err
    assert err.rstrip().endswith("ended: failed (exit 4)"), err
    runner.communicate(timeout=60)


def test_follow_with_tail_starts_at_the_last_lines(cli: Cli, gate: Path) -> None:
    runner = cli.popen("run", "--now", NOW)
    _running_log(cli, runner)
    follower = _follower(cli, "--follow", "--tail", "0")
    read_until(follower, {"err": "following, Ctrl-C to stop"})
    gate.touch()
    out, err = follower.communicate(timeout=60)
    assert (follower.returncode, out) == (0, "second\n"), err
    runner.communicate(timeout=60)


def test_follow_stops_when_the_cronctl_running_the_task_is_killed(cli: Cli, gate: Path) -> None:
    runner = cli.popen("run", "--now", NOW)
    _running_log(cli, runner)
    follower = _follower(cli, "-f")
    read_until(follower, {"out": "first\n"})
    runner.send_signal(signal.SIGKILL)  # kill -9: its row stays "running"
    runner.communicate(timeout=60)
    _, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    assert "the cronctl running it" in err and "is gone; its outcome is unknown" in err
    gate.touch()  # let the task, left behind in its own session, end


def test_ctrl_c_stops_following_quietly(cli: Cli, gate: Path) -> None:
    runner = cli.popen("run", "--now", NOW)
    _running_log(cli, runner)
    follower = _follower(cli, "-f")
    read_until(follower, {"out": "first\n"})
    follower.send_signal(signal.SIGINT)
    _, err = follower.communicate(timeout=60)
    assert follower.returncode == 130, err
    assert "Traceback" not in err and "Aborted" not in err and "error" not in err
    gate.touch()
    runner.communicate(timeout=60)


def test_follow_of_a_run_that_has_ended_prints_it_and_returns(cli: Cli, gate: Path) -> None:
    gate.touch()
    assert cli("run", "--now", NOW).returncode == 1
    result = cli("logs", "slow", "-f", timeout=30)
    assert (result.returncode, result.stdout) == (0, "first\nsecond\n"), result.stderr


@pytest.mark.parametrize(("count", "shown"), [("2", "c\nd\n"), ("0", ""), ("9", "a\nb\nc\nd\n")])
def test_tail_prints_only_the_last_lines(cli: Cli, count: str, shown: str) -> None:
    write_schedule(
        cli.cwd / "schedules.toml",
        ['name = "talk"\ncommand = "printf \'a\\\\nb\\\\nc\\\\nd\\\\n\'"\nevery_minute = true'],
    )
    assert cli("run", "--now", NOW).returncode == 0
    result = cli("logs", "talk", "--tail", count)
    assert (result.returncode, result.stdout) == (0, shown), result.stderr
    assert cli("logs", "talk", "-n", count).stdout == shown


def test_file_is_long_only_for_logs_and_the_old_habit_is_told_what_changed(
    cli: Cli, gate: Path
) -> None:
    gate.touch()
    path = cli.cwd / "schedules.toml"
    path.rename(cli.cwd / "other.toml")
    assert cli("run", "-f", "other.toml", "--now", NOW).returncode == 1
    assert cli("logs", "slow", "--file", "other.toml").stdout == "first\nsecond\n"
    old = cli("logs", "-f", "other.toml", "slow")
    assert old.returncode == 2
    assert "`logs -f` follows the run (as tail -f does); name the schedule with --file" in (
        old.stderr
    )
