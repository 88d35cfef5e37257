"""Overlap locks, occurrence claims and pause markers, with real processes and real files."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from cronctl.coord.files.locks import (
    OverlapResult,
    claim_exists,
    claim_occurrence,
    clear_pause,
    overlap_held,
    paused_tasks,
    read_pause,
    set_pause,
    sweep_claims,
    try_overlap_lock,
)
from cronctl.coord.port import HolderInfo
from cronctl.errors import UnsafeDirectoryError
from tests.helpers import wait_for

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)

# Run in another process: try the lock and print the outcome as JSON.
TRY_LOCK = textwrap.dedent(
    """
    import json, sys
    from datetime import datetime, timedelta
    from pathlib import Path
    from cronctl.coord.files.locks import try_overlap_lock
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
    from cronctl.coord.files.locks import try_overlap_lock
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
    time.sleep(60)
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


def _acquire(
    lock_dir: Path, *, now: datetime = T0, lease: timedelta | None = None
) -> OverlapResult:
    return try_overlap_lock(lock_dir, "backup", lease=lease, now=now, host="here", pid=os.getpid())


@pytest.fixture
def held(tmp_path: Path) -> Iterator[OverlapResult]:
    result = _acquire(tmp_path)
    assert result.status == "acquired"
    yield result
    assert result.lock is not None
    result.lock.release()


def _alive(pid: int) -> bool:
    # Orphans are not reaped in every container, so a zombie counts as dead.
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != b"Z"


# --- overlap lock -----------------------------------------------------------------------------


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
    tmp_path: Path, held: OverlapResult
) -> None:
    seen = _try_elsewhere(tmp_path, T0 + timedelta(hours=5))
    assert seen == {"status": "held", "holder": ["here", os.getpid(), "2026-08-03T09:00:00+00:00"]}


def test_a_second_attempt_in_the_same_process_is_also_refused(
    tmp_path: Path, held: OverlapResult
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
        assert _alive(child_pid)
        assert _try_elsewhere(tmp_path, T0)["status"] == "held"
    finally:
        os.kill(child_pid, signal.SIGKILL)
    wait_for(lambda: not _alive(child_pid), "the child to end")
    after = _acquire(tmp_path)
    assert after.status == "acquired"
    assert after.lock is not None
    after.lock.release()


def test_lock_stays_held_by_the_child_after_the_parent_releases_its_copy(tmp_path: Path) -> None:
    result = _acquire(tmp_path)
    assert result.lock is not None
    child = subprocess.Popen(["sleep", "30"], pass_fds=(result.lock.fd,), start_new_session=True)
    try:
        result.lock.release()
        assert _acquire(tmp_path).status == "held"
    finally:
        child.kill()
        child.wait()
    later = _acquire(tmp_path)
    assert later.status == "acquired"
    assert later.lock is not None
    later.lock.release()


def test_holder_past_its_lease_is_overtaken_and_named(tmp_path: Path, held: OverlapResult) -> None:
    seen = _try_elsewhere(tmp_path, T0 + timedelta(minutes=31), lease_minutes=30)
    assert seen == {
        "status": "overtaken",
        "holder": ["here", os.getpid(), "2026-08-03T09:00:00+00:00"],
    }


def test_holder_within_its_lease_is_respected(tmp_path: Path, held: OverlapResult) -> None:
    assert (
        _try_elsewhere(tmp_path, T0 + timedelta(minutes=30), lease_minutes=30)["status"] == "held"
    )


def test_without_a_lease_a_lock_never_expires(tmp_path: Path, held: OverlapResult) -> None:
    assert _try_elsewhere(tmp_path, T0 + timedelta(days=30))["status"] == "held"


def test_overtaking_run_becomes_the_holder_so_the_lease_restarts(
    tmp_path: Path, held: OverlapResult
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
    child.stdout.close()
    try:
        assert overlap_held(tmp_path, "backup")
    finally:
        child.kill()
        child.wait()
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


# --- occurrence claims ------------------------------------------------------------------------

RACE = textwrap.dedent(
    """
    import sys, time
    from datetime import datetime
    from pathlib import Path
    from cronctl.coord.files.locks import claim_occurrence
    start_at = float(sys.argv[2])
    while time.time() < start_at:
        time.sleep(0.001)
    won = claim_occurrence(Path(sys.argv[1]), "report", datetime.fromisoformat(sys.argv[3]),
                           host=sys.argv[4], pid=1, now=datetime.fromisoformat(sys.argv[3]))
    print("won" if won else "lost")
    """
)


def test_exactly_one_of_sixteen_racing_processes_wins_the_claim(tmp_path: Path) -> None:
    start_at = time.time() + 1.5
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, str(tmp_path), str(start_at), T0.isoformat(), f"h{i}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(16)
    ]
    results = [racer.communicate(timeout=30)[0].strip() for racer in racers]
    assert all(racer.returncode == 0 for racer in racers)
    assert sorted(results) == ["lost"] * 15 + ["won"]
    claims = list((tmp_path / "claims").iterdir())
    assert [c.name for c in claims] == ["report@20260803T0900Z"]
    assert json.loads(claims[0].read_text())["host"] == f"h{results.index('won')}"


def test_claim_records_host_pid_and_time_privately(tmp_path: Path) -> None:
    assert claim_occurrence(tmp_path, "report", T0, host="web-1", pid=77, now=T0)
    path = tmp_path / "claims" / "report@20260803T0900Z"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {
        "host": "web-1",
        "pid": 77,
        "claimed": "2026-08-03T09:00:00Z",
        "occurrence": "2026-08-03T09:00:00Z",
    }


def test_claim_exists_reports_claims_without_taking_one(tmp_path: Path) -> None:
    assert not claim_exists(tmp_path, "report", T0)
    assert not (tmp_path / "claims").exists()
    claim_occurrence(tmp_path, "report", T0, host="a", pid=1, now=T0)
    assert claim_exists(tmp_path, "report", T0)
    assert not claim_exists(tmp_path, "report", T0 + timedelta(minutes=1))


def test_claim_is_never_released_so_a_second_claim_loses(tmp_path: Path) -> None:
    assert claim_occurrence(tmp_path, "report", T0, host="a", pid=1, now=T0)
    late = T0 + timedelta(seconds=1)
    assert not claim_occurrence(tmp_path, "report", T0, host="b", pid=2, now=late)


def test_claims_are_keyed_by_task_and_utc_occurrence(tmp_path: Path) -> None:
    assert claim_occurrence(tmp_path, "report", T0, host="a", pid=1, now=T0)
    assert claim_occurrence(tmp_path, "other", T0, host="a", pid=1, now=T0)
    assert claim_occurrence(tmp_path, "report", T0 + timedelta(minutes=1), host="a", pid=1, now=T0)
    berlin_summer = timezone(timedelta(hours=2))
    same_instant = T0.astimezone(berlin_summer)
    assert not claim_occurrence(tmp_path, "report", same_instant, host="b", pid=2, now=T0)


def test_task_names_with_colons_get_a_portable_claim_name(tmp_path: Path) -> None:
    assert claim_occurrence(tmp_path, "db:vacuum", T0, host="a", pid=1, now=T0)
    assert [p.name for p in (tmp_path / "claims").iterdir()] == ["db%vacuum@20260803T0900Z"]
    assert not claim_occurrence(tmp_path, "db:vacuum", T0, host="a", pid=1, now=T0)


@pytest.mark.parametrize(
    "occurrence",
    [T0 + timedelta(milliseconds=30), T0.replace(tzinfo=None)],
    ids=["fraction", "naive"],
)
def test_occurrence_must_be_an_aware_whole_second(tmp_path: Path, occurrence: datetime) -> None:
    with pytest.raises(ValueError):
        claim_occurrence(tmp_path, "report", occurrence, host="a", pid=1, now=T0)


def test_occurrences_one_second_apart_are_claimed_apart_and_swept(tmp_path: Path) -> None:
    # The first minute after a DST gap carries several occurrences: T0, T0+1s, ...
    second = T0 + timedelta(seconds=1)
    assert claim_occurrence(tmp_path, "report", T0, host="a", pid=1, now=T0)
    assert claim_occurrence(tmp_path, "report", second, host="a", pid=1, now=T0)
    assert not claim_occurrence(tmp_path, "report", second, host="b", pid=2, now=T0)
    names = sorted(p.name for p in (tmp_path / "claims").iterdir())
    assert names == ["report@20260803T090001Z", "report@20260803T0900Z"]
    # Aged by their minute: at the 7-day boundary both stay, a minute later both go.
    assert sweep_claims(tmp_path, now=T0 + timedelta(days=7)) == 0
    assert sweep_claims(tmp_path, now=T0 + timedelta(days=7, minutes=1)) == 2


def test_symlink_planted_at_the_claim_path_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "claims").mkdir(mode=0o700)
    victim = tmp_path / "victim"
    (tmp_path / "claims" / "report@20260803T0900Z").symlink_to(victim)
    assert not claim_occurrence(tmp_path, "report", T0, host="a", pid=1, now=T0)
    assert not victim.exists()


def test_sweep_removes_only_claims_older_than_a_week_by_their_name(tmp_path: Path) -> None:
    for days in (0, 6, 7, 8, 30):
        claim_occurrence(tmp_path, "report", T0 - timedelta(days=days), host="a", pid=1, now=T0)
    claims = tmp_path / "claims"
    (claims / "README").write_text("not a claim")
    (claims / "x@garbage").write_text("not a claim either")
    # mtimes say nothing: a copied or touched claim keeps the age of its occurrence.
    for path in claims.iterdir():
        os.utime(path, (0, 0))
    assert sweep_claims(tmp_path, now=T0) == 2
    assert sorted(p.name for p in claims.iterdir()) == [
        "README",
        "report@20260727T0900Z",
        "report@20260728T0900Z",
        "report@20260803T0900Z",
        "x@garbage",
    ]


def test_sweep_of_a_missing_claims_directory_removes_nothing(tmp_path: Path) -> None:
    assert sweep_claims(tmp_path / "nowhere", now=T0) == 0


def test_sweep_tolerates_claims_that_another_machine_already_removed(tmp_path: Path) -> None:
    claim_occurrence(tmp_path, "report", T0 - timedelta(days=9), host="a", pid=1, now=T0)
    first = sweep_claims(tmp_path, now=T0)
    second = sweep_claims(tmp_path, now=T0)
    assert (first, second) == (1, 0)


# --- pause markers ----------------------------------------------------------------------------


def test_pause_read_and_resume(tmp_path: Path) -> None:
    assert read_pause(tmp_path, "backup") is None
    set_pause(tmp_path, "backup", reason="disk full", now=T0, host="web-1", user="ann")
    info = read_pause(tmp_path, "backup")
    assert info is not None
    assert (info.reason, info.since, info.host, info.user) == ("disk full", T0, "web-1", "ann")
    assert clear_pause(tmp_path, "backup")
    assert read_pause(tmp_path, "backup") is None
    assert not clear_pause(tmp_path, "backup")


def test_pausing_again_replaces_the_marker_atomically(tmp_path: Path) -> None:
    set_pause(tmp_path, "backup", reason=None, now=T0, host="a", user="ann")
    later = T0 + timedelta(hours=1)
    set_pause(tmp_path, "backup", reason="again", now=later, host="b", user="bob")
    info = read_pause(tmp_path, "backup")
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
    info = read_pause(tmp_path, "backup")
    assert info is not None
    assert (info.reason, info.since, info.host, info.user) == (None, None, None, None)
    assert list(paused_tasks(tmp_path)) == ["backup"]
