"""`work --output`: each task's lines on cronctl's stdout behind its name; logs unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronctl.cli.wiring import work_reporting
from cronctl.edge.process.stream import visible
from tests.run.conftest import Drive


def test_output_lines_are_prefixed_with_the_task_and_logged_byte_for_byte(
    drive: Drive, capsys: pytest.CaptureFixture[str]
) -> None:
    schedule = drive.schedule(
        'name = "alpha"\ncommand = "echo one; echo two >&2; printf \'no-newline\'"\n'
        "every_minute = true",
        'name = "beta"\ncommand = "printf \'bell\\\\007 esc\\\\033[1m\\\\n\'; exit 3"\n'
        "every_minute = true",
    )
    ctx, report = work_reporting(drive.ctx(), verbose=False, output=True)
    result = drive.run(schedule, listener=ctx.listener)
    report(result)
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert sorted(line for line in lines if line.startswith("alpha | ")) == [
        "alpha | no-newline",
        "alpha | one",
        "alpha | two",
    ]
    assert "beta | bell^G esc^[[1m" in lines
    assert err.count("cronctl: task beta failed (exit 3)") == 1  # live, not again at the end
    beta = next(r for r in result.runs if r.task == "beta")
    assert Path(beta.log_path or "").read_bytes() == b"bell\x07 esc\x1b[1m\n"


def test_without_output_nothing_reaches_stdout(
    drive: Drive, capsys: pytest.CaptureFixture[str]
) -> None:
    schedule = drive.schedule('name = "quiet"\ncommand = "echo hidden"\nevery_minute = true')
    ctx, report = work_reporting(drive.ctx(), verbose=False, output=False)
    report(drive.run(schedule, listener=ctx.listener))
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain\ttab", "plain\ttab"),
        ("\x1b]0;title\x07", "^[]0;title^G"),
        ("cr at end\r", "cr at end"),
        ("del\x7f", "del^?"),
        ("c1\x9b", "c1\\x9b"),
    ],
)
def test_visible_shows_control_characters(raw: str, shown: str) -> None:
    assert visible(raw) == shown
