"""Empty settings and instants at the edge of the calendar are usage errors, never a crash.

An empty value used to mean something silently: `CRONCTL_FILE=":"` scheduled nothing and
exited 0, `--state-dir ""` used the current directory, `CRONCTL_STATE_DIR=""` fell through
to /var/lib/cronctl. `--now`/`--after` near year 1 or 9999 ended in OverflowError.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import Cli, write_schedule

TASK = 'name = "beat"\ncommand = "echo beat >> beats"\nevery_minute = true'
NOW = "2026-08-03T09:00:00Z"


@pytest.fixture
def schedule(cli: Cli) -> Path:
    return write_schedule(cli.cwd / "schedules.toml", [TASK])


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--now", NOW, "--state-dir", ""],
        ["run", "--now", NOW, "--state-dir="],
        ["run", "--now", NOW, "--lock-dir", ""],
        ["run", "--now", NOW, "--file", ""],
        ["run", "--now", NOW, "-f", ""],
        ["list", "--file="],
        ["status", "--state-dir", ""],
        ["check", "-f", ""],
    ],
    ids=lambda args: " ".join(a or "''" for a in args),
)
def test_an_empty_path_flag_is_a_usage_error_naming_it(
    cli: Cli, schedule: Path, args: list[str]
) -> None:
    result = cli(*args)
    flag = next(a.partition("=")[0] for a in args if a.startswith("-") and a != "--now")
    assert result.returncode == 2, result
    assert f"{flag} was given an empty value" in result.stderr
    assert not (cli.cwd / "beats").exists()
    assert not (cli.cwd / "state.db").exists()  # `--state-dir ""` used to mean "here"


@pytest.mark.parametrize(
    "env",
    [
        {"CRONCTL_FILE": ""},
        {"CRONCTL_FILE": ":"},
        {"CRONCTL_FILE": "schedules.toml:"},
        {"CRONCTL_FILE": "schedules.toml::other.toml"},
        {"CRONCTL_STATE_DIR": ""},
        {"CRONCTL_LOCK_DIR": ""},
    ],
    ids=lambda env: " ".join(f"{k}={v!r}" for k, v in env.items()),
)
def test_an_empty_environment_value_is_a_usage_error_naming_it(
    cli: Cli, schedule: Path, env: dict[str, str]
) -> None:
    result = cli("run", "--now", NOW, env=env)
    [name] = env
    assert result.returncode == 2, result
    assert name in result.stderr
    assert not (cli.cwd / "beats").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--now", "9999-12-31T23:59:00Z"],
        ["run", "--dry-run", "--now", "0001-01-01T00:00:00Z"],
        ["run", "--now", "0001-01-01T00:00:00+01:00"],
        ["status", "--now", "9999-12-31T23:59:00-01:00"],
        ["list", "--now", "9999-12-31T00:00:00Z"],
        ["next", "beat", "--after", "9999-12-31T23:59:00Z"],
        ["next", "--cron", "0 0 * * *", "--after", "0001-01-01T00:00:00Z"],
    ],
    ids=lambda args: " ".join(args),
)
def test_an_instant_outside_the_calendar_range_is_a_usage_error(
    cli: Cli, schedule: Path, args: list[str]
) -> None:
    result = cli(*args)
    flag = "--after" if "--after" in args else "--now"
    assert result.returncode == 2, result
    assert f"{flag} '" in result.stderr
    assert "outside the years 1970-8999" in result.stderr
    assert "internal error" not in result.stderr


def test_next_stops_listing_at_the_end_of_the_range_instead_of_overflowing(
    cli: Cli, schedule: Path
) -> None:
    # 1,000 leap days from 8999 reach past year 9999: the list ends at the range instead.
    result = cli("next", "--cron", "0 0 29 2 *", "--after", "8999-12-31T23:59:00Z", "-n", "1000")
    assert result.returncode == 0, result
    lines = result.stdout.splitlines()
    assert lines[0].split()[0] == "9004-02-29T00:00:00Z"
    assert lines[-1].split()[0] == "9004-02-29T00:00:00Z"
    assert "internal error" not in result.stderr


# TOML escapes: the file holds a real NUL / ESC / line break inside the URL once parsed.
CONTROL_IN_URL = [("\\u0000", "0000"), ("\\u001b[2J", "001b"), ("\\n", "000a")]


def _with_url(cli: Cli, escaped: str) -> None:
    header = f'[cronctl]\ncoordination = "postgresql://cronctl@db/ops{escaped}x"\n'
    write_schedule(cli.cwd / "schedules.toml", [TASK], header=header)


@pytest.mark.parametrize(("escaped", "code"), CONTROL_IN_URL)
def test_a_control_character_in_coordination_is_a_located_check_error(
    cli: Cli, escaped: str, code: str
) -> None:
    _with_url(cli, escaped)
    result = cli("check")
    # Before: passed `check`, and `run` then printed the URL with the raw NUL in its errors.
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout + result.stderr
    assert f"schedules.toml:2: 'coordination' contains a control character (\\u{code})" in out
    assert "\x00" not in out and "\x1b" not in out
    assert "db/ops" not in out  # the URL (it may hold a password) is not echoed


@pytest.mark.parametrize(("escaped", "code"), CONTROL_IN_URL)
def test_run_refuses_a_control_character_in_coordination_without_printing_it(
    cli: Cli, escaped: str, code: str
) -> None:
    _with_url(cli, escaped)
    result = cli("run", "--now", NOW)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"'coordination' contains a control character (\\u{code})" in result.stderr
    assert "\x00" not in result.stdout + result.stderr
    assert "\x1b" not in result.stdout + result.stderr
    assert "db/ops" not in result.stderr
    assert not (cli.cwd / "beats").exists()


def test_a_control_character_in_the_coordination_variable_is_a_usage_error(
    cli: Cli, schedule: Path
) -> None:
    result = cli("run", "--now", NOW, env={"CRONCTL_COORDINATION": "postgresql://u@db/ops\x1b[2J"})
    # Before: "coordination store unreachable (postgresql://u@db/ops<ESC>[2J)" on stderr, raw.
    assert result.returncode == 2, result.stderr
    assert "'CRONCTL_COORDINATION' contains a control character (\\u001b)" in result.stderr
    assert "\x1b" not in result.stdout + result.stderr
    assert not (cli.cwd / "beats").exists()
