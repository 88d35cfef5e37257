"""`cronctl logs --follow` streams a running task's output until the run ends; `--tail N`.

Before: `logs -f` meant `--file` (so `logs -f NAME` was an error), and there was neither
`--follow` nor `--tail`.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import Cli, write_schedule

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
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert runner.poll() is None, runner.communicate()
        found = list(logs.glob("*.log")) if logs.is_dir() else []
        if found and found[0].read_bytes():
            return found[0]
        time.sleep(0.05)
    raise AssertionError("the run never started")


def _read_until(
    stream: subprocess.Popen[str], text: str, timeout: float = 60, stderr: bool = False
) -> str:
    """What `stream`'s stdout (or stderr) printed, once it holds `text` (without waiting for
    its end)."""
    pipe = stream.stderr if stderr else stream.stdout
    assert pipe is not None
    fd = pipe.fileno()
    seen = b""
    deadline = time.monotonic() + timeout
    while text.encode() not in seen:
        assert time.monotonic() < deadline, seen
        ready, _, _ = select.select([fd], [], [], 1)
        if ready:
            chunk = os.read(fd, 4096)
            assert chunk, f"stdout closed before {text!r}: {seen!r}"
            seen += chunk
    return seen.decode()


def _follower(cli: Cli, *args: str) -> subprocess.Popen[str]:
    return cli.popen("logs", "slow", *args)


def test_follow_prints_the_output_as_it_comes_and_stops_when_the_run_ends(
    cli: Cli, gate: Path
) -> None:
    runner = cli.popen("run", "--now", NOW)
    _running_log(cli, runner)
    follower = _follower(cli, "-f")
    assert _read_until(follower, "first\n") == "first\n"
    time.sleep(0.5)
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
    _read_until(follower, "following, Ctrl-C to stop", stderr=True)
    gate.touch()
    out, err = follower.communicate(timeout=60)
    assert (follower.returncode, out) == (0, "second\n"), err
    runner.communicate(timeout=60)


def test_follow_stops_when_the_cronctl_running_the_task_is_killed(cli: Cli, gate: Path) -> None:
    runner = cli.popen("run", "--now", NOW)
    _running_log(cli, runner)
    follower = _follower(cli, "-f")
    _read_until(follower, "first\n")
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
    _read_until(follower, "first\n")
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
