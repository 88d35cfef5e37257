"""A run's overlap directory, checked and opened once: every lock of the run is taken in the
directory that was checked, by name relative to its descriptor, never by walking the path again.
"""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cronctl.coord.files import overlap
from cronctl.coord.files.adapter import FilesCoordinator
from cronctl.coord.port import Overlap
from cronctl.edge.safefiles import open_dir
from cronctl.errors import UnsafeDirectoryError

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)


def take(coord: FilesCoordinator, task: str) -> overlap.OverlapLock:
    got = coord.try_overlap(task, lease=None, now=T0)
    assert got.status == "acquired"
    assert isinstance(got.lock, overlap.OverlapLock)
    return got.lock


def test_a_run_keeps_taking_its_locks_in_the_directory_it_checked(tmp_path: Path) -> None:
    lock_dir = tmp_path / "locks"
    lock_dir.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    coord = FilesCoordinator(lock_dir, host="web-1", pid=os.getpid())
    first = take(coord, "a")
    # Mid-run, overlap/ is moved away and a link to another directory planted in its place.
    (lock_dir / "overlap").rename(lock_dir / "moved")
    (lock_dir / "overlap").symlink_to(elsewhere)
    second = take(coord, "b")
    assert sorted(p.name for p in (lock_dir / "moved").iterdir()) == [
        "a.guard", "a.holder", "a.lock", "b.guard", "b.holder", "b.lock",
    ]  # fmt: skip
    assert list(elsewhere.iterdir()) == []
    for lock in (first, second):
        lock.release()
    coord.close()
    # The next run checks the path again, and refuses the link.
    again = FilesCoordinator(lock_dir, host="web-1", pid=os.getpid())
    with pytest.raises(UnsafeDirectoryError, match="symbolic link"):
        again.try_overlap("c", lease=None, now=T0)
    assert list(elsewhere.iterdir()) == []


def test_the_lock_of_one_run_still_excludes_the_next_run(tmp_path: Path) -> None:
    held = take(FilesCoordinator(tmp_path, host="web-1", pid=os.getpid()), "job")
    other = FilesCoordinator(tmp_path, host="web-1", pid=os.getpid())
    got = other.try_overlap("job", lease=None, now=T0)
    assert got.status == "held"
    held.release()
    take(other, "job").release()
    other.close()


def test_close_waits_for_an_attempt_in_flight_before_closing_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    coord = FilesCoordinator(tmp_path, host="h", pid=1)
    take(coord, "warm").release()  # the directory is open now
    directory = coord._overlap
    assert directory is not None and directory.fd is not None
    inside, go_on = threading.Event(), threading.Event()
    real = overlap.try_overlap_lock

    def slow(*args: object, **kwargs: object) -> Overlap:
        inside.set()
        assert go_on.wait(10)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(overlap, "try_overlap_lock", slow)
    results: list[Overlap | BaseException] = []

    def attempt() -> None:
        try:
            results.append(coord.try_overlap("job", lease=None, now=T0))
        except BaseException as exc:
            results.append(exc)

    thread = threading.Thread(target=attempt)
    thread.start()
    assert inside.wait(10)
    coord.close()  # the run ends while a worker is between taking the directory and using it
    assert directory.fd is not None  # not closed under the attempt
    os.fstat(directory.fd)
    go_on.set()
    thread.join(10)
    assert [type(r) for r in results] == [Overlap]
    assert isinstance(results[0], Overlap) and results[0].status == "acquired"
    assert directory.fd is None  # closed by the last attempt out
    assert (tmp_path / "overlap" / "job.lock").exists()
    # After close, an attempt opens (and closes) its own directory.
    monkeypatch.setattr(overlap, "try_overlap_lock", real)
    late = coord.try_overlap("late", lease=None, now=T0)
    assert late.status == "acquired" and late.lock is not None
    late.lock.release()


def test_open_dir_checks_what_it_opened(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UnsafeDirectoryError, match="world-writable"):
        open_dir(shared)
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    with pytest.raises(UnsafeDirectoryError, match="symbolic link"):
        open_dir(link)
    fd, st = open_dir(tmp_path)
    try:
        assert os.path.samestat(st, tmp_path.stat())
        assert not os.get_inheritable(fd)
    finally:
        os.close(fd)


def test_a_group_shared_lock_dir_gives_its_group_read_access_to_the_holder(
    tmp_path: Path,
) -> None:
    lock_dir = tmp_path / "locks"
    lock_dir.mkdir()
    lock_dir.chmod(0o2770)
    lock = take(FilesCoordinator(lock_dir, host="web-1", pid=os.getpid()), "job")
    assert (lock_dir / "overlap" / "job.holder").stat().st_mode & 0o777 == 0o640
    lock.release()
