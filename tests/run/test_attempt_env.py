"""CRONCTL_ATTEMPT is set on every attempt, the first one too (docs/commands.md)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import Cli, write_schedule

PROBE = 'name = "probe"\ncommand = "echo attempt=${CRONCTL_ATTEMPT-unset} > out.txt"\nhourly = true'


def test_the_first_attempt_has_cronctl_attempt_1(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [PROBE],
    )
    result = cli("run", "--now", "2026-03-01T10:00:00Z")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out.txt").read_text().strip() == "attempt=1"


def test_exec_has_cronctl_attempt_1(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [PROBE],
    )
    result = cli("exec", "probe")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out.txt").read_text().strip() == "attempt=1"
