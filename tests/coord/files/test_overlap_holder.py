"""The overlap lock's second line of defence: the holder's command, known by pid and start time.

Real processes throughout: a child stands for a task that closed the descriptor it was given,
so the flock is free while the task still runs.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cronctl.coord.files.overlap import overlap_held, try_overlap_lock
from cronctl.coord.port import Overlap
from cronctl.core.process_id import ProcessId
from cronctl.edge.process import procs
from tests.helpers import reaped, wait_for, written

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)


def attempt(lock_dir: Path, *, minutes: int = 1, lease: timedelta | None = None) -> Overlap:
    now = T0 + timedelta(minutes=minutes)
    return try_overlap_lock(lock_dir, "job", lease=lease, now=now, host="web-1", pid=1)


@pytest.fixture
def task(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A task that took the lock, had its command recorded, then lost the descriptor."""
    first = try_overlap_lock(tmp_path, "job", lease=None, now=T0, host="web-1", pid=os.getpid())
    assert first.lock is not None
    with reaped(subprocess.Popen(["sleep", "60"], start_new_session=True)) as child:
        first.lock.record_command(child.pid)
        first.lock.release()  # as if the task closed it and cronctl was kill -9ed
        yield child


def holder_record(lock_dir: Path) -> dict[str, object]:
    record = json.loads((lock_dir / "overlap" / "job.holder").read_text())
    assert isinstance(record, dict)
    return record


def test_a_free_flock_whose_command_still_runs_counts_as_held(
    tmp_path: Path, task: subprocess.Popen[bytes]
) -> None:
    result = attempt(tmp_path)
    assert result.status == "held"
    assert result.holder is not None and result.holder.command is not None
    assert result.holder.command.pid == task.pid
    assert result.holder.describe() == f"pid {task.pid} on web-1 since 2026-08-03T09:00:00Z"
    assert overlap_held(tmp_path, "job")
    # The refused contender left the record alone.
    assert holder_record(tmp_path)["command"]["pid"] == task.pid  # type: ignore[index]


def test_the_same_machine_under_another_host_name_finds_it_held(
    tmp_path: Path, task: subprocess.Popen[bytes]
) -> None:
    # CRONCTL_HOST or --host may name one machine twice; the boot id says it is this one.
    now = T0 + timedelta(minutes=1)
    result = try_overlap_lock(tmp_path, "job", lease=None, now=now, host="web-2", pid=1)
    assert result.status == "held"
    assert result.holder is not None and result.holder.host == "web-1"


def test_another_pid_namespace_of_this_boot_is_not_taken_for_this_one(
    tmp_path: Path, task: subprocess.Popen[bytes]
) -> None:
    # A container sharing lock_dir counts pids apart: its numbers say nothing here.
    record = holder_record(tmp_path)
    boot = procs.boot_id().partition("/")[0]
    record["command"]["boot"] = f"{boot}/pid:[1]"  # type: ignore[index]
    (tmp_path / "overlap" / "job.holder").write_text(json.dumps(record))
    assert attempt(tmp_path).status == "acquired"


def test_the_lock_is_free_once_the_command_is_gone(
    tmp_path: Path, task: subprocess.Popen[bytes]
) -> None:
    task.kill()
    task.wait()
    assert not overlap_held(tmp_path, "job")
    result = attempt(tmp_path)
    assert result.status == "acquired"
    assert result.lock is not None
    result.lock.release()


def test_a_recycled_pid_is_not_taken_for_the_holder(
    tmp_path: Path, task: subprocess.Popen[bytes]
) -> None:
    record = holder_record(tmp_path)
    command = record["command"]
    assert isinstance(command, dict)
    command["start"] -= 1  # same pid, another process: it started at another time
    (tmp_path / "overlap" / "job.holder").write_text(json.dumps(record))
    assert attempt(tmp_path).status == "acquired"


def test_a_record_from_another_boot_is_not_taken_for_the_holder(
    tmp_path: Path, task: subprocess.Popen[bytes]
) -> None:
    record = holder_record(tmp_path)
    record["command"]["boot"] = "00000000-0000-0000-0000-000000000000"  # type: ignore[index]
    (tmp_path / "overlap" / "job.holder").write_text(json.dumps(record))
    assert attempt(tmp_path).status == "acquired"


def test_a_holder_past_its_lease_is_overtaken_even_without_its_flock(
    tmp_path: Path, task: subprocess.Popen[bytes]
) -> None:
    assert attempt(tmp_path, minutes=5, lease=timedelta(minutes=10)).status == "held"
    result = attempt(tmp_path, minutes=11, lease=timedelta(minutes=10))
    assert result.status == "overtaken"
    assert result.holder is not None and result.holder.command is not None
    assert result.holder.command.pid == task.pid
    assert result.lock is not None
    result.lock.release()


def test_members_left_in_the_group_hold_it_after_the_leader_exits(tmp_path: Path) -> None:
    first = try_overlap_lock(tmp_path, "job", lease=None, now=T0, host="web-1", pid=os.getpid())
    assert first.lock is not None
    leader = subprocess.Popen(
        ["sh", "-c", "sleep 60 & echo $! > bg.pid; read wait_for_go"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        start_new_session=True,
    )
    first.lock.record_command(leader.pid)
    first.lock.release()
    background = int(wait_for(lambda: written(tmp_path / "bg.pid"), "the background pid"))
    try:
        leader.communicate(b"go\n", timeout=10)  # the leader exits and is reaped
        assert procs.identify(leader.pid) is None
        assert attempt(tmp_path).status == "held"
    finally:
        os.killpg(leader.pid, 9)
    wait_for(lambda: procs.identify(background) is None, "the group's last member to end")
    assert attempt(tmp_path).status == "acquired"


def test_process_identity_reads_start_time_and_boot() -> None:
    me = procs.identify(os.getpid())
    assert me is not None and me.boot == procs.boot_id() and me.start_ticks > 0
    assert procs.same_process_alive(me)
    assert not procs.same_process_alive(ProcessId(me.pid, me.start_ticks + 1, me.boot))
    assert procs.identify(2**22 + 1) is None  # beyond pid_max: never a process


@pytest.mark.parametrize("pid", [0, -5, 10**30, "42", None])
def test_a_damaged_command_record_is_ignored_not_a_crash(
    tmp_path: Path, task: subprocess.Popen[bytes], pid: object
) -> None:
    record = holder_record(tmp_path)
    record["command"]["pid"] = pid  # type: ignore[index]
    (tmp_path / "overlap" / "job.holder").write_text(json.dumps(record))
    assert attempt(tmp_path).status == "acquired"


def test_a_holder_record_nested_thousands_deep_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "overlap").mkdir(mode=0o700)
    (tmp_path / "overlap" / "job.holder").write_text("[" * 30000 + "]" * 30000)
    result = attempt(tmp_path)
    assert result.status == "acquired"
    assert result.lock is not None
    result.lock.release()


def test_a_record_written_over_a_longer_one_leaves_nothing_of_it(tmp_path: Path) -> None:
    """Records are rewritten in place (padded, not truncated, when they fit): what an older
    cronctl or a very long host name left must not trail behind a new one."""
    overlap = tmp_path / "overlap"
    overlap.mkdir(mode=0o700)
    old = {"host": "h" * 3000, "pid": 7, "started": "2026-08-03T08:00:00Z"}
    (overlap / "job.holder").write_text(json.dumps(old))
    (overlap / "job.holder").chmod(0o600)
    first = attempt(tmp_path)
    assert first.status == "acquired" and first.lock is not None
    assert holder_record(tmp_path)["host"] == "web-1"
    child = subprocess.Popen(["true"], start_new_session=True)
    first.lock.record_command(child.pid)
    child.wait()
    first.lock.release()
    assert holder_record(tmp_path)["pid"] == 1
    long_host = "x" * 700  # longer than the padded width: the file is cut to the record
    got = try_overlap_lock(tmp_path, "job", lease=None, now=T0, host=long_host, pid=2)
    assert got.lock is not None
    assert holder_record(tmp_path) == {
        "host": long_host,
        "pid": 2,
        "started": "2026-08-03T09:00:00Z",
    }
    got.lock.release()
    again = attempt(tmp_path)
    assert again.status == "acquired" and again.lock is not None
    assert holder_record(tmp_path)["host"] == "web-1"
    again.lock.release()
