"""`hosts`: a task exists for `run` only on machines whose name matches one of its globs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import Cli, write_schedule

NOW = "2026-08-03T09:00:00Z"


@pytest.fixture
def fleet_file(tmp_path: Path) -> Path:
    return write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "web-cache"\ncommand = "true"\nevery_minute = true\nhosts = ["web-*"]',
            'name = "db-vacuum"\ncommand = "true"\nevery_minute = true\nhosts = ["db-[12]", "x"]',
            'name = "everywhere"\ncommand = "true"\nevery_minute = true',
        ],
    )


def _ran(cli: Cli, *args: str, env: dict[str, str] | None = None) -> list[str]:
    result = cli("run", "--now", NOW, "--json", *args, env=env)
    assert result.returncode == 0, result.stderr
    return sorted(r["task"] for r in json.loads(result.stdout)["runs"])


def test_run_keeps_only_the_tasks_whose_hosts_match_this_machine(
    cli: Cli, fleet_file: Path
) -> None:
    assert _ran(cli, "--host", "web-7") == ["everywhere", "web-cache"]


def test_cronctl_host_names_the_machine_too(cli: Cli, fleet_file: Path) -> None:
    assert _ran(cli, env={"CRONCTL_HOST": "db-2"}) == ["db-vacuum", "everywhere"]


def test_a_machine_matching_no_pattern_runs_only_the_unrestricted_tasks(
    cli: Cli, fleet_file: Path
) -> None:
    assert _ran(cli, "--host", "db-3") == ["everywhere"]


def test_list_shows_other_hosts_tasks_as_such(cli: Cli, fleet_file: Path) -> None:
    text = cli("list", "--now", NOW, "--host", "web-1").stdout
    line = next(row for row in text.splitlines() if row.startswith("db-vacuum"))
    assert "other hosts" in line
    data = json.loads(cli("list", "--now", NOW, "--host", "web-1", "--json").stdout)
    flags = {t["name"]: (t["other_hosts"], t["hosts"]) for t in data["tasks"]}
    assert flags["db-vacuum"] == (True, ["db-[12]", "x"])
    assert flags["web-cache"] == (False, ["web-*"])
    assert flags["everywhere"] == (False, [])


@pytest.mark.parametrize(
    ("value", "code", "words"),
    [
        ("[]", "bad-hosts", "run nowhere"),
        ('["web 1"]', "bad-hosts", "can never match"),
        ('["web-[12"]', "bad-hosts", "unclosed"),
        ('"web-*"', "bad-type", "must be an array of host name patterns"),
        ("[1]", "bad-type", "must be an array of host name patterns"),
    ],
)
def test_check_rejects_bad_hosts_patterns_with_file_line_and_task(
    cli: Cli, tmp_path: Path, value: str, code: str, words: str
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [f'name = "t"\ncommand = "true"\nhourly = true\nhosts = {value}'],
    )
    result = cli("check", "--format", "json")
    assert result.returncode == 1
    [problem] = json.loads(result.stdout)["problems"]
    assert (problem["code"], problem["task"], problem["line"]) == (code, "t", 6)
    assert words in problem["message"]


def test_hosts_in_defaults_apply_to_every_task(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "t"\ncommand = "true"\nevery_minute = true'],
        header='[defaults]\nhosts = ["batch-*"]\n',
    )
    assert _ran(cli, "--host", "web-1") == []
    assert _ran(cli, "--host", "batch-1") == ["t"]
