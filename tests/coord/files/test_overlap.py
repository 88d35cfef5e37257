"""Overlap locks in lock_dir, with real processes and real files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cronctl.coord.files.overlap import overlap_held, try_overlap_lock
from cronctl.coord.port import HolderInfo, Overlap
from cronctl.errors import UnsafeDirectoryError
from tests.helpers import alive, reaped, wait_for

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)


# Run in another process: try the lock and print the outcome as JSON.
TRY_LOCK = textwrap.dedent(
    """
    import json, sys
    from datetime import datetime, timedelta
    from pathlib import Path
    from cronctl.coord.files.overlap import try_overlap_lock
    lease = None if sys.argv[3] == "-" else timedelta(minutes=int(sys.argv[3]))
    result = try_overlap_lock(Path(sys.argv[1]), "backup", lease=lease,
                              now=datetime.fromisoformat(sys.argv[2]), host="other", pid=4242)
    holder = result.holder
    print(json.dumps({"status": result.status,
                      "holder": None if holder is None else [holder.host, holder.pid,
                                                             holder.started.isoformat()]}))
    """
)

# Run in another process: take the lock, start a long `sleep` through the runner with the lock's
# descriptor, report the sleep's pid, and wait to be killed.
HOLD_AND_SPAWN = textwrap.dedent(
    """
    import os, sys, time
    from datetime import datetime, timezone
    from pathlib import Path
    from cronctl.coord.files.overlap import try_overlap_lock
    from cronctl.edge.process.runner import RunSpec, start
    lock_dir = Path(sys.argv[1])
    result = try_overlap_lock(lock_dir, "backup", lease=None,
                              now=datetime.now(timezone.utc), host="holder", pid=os.getpid())
    assert result.lock is not None
    spec = RunSpec(command=("sleep", "60"), shell="/bin/sh", workdir=lock_dir,
                   env={"PATH": os.environ["PATH"]}, timeout=None,
                   log_path=lock_dir / "sleep.log", pass_fds=(result.lock.fd,))
    running = start(spec)
    print(running.pid, flush=True)
    time.sleep(60)  # holds the lock until the test kills it
    """
)


def _try_elsewhere(lock_dir: Path, now: datetime, lease_minutes: int | None = None) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", TRY_LOCK, str(lock_dir), now.isoformat(), str(lease_minutes or "-")],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _acquire(lock_dir: Path, *, now: datetime = T0, lease: timedelta | None = None) -> Overlap:
    return try_overlap_lock(lock_dir, "backup", lease=lease, now=now, host="here", pid=os.getpid())


@pytest.fixture
def held(tmp_path: Path) -> Iterator[Overlap]:
    result = _acquire(tmp_path)
    assert result.status == "acquired"
    yield result
    assert result.lock is not None
    result.lock.release()


def test_free_lock_is_acquired_and_records_its_holder(tmp_path: Path) -> None:
    result = _acquire(tmp_path)
    assert result.status == "acquired"
    assert result.may_run
    assert result.holder is None
    assert result.lock is not None
    record = json.loads((tmp_path / "overlap" / "backup.holder").read_text())
    assert record == {"host": "here", "pid": os.getpid(), "started": "2026-08-03T09:00:00Z"}
    result.lock.release()


def test_another_process_finds_the_lock_held_with_the_holders_details(
    tmp_path: Path, held: Overlap
) -> None:
    seen = _try_elsewhere(tmp_path, T0 + timedelta(hours=5))
    assert seen == {"status": "held", "holder": ["here", os.getpid(), "2026-08-03T09:00:00+00:00"]}


def test_a_second_attempt_in_the_same_process_is_also_refused(
    tmp_path: Path, held: Overlap
) -> None:
    second = _acquire(tmp_path)
    assert second.status == "held"
    assert not second.may_run
    assert second.lock is None


def test_released_lock_can_be_taken_by_another_process(tmp_path: Path) -> None:
    result = _acquire(tmp_path)
    assert result.lock is not None
    result.lock.release()
    result.lock.release()  # idempotent
    assert _try_elsewhere(tmp_path, T0)["status"] == "acquired"
    with pytest.raises(ValueError, match="already released"):
        _ = result.lock.fd


def test_lock_passed_to_a_child_outlives_the_killed_cronctl_process(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_AND_SPAWN, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    child_pid = int(holder.stdout.readline())
    holder.stdout.close()
    try:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        assert alive(child_pid)
        assert _try_elsewhere(tmp_path, T0)["status"] == "held"
    finally:
        os.kill(child_pid, signal.SIGKILL)
    wait_for(lambda: not alive(child_pid), "the child to end")
    after = _acquire(tmp_path)
    assert after.status == "acquired"
    assert after.lock is not None
    after.lock.release()


def test_lock_stays_held_by_the_child_after_the_parent_releases_its_copy(tmp_path: Path) -> None:
    result = _acquire(tmp_path)
    assert result.lock is not None
    with reaped(
        subprocess.Popen(["sleep", "30"], pass_fds=(result.lock.fd,), start_new_session=True)
    ):
        result.lock.release()
        assert _acquire(tmp_path).status == "held"
    later = _acquire(tmp_path)
    assert later.status == "acquired"
    assert later.lock is not None
    later.lock.release()


def test_holder_past_its_lease_is_overtaken_and_named(tmp_path: Path, held: Overlap) -> None:
    seen = _try_elsewhere(tmp_path, T0 + timedelta(minutes=31), lease_minutes=30)
    assert seen == {
        "status": "overtaken",
        "holder": ["here", os.getpid(), "2026-08-03T09:00:00+00:00"],
    }


def test_holder_within_its_lease_is_respected(tmp_path: Path, held: Overlap) -> None:
    assert (
        _try_elsewhere(tmp_path, T0 + timedelta(minutes=30), lease_minutes=30)["status"] == "held"
    )


def test_without_a_lease_a_lock_never_expires(tmp_path: Path, held: Overlap) -> None:
    assert _try_elsewhere(tmp_path, T0 + timedelta(days=30))["status"] == "held"


def test_overtaking_run_becomes_the_holder_so_the_lease_restarts(
    tmp_path: Path, held: Overlap
) -> None:
    late = T0 + timedelta(minutes=45)
    overtaker = _acquire(tmp_path, now=late, lease=timedelta(minutes=30))
    assert overtaker.status == "overtaken"
    assert overtaker.holder == HolderInfo("here", os.getpid(), T0)
    assert overtaker.lock is not None
    try:
        next_minute = _acquire(
            tmp_path, now=late + timedelta(minutes=1), lease=timedelta(minutes=30)
        )
        assert next_minute.status == "held"
        assert next_minute.holder == HolderInfo("here", os.getpid(), late)
    finally:
        overtaker.lock.release()


def test_dry_run_probe_sees_a_lock_held_by_another_process(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_AND_SPAWN, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    sleeper = int(child.stdout.readline())
    try:
        with reaped(child):
            assert overlap_held(tmp_path, "backup")
    finally:
        os.kill(sleeper, signal.SIGKILL)
    wait_for(lambda: not overlap_held(tmp_path, "backup"), "the lock to be freed")


def test_dry_run_probe_leaves_a_free_lock_free_and_creates_nothing(tmp_path: Path) -> None:
    assert not overlap_held(tmp_path, "backup")
    assert list(tmp_path.iterdir()) == []
    result = _acquire(tmp_path)
    assert result.lock is not None
    assert overlap_held(tmp_path, "backup")
    result.lock.release()
    assert not overlap_held(tmp_path, "backup")
    again = _acquire(tmp_path)
    assert again.status == "acquired"
    assert again.lock is not None
    again.lock.release()


def test_overlap_lock_refuses_a_planted_symlink(tmp_path: Path) -> None:
    (tmp_path / "overlap").mkdir(mode=0o700)
    victim = tmp_path / "victim"
    (tmp_path / "overlap" / "backup.lock").symlink_to(victim)
    with pytest.raises(UnsafeDirectoryError, match="symbolic link"):
        _acquire(tmp_path)
    assert not victim.exists()


@pytest.mark.parametrize("name", ["../escape", "a/b", "", ".hidden", "x" * 101])
def test_invalid_task_names_never_become_paths(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="invalid task name"):
        try_overlap_lock(tmp_path, name, lease=None, now=T0, host="h", pid=1)
