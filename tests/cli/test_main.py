"""The entry point: a plain `cronctl run` skips typer, and behaves exactly as the typer command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cronctl.cli.main import parse_run
from tests.helpers import Cli, write_schedule

DEFAULTS = {
    "files": None, "now": None, "dry_run": False, "verbose": False, "strict": False,
    "as_json": False, "state_dir": None, "lock_dir": None, "host": None, "coordination": None,
}  # fmt: skip


@pytest.mark.parametrize(
    ("args", "changes"),
    [
        ([], {}),
        (["-v", "--json", "--dry-run", "--strict"],
         {"verbose": True, "as_json": True, "dry_run": True, "strict": True}),
        (["-f", "a.toml", "--file=b.toml"], {"files": [Path("a.toml"), Path("b.toml")]}),
        (["--now", "2026-08-03T09:00:00Z"], {"now": "2026-08-03T09:00:00Z"}),
        (["--state-dir", "/s", "--lock-dir=/l"], {"state_dir": Path("/s"), "lock_dir": Path("/l")}),
        (["--coordination", "postgresql://db/x"], {"coordination": "postgresql://db/x"}),
    ],
)  # fmt: skip
def test_plain_run_command_lines_are_parsed_without_typer(
    args: list[str], changes: dict[str, object]
) -> None:
    assert parse_run(args) == {**DEFAULTS, **changes}


@pytest.mark.parametrize(
    "args",
    [["--help"], ["-h"], ["--bogus"], ["-f"], ["--now"], ["-f", "--json"], ["extra"], ["--file="]],
)
def test_anything_unusual_goes_to_typer(args: list[str]) -> None:
    assert parse_run(args) is None


def test_fast_path_and_typer_command_give_the_same_result(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "a"\ncommand = "true"\nevery_minute = true',
            'name = "b"\ncommand = "exit 4"\nevery_minute = true',
        ],
    )
    args = [
        "run",
        "--dry-run",
        "--json",
        "--now",
        "2026-08-03T09:00:00Z",
        "-f",
        str(tmp_path / "schedules.toml"),
        "--state-dir",
        str(tmp_path / "s"),
    ]
    fast = cli(*args)
    from cronctl.cli.app import app

    slow = CliRunner().invoke(app, args)
    assert fast.returncode == slow.exit_code == 0
    assert json.loads(fast.stdout) == json.loads(slow.stdout)


def test_unknown_flag_gets_typers_usage_error(cli: Cli) -> None:
    result = cli("run", "--bogus")
    assert result.returncode == 2
    assert "No such option" in result.stderr and "--bogus" in result.stderr


def test_run_help_is_typers(cli: Cli) -> None:
    result = cli("run", "--help")
    assert result.returncode == 0 and "--dry-run" in result.stdout
