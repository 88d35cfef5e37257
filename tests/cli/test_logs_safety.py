"""`cronctl logs` never follows a link, never blocks on a FIFO, and streams a large log.

Reproduced before: it printed a symlink's target, hung forever on a FIFO, and took 414 MB
of memory to show a 200 MB log.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import Cli, write_schedule

NOW = "2026-08-03T09:00:00Z"


@pytest.fixture
def log(cli: Cli) -> Path:
    """The log file of one real run of task `talk`."""
    write_schedule(
        cli.cwd / "schedules.toml", ['name = "talk"\ncommand = "echo hello"\nevery_minute = true']
    )
    assert cli("run", "--now", NOW).returncode == 0
    [path] = (Path(cli.env["CRONCTL_STATE_DIR"]) / "logs" / "talk").glob("*.log")
    return path


def test_logs_prints_the_output_of_the_last_run(cli: Cli, log: Path) -> None:
    result = cli("logs", "talk")
    assert result.returncode == 0, result
    assert result.stdout == "hello\n"


def test_logs_refuses_a_symlink_at_the_log_and_never_prints_its_target(
    cli: Cli, log: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("root-only-secret\n")
    log.unlink()
    log.symlink_to(secret)
    result = cli("logs", "talk")
    assert result.returncode == 2, result
    assert "symbolic link" in result.stderr
    assert "root-only-secret" not in result.stdout + result.stderr


def test_logs_refuses_a_symlinked_log_directory(cli: Cli, log: Path, tmp_path: Path) -> None:
    real = log.parent.with_name("talk.real")
    log.parent.rename(real)
    log.parent.symlink_to(real)
    result = cli("logs", "talk")
    assert result.returncode == 2, result
    assert f"{log.parent} is a symbolic link" in result.stderr
    assert "hello" not in result.stdout


def test_logs_refuses_a_fifo_at_the_log_without_blocking(cli: Cli, log: Path) -> None:
    log.unlink()
    os.mkfifo(log)
    result = cli("logs", "talk")  # the old code blocked here forever (past the 60 s bound)
    assert result.returncode == 2, result
    assert "not a regular file" in result.stderr


def test_logs_streams_a_200_mb_log_in_far_less_memory_than_its_size(
    cli: Cli, log: Path, tmp_path: Path
) -> None:
    size = 200 * 1024 * 1024
    with log.open("r+b") as f:  # sparse: written in no time, read back as real bytes
        f.truncate(size)
        f.seek(size - 4)
        f.write(b"end\n")
    with (tmp_path / "out").open("wb") as out, (tmp_path / "err").open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cronctl", "logs", "talk"],
            cwd=cli.cwd,
            env=dict(cli.env),
            stdout=out,
            stderr=err,
        )
        # wait4, not wait: the child's own peak memory comes back with its exit status.
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, (tmp_path / "err").read_text()
    assert (tmp_path / "out").stat().st_size == size
    peak = usage.ru_maxrss * 1024  # kilobytes on Linux
    # The interpreter and typer take ~40 MB; the old code held the log twice (414 MB). A
    # stream usually peaks near 30 MB, but twice in CI on a busy machine at 101 MB (not
    # understood yet): the bound still fails any code that holds the log.
    assert peak < size * 3 // 4, f"peak RSS {peak / 2**20:.0f} MB for a {size / 2**20:.0f} MB log"


def test_logs_into_a_pipe_closed_early_ends_quietly_like_cat(cli: Cli, log: Path) -> None:
    with log.open("r+b") as f:
        f.truncate(8 * 1024 * 1024)  # far more than a pipe holds
    proc = subprocess.Popen(
        [sys.executable, "-m", "cronctl", "logs", "talk"],
        cwd=cli.cwd,
        env=dict(cli.env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(6) == b"hello\n"
    proc.stdout.close()  # what `| head -1` does
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=30) == 0, err
    assert "Traceback" not in err and "error" not in err, err
