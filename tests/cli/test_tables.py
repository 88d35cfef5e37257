"""Tables on an 80-column terminal: nothing cut mid-word, outcomes coloured unless NO_COLOR."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import Cli, write_schedule

TASKS = [
    'name = "sync-exchange-rates"\ncommand = "true"\ntwice_daily = [6, 18]',
    'name = "send-weekly-digest"\ncommand = "true"\ndaily_at = "09:00"\nweekdays = true\n'
    'timezone = "America/New_York"\nwithout_overlapping = "30m"\ntimeout = "1h"',
    'name = "refresh-cache"\ncommand = "exit 3"\nevery_minute = true',
]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _on_terminal(cli: Cli, *args: str, env: dict[str, str]) -> str:
    """Run with stdout on an 80x24 pseudo-terminal; return what it printed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cronctl", *args], cwd=cli.cwd, stdout=follower,
        stderr=subprocess.DEVNULL, env={**cli.env, "COLUMNS": "80", "LINES": "24", **env},
    )  # fmt: skip
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.fixture
def ran(cli: Cli, tmp_path: Path) -> Path:
    path = write_schedule(tmp_path / "s.toml", TASKS)
    for minute in ("09:00", "09:01"):
        cli("run", "-f", str(path), "--now", f"2026-08-03T{minute}:00Z")
    return path


@pytest.mark.parametrize("command", ["list", "status", "history"])
def test_at_80_columns_no_name_or_time_is_cut(cli: Cli, ran: Path, command: str) -> None:
    when = () if command == "history" else ("--now", "2026-08-03T09:02:00Z")
    out = ANSI.sub("", _on_terminal(cli, command, "-f", str(ran), *when, env={}))
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines and max(len(line) for line in lines) <= 80, out
    words = set(out.split())
    names = {"refresh-cache"} if command == "history" else {t.split('"')[1] for t in TASKS}
    assert names <= words, out
    times = re.findall(r"2026-08-0\dT[0-9:]*Z?", out)
    assert times and all(re.fullmatch(r"2026-08-0\dT\d\d:\d\d:\d\dZ", t) for t in times), out


def test_outcomes_are_coloured_on_a_terminal_unless_no_color(cli: Cli, ran: Path) -> None:
    env = {k: v for k, v in cli.env.items() if k != "NO_COLOR"}
    coloured = _on_terminal(Cli(cli.cwd, env), "history", "-f", str(ran), env={})
    assert "\x1b[31mfailed" in coloured  # red
    plain = _on_terminal(cli, "history", "-f", str(ran), env={"NO_COLOR": "1"})
    assert "failed" in plain and "\x1b[31m" not in plain


def test_list_local_shows_the_tasks_own_zone(cli: Cli, ran: Path) -> None:
    result = cli("list", "-f", str(ran), "--now", "2026-08-03T09:02:00Z", "--local")
    row = next(line for line in result.stdout.splitlines() if "send-weekly-digest" in line)
    assert "2026-08-03T09:00-04:00" in row
    assert "at 09:00, Monday through Friday (America/New_York time)" in row
