"""`cronctl work` keeps its last good schedule whatever a reload raises, and says so once."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cronctl.edge.schedfiles import load_paths
from cronctl.run.work import Worker
from tests.helpers import local_context, write_schedule

GOOD = ['name = "a"\ncommand = "true"\nhourly = true']
# Each of these once escaped the reload as a Python exception and stopped `work`.
BROKEN_EDITS = {
    "timeout-overflows-timedelta": (
        '[[task]]\nname = "a"\ncommand = "true"\nhourly = true\ntimeout = "99999999999999d"\n'
    ),
    "integer-5000-digits": '[[task]]\nname = "a"\ncommand = "true"\nhourly_at = ' + "7" * 5000,
    "arrays-nested-5000-deep": "x = " + "[" * 5000 + "]" * 5000 + "\n",
    "cron-minute-5000-digits": (
        '[[task]]\nname = "a"\ncommand = "true"\ncron = "' + "5" * 5000 + ' * * * *"\n'
    ),
}


def _worker(tmp_path: Path, load: object, path: Path) -> Worker:
    ctx = local_context(tmp_path)
    return Worker(load=load, paths=lambda: [path], ctx=ctx, report=lambda _r: None)  # type: ignore[arg-type]


_BASE_NS = time.time_ns()


def _touch_later(path: Path, seconds: int) -> None:
    """Give the file a modification time `seconds` after the test started: a change or not."""
    os.utime(path, ns=(_BASE_NS, _BASE_NS + seconds * 10**9))


@pytest.mark.parametrize("edit", BROKEN_EDITS.values(), ids=BROKEN_EDITS.keys())
def test_a_reload_that_raised_keeps_the_last_good_schedule(
    tmp_path: Path, edit: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_schedule(tmp_path / "s.toml", GOOD)
    worker = _worker(tmp_path, lambda: load_paths([path]), path)
    watched = worker.watch()
    path.write_text(edit)
    _touch_later(path, 1)

    kept = worker.refresh(watched)
    again = worker.refresh(kept)

    assert [t.name for t in again.schedule.tasks] == ["a"]
    assert again.schedule is watched.schedule
    err = capsys.readouterr().err
    assert err.count("schedule change not applied") == 1, err
    assert "s.toml" in err
    assert "Traceback" not in err


def test_any_exception_from_a_load_is_reported_once_per_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_schedule(tmp_path / "s.toml", GOOD)
    good = load_paths([path])
    calls: list[int] = []

    def load() -> object:
        calls.append(1)
        if len(calls) == 1:
            return good
        raise MemoryError("no room for the schedule")

    worker = _worker(tmp_path, load, path)
    watched = worker.watch()
    for seconds in (1, 1, 2):  # one change, no change, a second change
        _touch_later(path, seconds)
        watched = worker.refresh(watched)

    assert watched.schedule is good
    err = capsys.readouterr().err
    assert err.count("MemoryError: no room for the schedule") == 2, err


def test_an_unreadable_file_list_is_reported_once_not_every_minute(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_schedule(tmp_path / "s.toml", GOOD)
    worker = _worker(tmp_path, lambda: load_paths([path]), path)
    watched = worker.watch()

    def paths() -> list[Path]:
        raise ValueError("embedded null byte")

    worker._paths = paths
    for _ in range(3):
        watched = worker.refresh(watched)

    assert [t.name for t in watched.schedule.tasks] == ["a"]
    err = capsys.readouterr().err
    assert err.count("embedded null byte") == 1, err
