"""`work -v` says something every minute, and a stop with nothing running says so
(docs/commands.md). Real `work` processes with the clock half a second before a boundary."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.helpers import Cli, read_until, reaped, write_schedule
from tests.run.test_work import clock_from

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:00Z"
# Half a second before a fixed minute (09:01 on 3 August 2026), not the real one's end: at
# 23:59 UTC on 31 December the boundary was the yearly task's, and both tests failed.
PINNED = clock_from("datetime(2026, 8, 3, 9, tzinfo=UTC) + timedelta(seconds=59.5)")


def _work_until(cli: Cli, tmp_path: Path, seen: str, *args: str) -> tuple[str, str]:
    """`work ARGS` until its stdout has a line matching `seen`; then SIGTERM; (out, err)."""
    worker = subprocess.Popen(
        [sys.executable, "-c", PINNED, "work", *args],
        cwd=tmp_path, env=dict(cli.env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    with reaped(worker):
        got = read_until(worker, {"out": seen})["out"]
        worker.send_signal(signal.SIGTERM)
        rest, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    return got + rest, err


def test_work_verbose_says_when_a_minute_had_nothing_due(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", ['name = "y"\ncommand = "true"\nyearly = true'])
    out, err = _work_until(cli, tmp_path, "nothing due", "-v")
    assert re.fullmatch(f"{STAMP}  nothing due\n", out), out
    # The SIGTERM may land while the tick that printed the line still records its minute.
    assert re.search("stopping; (nothing was running|no task running, finishing)", err), err
    assert "waiting up to" not in err, err  # before: "waiting up to 30s" with nothing running
    assert "waiting up to" not in err and "signalled 0" not in err


def test_work_verbose_says_what_starts_each_minute_then_how_it_ended(
    cli: Cli, tmp_path: Path
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "beat"\ncommand = "true"\nevery_minute = true',
            'name = "y"\ncommand = "true"\nyearly = true',
        ],
    )
    out, _ = _work_until(cli, tmp_path, "beat  ok", "-v")
    lines = out.splitlines()
    assert re.fullmatch(f"{STAMP}  starting: beat", lines[0]), out
    assert re.fullmatch(f"{STAMP}  beat  ok [0-9.]+s", lines[1]), out
    assert lines[0][:20] == lines[1][:20]  # the same minute
