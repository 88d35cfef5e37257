"""What `run` says about failures: as each task ends, and with notify = "change" only on news."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import Cli, write_schedule


def _at(minute: int) -> str:
    return f"2026-08-03T09:{minute:02d}:00Z"


def test_a_quick_failure_is_reported_while_a_slow_task_still_runs(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "slow"\ncommand = "for i in $(seq 150); do [ -e release ] && exit 0; '
            'sleep 0.1; done; touch gave-up"\nevery_minute = true',
            'name = "quick"\ncommand = "echo quick-broke; exit 2"\nevery_minute = true',
        ],
    )
    process = cli.popen("run", "--now", _at(0), "--json")
    assert process.stderr is not None
    first = process.stderr.readline()  # blocks until the first report is printed
    (tmp_path / "release").touch()
    assert process.stdout is not None
    # Read through the same buffered files (communicate() would skip what readline buffered).
    with process, process.stdout, process.stderr:
        stdout, rest = process.stdout.read(), first + process.stderr.read()
        process.wait(30)
    assert first.startswith("cronctl: task quick failed (exit 2)")
    assert not (tmp_path / "gave-up").exists(), "the report waited for the slow task"
    assert "| quick-broke" in rest and rest.count("task quick failed") == 1  # printed once
    assert process.returncode == 1
    outcomes = {r["task"]: r["outcome"] for r in json.loads(stdout)["runs"]}
    assert outcomes == {"slow": "ok", "quick": "failed"}  # --json still comes at the end


def test_notify_change_reports_the_first_failure_then_the_recovery_only(
    cli: Cli, tmp_path: Path
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "t"\ncommand = "echo out; [ -e healthy ]"\nevery_minute = true\n'
            'notify = "change"'
        ],
    )
    first = cli("run", "--now", _at(0))
    assert first.returncode == 1 and "cronctl: task t failed (exit 1)" in first.stderr
    second = cli("run", "--now", _at(1))
    assert second.returncode == 1 and second.stderr == ""  # exit code unchanged, no mail
    (tmp_path / "healthy").touch()
    third = cli("run", "--now", _at(2))
    assert third.returncode == 0
    assert third.stderr.strip() == "cronctl: task t recovered: ok for 2026-08-03T09:02:00Z"
    assert cli("run", "--now", _at(3)).stderr == ""
    (tmp_path / "healthy").unlink()
    fifth = cli("run", "--now", _at(4))
    assert "cronctl: task t failed (exit 1)" in fifth.stderr


def test_notify_always_reports_every_failure(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml", ['name = "t"\ncommand = "exit 1"\nevery_minute = true']
    )
    for minute in range(2):
        result = cli("run", "--now", _at(minute))
        assert "cronctl: task t failed (exit 1)" in result.stderr


def test_check_rejects_an_unknown_notify_mode(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "t"\ncommand = "true"\nhourly = true'],
        header='[defaults]\nnotify = "sometimes"\n',
    )
    result = cli("check", "--format", "json")
    [problem] = json.loads(result.stdout)["problems"]
    assert (problem["code"], problem["line"]) == ("bad-value", 2)
    assert "notify 'sometimes'" in problem["message"]
