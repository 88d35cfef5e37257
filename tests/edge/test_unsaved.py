"""Results kept aside when state.db cannot take them: one reserved slot file per run."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cronctl.edge.state import unsaved
from cronctl.errors import UnsafeDirectoryError
from tests.helpers import reaped

RESULT: dict[str, object] = {
    "outcome": "ok",
    "exit_code": 0,
    "started": datetime(2026, 8, 3, 9, 1, 0, 250000, tzinfo=UTC),
    "ended": datetime(2026, 8, 3, 9, 1, 2, tzinfo=UTC),
    "tail": "fin ✓",
}


@pytest.fixture
def state(tmp_path: Path) -> Path:
    directory = tmp_path / "state"
    directory.mkdir(mode=0o700)
    return directory


def _files(state: Path) -> list[str]:
    return sorted(p.name for p in (state / unsaved.DIR_NAME).iterdir())


def test_the_space_is_reserved_up_front_and_released_when_nothing_was_kept(state: Path) -> None:
    reserved = unsaved.reserve(state, ["a", "b", "c"])
    assert reserved is not None
    (name,) = _files(state)
    assert name.startswith(f"{os.getpid()}-") and name.endswith(".slots")
    st = (state / unsaved.DIR_NAME / name).stat()
    assert st.st_size == 3 * unsaved.RESERVE and st.st_blocks * 512 >= 3 * unsaved.RESERVE
    assert st.st_mode & 0o777 == 0o600
    reserved.close()
    assert _files(state) == []


def test_a_kept_result_is_read_back_once_its_run_is_over(state: Path) -> None:
    reserved = unsaved.reserve(state, ["a", "b"])
    assert reserved is not None
    assert reserved.keep("b", RESULT) is None
    assert unsaved.Kept(state).take("b") is None  # its run is still going: not read yet
    reserved.close()
    assert len(_files(state)) == 1  # kept for the next run
    kept = unsaved.Kept(state)
    assert kept.take("b") == RESULT and kept.take("a") is None
    kept.done()
    assert _files(state) == []


def test_a_result_without_a_slot_gets_a_file_of_its_own(state: Path) -> None:
    reserved = unsaved.reserve(state, ["a"])
    assert reserved is not None
    assert reserved.keep("retry-2", RESULT) is None  # a retry's row has no slot
    reserved.close()
    assert _files(state) == ["retry-2.json"]
    assert unsaved.Kept(state).take("retry-2") == RESULT
    unsaved.forget(state, "retry-2")
    assert _files(state) == []


def test_a_crashed_runs_empty_reservation_is_removed_once_its_owner_is_gone(
    state: Path,
) -> None:
    child = f"""
import os, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from pathlib import Path
from cronctl.edge.state import unsaved
reserved = unsaved.reserve(Path(sys.argv[1]), ["a", "b"])
assert reserved is not None
os._exit(0)  # dies without closing it, as kill -9 would
"""
    subprocess.run([sys.executable, "-c", child, str(state)], check=True)
    assert len(_files(state)) == 1
    kept = unsaved.Kept(state)
    assert kept.take("a") is None
    kept.done()
    assert _files(state) == []


def test_another_live_runs_reservation_is_left_alone(state: Path) -> None:
    directory = state / unsaved.DIR_NAME
    directory.mkdir(mode=0o700)
    # A live process for the reservation's owner, killed below.
    with reaped(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])) as sleeper:
        other = directory / f"{sleeper.pid}-0000abcd.slots"
        other.write_bytes(b"\0" * unsaved.RESERVE)
        other.chmod(0o600)
        unsaved.Kept(state).done()
        assert other.exists()
    unsaved.Kept(state).done()
    assert not other.exists()


def test_an_older_cronctls_result_file_is_still_applied(state: Path) -> None:
    directory = state / unsaved.DIR_NAME
    directory.mkdir(mode=0o700)
    assert unsaved.keep(state, "old-run", RESULT) is None
    assert unsaved.Kept(state).take("old-run") == RESULT


def test_a_planted_link_instead_of_the_directory_is_refused(state: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (state / unsaved.DIR_NAME).symlink_to(elsewhere)
    assert unsaved.reserve(state, ["a"]) is None
    assert list(elsewhere.iterdir()) == []
    with pytest.raises(UnsafeDirectoryError):
        unsaved.Kept(state)
