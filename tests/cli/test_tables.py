"""Tables on terminals of 80 and 120 columns: no name or time cut, the least useful columns
dropped first, outcomes coloured unless NO_COLOR."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
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


def _on_terminal(
    cli: Cli, *args: str, env: dict[str, str], columns: int = 80, code: str | None = None
) -> str:
    """Run with stdout on a pseudo-terminal `columns` wide (its window size set as a terminal
    sets it: no COLUMNS in the environment); return what it printed. `code`: `python -c CODE`
    instead of `python -m cronctl`, as Cli.popen_code."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    sized = {k: v for k, v in cli.env.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen(
        [sys.executable, *(["-m", "cronctl"] if code is None else ["-c", code]), *args],
        cwd=cli.cwd, stdout=follower, stderr=subprocess.DEVNULL, env={**sized, **env},
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


def _ran(cli: Cli, path: Path, tasks: list[str], hour: str) -> Path:
    """`tasks` written to `path` and run at HOUR:00 and HOUR:01 on 2026-08-03."""
    write_schedule(path, tasks)
    for minute in ("00", "01"):
        cli("run", "-f", str(path), "--now", f"2026-08-03T{hour}:{minute}:00Z")
    return path


@pytest.fixture
def ran(cli: Cli, tmp_path: Path) -> Path:
    return _ran(cli, tmp_path / "s.toml", TASKS, "09")


@pytest.mark.parametrize("command", ["list", "status", "history"])
def test_at_80_columns_no_name_or_time_is_cut(cli: Cli, ran: Path, command: str) -> None:
    when = () if command == "history" else ("--now", "2026-08-03T09:02:00Z")
    out = ANSI.sub("", _on_terminal(cli, command, "-f", str(ran), *when, env={}))
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines and max(len(line) for line in lines) <= 80, out
    words = set(out.split())
    names = {"refresh-cache"} if command == "history" else {t.split('"')[1] for t in TASKS}
    assert names <= words, out
    assert "…" not in out, out


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


# Long names, and tasks in zones of their own: what the issue saw cut at 80 columns.
LONG = [
    'name = "nightly-backup-of-the-main-database"\ncommand = "true"\ndaily_at = "01:00"\n'
    'timezone = "America/New_York"\nwithout_overlapping = "30m"\ntimeout = "1h"',
    'name = "refresh-the-search-index-cache"\ncommand = "echo x; exit 3"\nevery_minute = true',
    'name = "send-weekly-digest-to-subscribers"\ncommand = "true"\nweekly_on = [1, "09:00"]\n'
    'timezone = "Europe/Berlin"\ntimeout = "10m"',
]
LONG_NAMES = {t.split('"')[1] for t in LONG}
# A time whole: ISO 8601 in UTC, or short (docs/commands.md, "Tables that fit"): the clock,
# after the month and day when not today, after the year too when not this year, with its
# offset (Z, -05, +01, +05:30).
TIME = re.compile(
    r"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
    r"|(?:(?:\d{4}-)?\d\d-\d\d )?\d\d:\d\d(?::\d\d)?(?:Z|[+-]\d\d(?::\d\d)?))(?=\s|$)"
)
NOW = "2026-08-03T05:02:00Z"
# `python -m cronctl` whose clock is NOW where no --now is given: `history` takes none, and
# writes its short times against today, with their year when not this year's.
AT_NOW = f"""
import sys
from cronctl.cli import ops_cmds
real = ops_cmds.parse_instant
ops_cmds.parse_instant = lambda text, flag="--now": real(text or "{NOW}", flag)
sys.argv = ["cronctl", *sys.argv[1:]]
from cronctl.cli.main import main
main()
"""


@pytest.fixture
def ran_long(cli: Cli, tmp_path: Path) -> Path:
    return _ran(cli, tmp_path / "long.toml", LONG, "05")


def _table(out: str) -> tuple[list[str], list[list[str]]]:
    """The header's column names and each row's cells (split at two spaces or more), without
    the line under the table that says which zone its times are in."""
    lines = [line.rstrip() for line in ANSI.sub("", out).splitlines() if line.strip()]
    assert lines[-1].startswith("Times in "), out
    lines = lines[:-1]
    cells = [re.split(r" {2,}", line) for line in lines]
    return cells[0], cells[1:]


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("command", ["list", "status", "history"])
def test_no_task_name_or_time_is_cut_at_80_or_120_columns(
    cli: Cli, ran_long: Path, command: str, columns: int
) -> None:
    when = () if command == "history" else ("--now", NOW)
    out = _on_terminal(cli, command, "-f", str(ran_long), *when, env={}, columns=columns)
    plain = ANSI.sub("", out)
    assert max(len(line) for line in plain.splitlines()) <= columns, out
    headers, rows = _table(out)
    ran = LONG_NAMES - {"send-weekly-digest-to-subscribers"}  # it has never run
    assert {row[0] for row in rows} == (ran if command == "history" else LONG_NAMES), out
    for header in ("LAST RUN", "NEXT RUN", "OCCURRENCE", "STARTED"):
        if header in headers:
            cells = [row[headers.index(header)] for row in rows]
            texts = [c.removesuffix(" ok").removesuffix(" failed") for c in cells]
            assert all(TIME.fullmatch(t) for t in texts if t not in ("-", "paused")), out
    assert not re.search(r"[\d:T-]…", plain), out  # no time ends in an ellipsis


def test_history_at_80_columns_keeps_exit_code_and_duration_not_the_run_id(
    cli: Cli, ran_long: Path
) -> None:
    # At NOW: against the real clock, from 2027 on, each time had its year, and the
    # duration no longer fitted.
    out = _on_terminal(cli, "history", "-f", str(ran_long), env={}, code=AT_NOW)
    headers, rows = _table(out)
    assert headers[:5] == ["TASK", "OCCURRENCE", "OUTCOME", "EXIT", "DURATION"]
    failed = next(row for row in rows if row[0] == "refresh-the-search-index-cache")
    assert failed[2:4] == ["failed", "3"]
    assert re.fullmatch(r"\d+\.\d\ds", failed[4])


def test_status_at_80_columns_shows_times_short_in_the_tasks_zone(cli: Cli, ran_long: Path) -> None:
    out = _on_terminal(cli, "status", "-f", str(ran_long), "--now", NOW, env={})
    headers, rows = _table(out)
    assert headers[:4] == ["TASK", "LAST RUN", "OUTCOME", "NEXT RUN"], out
    by_name = {row[0]: row for row in rows}
    # 05:00Z is 01:00 in New York (EDT), and today there: shown without its date; the digest
    # runs next today (Monday 2026-08-03) at 09:00 Berlin time (CEST).
    nightly = by_name["nightly-backup-of-the-main-database"]
    assert nightly[1:4] == ["01:00-04", "ok", "08-04 01:00-04"]
    assert by_name["refresh-the-search-index-cache"][1:4] == ["05:01Z", "failed", "05:03Z"]
    assert by_name["send-weekly-digest-to-subscribers"][3] == "09:00+02"


@pytest.mark.parametrize("command", ["list", "status", "history"])
def test_a_terminals_table_says_which_zone_its_times_are_in(
    cli: Cli, ran_long: Path, command: str
) -> None:
    def note(columns: int, *flags: str) -> str:
        when = () if command == "history" else ("--now", NOW)
        out = _on_terminal(
            cli, command, "-f", str(ran_long), *when, *flags, env={}, columns=columns
        )
        return ANSI.sub("", out).rstrip().splitlines()[-1]

    # Narrow: short times in each task's zone (05:00Z, 01:00-04); wide: whole UTC times.
    assert note(80) == "Times in each task's own time zone; the suffix is its UTC offset (Z: UTC)."
    assert note(250) == "Times in UTC."
    if command == "list":
        assert note(250, "--local").startswith("Times in each task's own time zone")
    piped = cli(command, "-f", str(ran_long), *(() if command == "history" else ("--now", NOW)))
    assert "Times in" not in piped.stdout + piped.stderr  # scripts read the columns alone


def test_list_at_120_columns_keeps_the_guards(cli: Cli, ran_long: Path) -> None:
    out = _on_terminal(cli, "list", "-f", str(ran_long), "--now", NOW, env={}, columns=120)
    headers, rows = _table(out)
    assert "GUARDS" in headers and "SCHEDULE" in headers, out
    guards = {row[0]: row[headers.index("GUARDS")] for row in rows}
    assert guards["nightly-backup-of-the-main-database"] == "no-overlap(30m),timeout(1h)"


def test_a_wide_terminal_and_a_pipe_keep_the_full_utc_times(cli: Cli, ran_long: Path) -> None:
    wide = _on_terminal(cli, "status", "-f", str(ran_long), "--now", NOW, env={}, columns=250)
    piped = cli("status", "-f", str(ran_long), "--now", NOW).stdout
    for out in (wide, piped):
        row = next(line for line in out.splitlines() if line.startswith("nightly-backup"))
        assert "2026-08-03T05:00:00Z" in row and "2026-08-04T05:00:00Z" in row, out
