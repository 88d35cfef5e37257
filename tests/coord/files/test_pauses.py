"""Pause markers in lock_dir, with real files."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from cronctl.coord.files.pauses import clear_pause, paused_tasks, set_pause

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)


def test_pause_read_and_resume(tmp_path: Path) -> None:
    assert paused_tasks(tmp_path).get("backup") is None
    set_pause(tmp_path, "backup", reason="disk full", now=T0, host="web-1", user="ann")
    info = paused_tasks(tmp_path).get("backup")
    assert info is not None
    assert (info.reason, info.since, info.host, info.user) == ("disk full", T0, "web-1", "ann")
    assert clear_pause(tmp_path, "backup")
    assert paused_tasks(tmp_path).get("backup") is None
    assert not clear_pause(tmp_path, "backup")


def test_pausing_again_replaces_the_marker_atomically(tmp_path: Path) -> None:
    set_pause(tmp_path, "backup", reason=None, now=T0, host="a", user="ann")
    later = T0 + timedelta(hours=1)
    set_pause(tmp_path, "backup", reason="again", now=later, host="b", user="bob")
    info = paused_tasks(tmp_path).get("backup")
    assert info is not None
    assert (info.reason, info.since, info.user) == ("again", later, "bob")
    assert [p.name for p in (tmp_path / "paused").iterdir()] == ["backup.pause"]


def test_paused_tasks_lists_every_pause_from_one_directory(tmp_path: Path) -> None:
    assert paused_tasks(tmp_path) == {}
    for task in ("backup", "db:vacuum", "a.b"):
        set_pause(tmp_path, task, reason=task, now=T0, host="h", user="u")
    (tmp_path / "paused" / "stray.txt").write_text("ignored")
    paused = paused_tasks(tmp_path)
    assert sorted(paused) == ["a.b", "backup", "db:vacuum"]
    assert paused["db:vacuum"].reason == "db:vacuum"


def test_a_damaged_pause_marker_still_pauses(tmp_path: Path) -> None:
    (tmp_path / "paused").mkdir(mode=0o700)
    (tmp_path / "paused" / "backup.pause").write_text("{not json")
    info = paused_tasks(tmp_path).get("backup")
    assert info is not None
    assert (info.reason, info.since, info.host, info.user) == (None, None, None, None)
    assert list(paused_tasks(tmp_path)) == ["backup"]
