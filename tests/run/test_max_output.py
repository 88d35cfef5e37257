"""max_output: a writer of 1 GB leaves a log of about the cap, and its outcome stands."""

from __future__ import annotations

import json

import pytest

from tests.helpers import Cli, write_schedule


@pytest.mark.long
def test_a_1gb_writer_leaves_a_capped_log_and_its_outcome(cli: Cli) -> None:
    command = "echo first; head -c 1G /dev/zero; echo; echo last; exit 3"
    write_schedule(
        cli.cwd / "schedules.toml",
        [f'name = "chatty"\nevery_minute = true\ncommand = {json.dumps(command)}'],
        header='[cronctl]\nmax_output = "1MB"\n',
    )
    run = cli("run", "--now", "2026-06-01T10:00:00Z", timeout=300)
    assert run.returncode == 1 and "failed (exit 3)" in run.stderr
    (log,) = cli.cwd.rglob("logs/chatty/*.log")
    size = log.stat().st_size
    assert 1024 * 1024 <= size < 1024 * 1024 + 200
    data = log.read_bytes()
    assert data.startswith(b"first\n") and data.endswith(b"\nlast\n")
    cut = 1024**3 + len("first\n\nlast\n") - 1024 * 1024
    assert f"[cronctl: {cut} bytes (".encode() in data
    (row,) = json.loads(cli("history", "--json").stdout)["runs"]
    assert row["outcome"] == "failed" and row["exit_code"] == 3


def test_a_task_cap_overrides_the_default_and_unlimited_keeps_everything(cli: Cli) -> None:
    write_schedule(
        cli.cwd / "schedules.toml",
        [
            'name = "small"\nevery_minute = true\nmax_output = "8KB"\n'
            'command = "head -c 100000 /dev/zero"',
            'name = "whole"\nevery_minute = true\nmax_output = "unlimited"\n'
            'command = "head -c 100000 /dev/zero"',
            'name = "default"\nevery_minute = true\ncommand = "head -c 100000 /dev/zero"',
        ],
        header='[cronctl]\nmax_output = "64KB"\n',
    )
    assert cli("run", "--now", "2026-06-01T10:00:00Z").returncode == 0
    sizes = {p.parent.name: p.stat().st_size for p in cli.cwd.rglob("logs/*/*.log")}
    assert 8192 <= sizes["small"] < 8192 + 200
    assert sizes["whole"] == 100000
    assert 65536 <= sizes["default"] < 65536 + 200
