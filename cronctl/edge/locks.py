"""Overlap locks, occurrence claims and pause markers, all as files inside ``lock_dir``.

Layout (task names are validated, so each becomes exactly one file name)::

    LOCK_DIR/overlap/TASK.lock       kernel lock (flock) held for the whole run   (SPEC 4.2)
    LOCK_DIR/overlap/TASK.holder     who holds it: host, pid, start (JSON)
    LOCK_DIR/overlap/TASK.guard      serialises "try the lock + read/write .holder"
    LOCK_DIR/claims/TASK@YYYYMMDDTHHMMZ   one per occurrence, never released        (SPEC 4.3)
    LOCK_DIR/paused/TASK.pause       operator pause (JSON)                         (SPEC 5.3)

A ``:`` in a task name is written as ``%`` in file names: Windows servers behind a cifs
``lock_dir`` reject ``:``, and ``%`` can never occur in a task name, so the mapping is reversible
and keeps names as short as the task's (a 100-character name still fits NAME_MAX).

Every file is opened with ``O_NOFOLLOW`` (see :func:`cronctl.edge.paths.open_nofollow`).

A lock is a lease, not a transaction: work that must never run twice has to be idempotent or
fenced downstream.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from cronctl.edge.paths import ensure_private_dir, fsync_dir, open_nofollow, write_atomic
from cronctl.errors import UnsafeDirectoryError

__all__ = [
    "HolderInfo",
    "OverlapLock",
    "OverlapResult",
    "PauseInfo",
    "claim_exists",
    "claim_occurrence",
    "clear_pause",
    "overlap_held",
    "paused_tasks",
    "read_pause",
    "set_pause",
    "sweep_claims",
    "try_overlap_lock",
]

_TASK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$")
_CLAIM_STAMP = "%Y%m%dT%H%MZ"
_STAMP_SHAPE = re.compile(r"[0-9]{8}T[0-9]{4}Z")
# The guard is held for a few system calls; waiting longer means its holder is stopped.
_GUARD_WAIT_S = 5.0
_MAX_RECORD_BYTES = 64 * 1024


# --- names and files ----------------------------------------------------------------------


def _file_stem(task: str) -> str:
    if not _TASK_NAME.fullmatch(task):
        raise ValueError(f"invalid task name {task!r}: it must match {_TASK_NAME.pattern}")
    return task.replace(":", "%")


def _task_from_stem(stem: str) -> str | None:
    task = stem.replace("%", ":")
    return task if _TASK_NAME.fullmatch(task) else None


def _task_path(directory: Path, task: str, suffix: str) -> Path:
    path = directory / (_file_stem(task) + suffix)
    # The name pattern already excludes '/', but this is the check that a path never escapes.
    if path.parent != directory or os.path.normpath(path) != str(path):
        raise ValueError(f"task {task!r} does not map to a file inside {directory}")
    return path


def _file_mode(directory: Path) -> int:
    # A setgid lock_dir is shared by a group on purpose; let the group read who holds what.
    return 0o640 if directory.stat().st_mode & stat.S_ISGID else 0o600


def _iso(moment: datetime) -> str:
    return _utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"naive datetime {moment!r}: cronctl only works with aware times")
    return moment.astimezone(UTC)


def _dumps(record: Mapping[str, object]) -> bytes:
    import json  # only where a record is written: a quiet `run` never needs it

    return json.dumps(record).encode()


def _loads(text: str) -> object:
    import json

    return json.loads(text)


def _read_record(path: Path) -> dict[str, object] | None:
    """Read a small JSON object written by this module; None when missing or unreadable."""
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except (OSError, UnsafeDirectoryError):
        return None
    try:
        raw = os.read(fd, _MAX_RECORD_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        record = _loads(raw.decode("utf-8", errors="replace"))
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo is not None else None


def _flock_nonblocking(fd: int) -> bool:
    # filelock's public descriptor API, the same flock(LOCK_EX|LOCK_NB) its FileLock uses.
    # Imported here because filelock costs ~35 ms to import and most runs take no lock.
    from filelock import lock_descriptor

    return lock_descriptor(fd, blocking=False)


# --- overlap lock (SPEC 4.2) --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HolderInfo:
    """Who holds an overlap lock: the machine, the cronctl process and when its run started."""

    host: str
    pid: int
    started: datetime

    def describe(self) -> str:
        """One phrase for warnings: ``pid 42 on web-1 since 2026-08-03T09:00:00Z``."""
        return f"pid {self.pid} on {self.host} since {_iso(self.started)}"


class OverlapLock:
    """A held overlap lock: an open descriptor carrying a ``flock``.

    Why not ``filelock.FileLock``: flock belongs to the open file description, and SPEC 4.2
    wants the lock to outlive cronctl for as long as the task runs. That means handing the
    descriptor to the child (``pass_fds``), and FileLock owns its descriptor privately,
    closes it in forked children (an at-fork hook) and unlocks the shared description on
    release. So this module opens the file itself and locks it with filelock's public
    ``lock_descriptor``; the child must be started with ``start_new_session=True`` and
    ``pass_fds=(lock.fd,)``, never ``preexec_fn`` (which would run at-fork hooks).
    """

    __slots__ = ("_fd", "path")

    def __init__(self, fd: int, path: Path) -> None:
        """Wrap ``fd``, already locked, for the lock file at ``path``."""
        self._fd: int | None = fd
        self.path = path

    @property
    def fd(self) -> int:
        """The locked descriptor, to pass to the command with ``pass_fds``."""
        if self._fd is None:
            raise ValueError(f"overlap lock {self.path} was already released")
        return self._fd

    def release(self) -> None:
        """Close cronctl's descriptor; idempotent.

        This deliberately does not ``LOCK_UN``: unlocking acts on the open file description
        that the task's processes share, so it would drop the lock under a task that is still
        running. Closing drops only our reference; the kernel releases the lock when the last
        process holding the descriptor is gone.
        """
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


@dataclass(frozen=True, slots=True)
class OverlapResult:
    """The answer of :func:`try_overlap_lock`.

    - ``acquired``: ``lock`` is ours; ``holder`` is None.
    - ``held``: another run holds it; ``holder`` says who when known; ``lock`` is None.
    - ``overtaken``: the holder ran past the lease, so it is treated as stuck; ``lock`` is ours
      (on a fresh lock file) and ``holder`` names the stuck run for the warning.
    """

    status: Literal["acquired", "held", "overtaken"]
    lock: OverlapLock | None
    holder: HolderInfo | None

    @property
    def may_run(self) -> bool:
        """Whether the caller should run the task (acquired or overtaken)."""
        return self.lock is not None


def try_overlap_lock(
    lock_dir: Path,
    task: str,
    *,
    lease: timedelta | None,
    now: datetime,
    host: str,
    pid: int,
) -> OverlapResult:
    """Try, without waiting, to take ``task``'s overlap lock in ``lock_dir``.

    ``lease`` is None for ``without_overlapping = true`` (no expiry); with a duration, a lock
    whose holder started more than ``lease`` before ``now`` is overtaken: its file is unlinked
    (the stuck holder keeps its lock on the orphaned inode) and a fresh one is locked.

    The attempt and the ``.holder`` record happen under a short guard lock, so a contender
    never reads the previous holder's record in the instant between the new holder's flock
    and its write; without that, yesterday's start time could make a fresh run look stuck.
    """
    directory = ensure_private_dir(lock_dir / "overlap")
    lock_path = _task_path(directory, task, ".lock")
    holder_path = _task_path(directory, task, ".holder")
    me = HolderInfo(host=host, pid=pid, started=_utc(now))
    with _guard(_task_path(directory, task, ".guard")) as guarded:
        lock = _lock_file(lock_path)
        if lock is not None:
            return OverlapResult("acquired", _record_holder(lock, holder_path, me), None)
        holder = _read_holder(holder_path)
        # Without the guard the record may be stale, so it is not evidence of a stuck run.
        if not guarded or lease is None or holder is None or me.started - holder.started <= lease:
            return OverlapResult("held", None, holder)
        with suppress(FileNotFoundError):
            lock_path.unlink()
        lock = _lock_file(lock_path)
        if lock is None:
            return OverlapResult("held", None, holder)
        return OverlapResult("overtaken", _record_holder(lock, holder_path, me), holder)


def overlap_held(lock_dir: Path, task: str) -> bool:
    """Whether ``task``'s overlap lock is held right now, for ``run --dry-run``; creates nothing.

    flock has no "test" operation, so this takes and drops the lock, but only under the
    guard: a real contender waits for the guard instead of mistaking the probe for a run.
    """
    directory = lock_dir / "overlap"
    try:
        with _guard(_task_path(directory, task, ".guard"), create=False) as guarded:
            fd = open_nofollow(_task_path(directory, task, ".lock"), os.O_RDONLY)
            try:
                return not guarded or not _flock_nonblocking(fd)
            finally:
                os.close(fd)
    except FileNotFoundError:
        return False  # never taken on this lock_dir


@contextmanager
def _guard(path: Path, *, create: bool = True) -> Iterator[bool]:
    flags = os.O_RDONLY | (os.O_CREAT if create else 0)
    fd = open_nofollow(path, flags, _file_mode(path.parent) if create else 0o600)
    try:
        deadline = time.monotonic() + _GUARD_WAIT_S
        while not (got := _flock_nonblocking(fd)) and time.monotonic() < deadline:
            time.sleep(0.005)
        yield got
    finally:
        os.close(fd)


def _lock_file(path: Path) -> OverlapLock | None:
    # flock works on a read-only descriptor, so the lock file never needs to be writable.
    fd = open_nofollow(path, os.O_RDONLY | os.O_CREAT, _file_mode(path.parent))
    try:
        locked = _flock_nonblocking(fd)
    except BaseException:
        os.close(fd)
        raise
    if not locked:
        os.close(fd)
        return None
    return OverlapLock(fd, path)


def _record_holder(lock: OverlapLock, holder_path: Path, me: HolderInfo) -> OverlapLock:
    record = {"host": me.host, "pid": me.pid, "started": _iso(me.started)}
    try:
        # Not fsynced: the record only matters while the lock is held, and no lock survives a
        # reboot; an fsync here would cost every run a disk flush for nothing.
        data = _dumps(record)
        write_atomic(holder_path, data, _file_mode(holder_path.parent), durable=False)
    except BaseException:
        lock.release()
        raise
    return lock


def _read_holder(path: Path) -> HolderInfo | None:
    record = _read_record(path)
    if record is None:
        return None
    host, pid, started = record.get("host"), record.get("pid"), _parse_time(record.get("started"))
    if not isinstance(host, str) or not isinstance(pid, int) or started is None:
        return None
    return HolderInfo(host=host, pid=pid, started=started)


# --- occurrence claims (SPEC 4.3) ---------------------------------------------------------


def _claim_stamp(occurrence: datetime) -> str:
    moment = _utc(occurrence)
    if moment.second or moment.microsecond:
        raise ValueError(f"occurrence {moment.isoformat()} is not on a whole minute")
    return moment.strftime(_CLAIM_STAMP)


def claim_occurrence(
    lock_dir: Path, task: str, occurrence: datetime, *, host: str, pid: int, now: datetime
) -> bool:
    """Claim one occurrence of ``task`` for this machine; False if someone already has.

    The claim is ``claims/TASK@YYYYMMDDTHHMMZ``, keyed by the occurrence's UTC minute (not
    this machine's clock), created with ``O_CREAT|O_EXCL|O_NOFOLLOW`` so exactly one
    contender wins, then filled with host, pid and time and fsynced. It is never released;
    :func:`sweep_claims` removes it after a week. Anything already at that name, even a
    symlink, counts as taken and is never written through.
    """
    directory = ensure_private_dir(lock_dir / "claims")
    path = _task_path(directory, task, "@" + _claim_stamp(occurrence))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, _file_mode(directory))
    except FileExistsError:
        return False
    record = {"host": host, "pid": pid, "claimed": _iso(now), "occurrence": _iso(occurrence)}
    try:
        try:
            os.write(fd, _dumps(record))
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        # A claim we cannot record is given back so that another machine may still run it.
        with suppress(OSError):
            path.unlink()
        raise
    fsync_dir(directory)
    return True


def claim_exists(lock_dir: Path, task: str, occurrence: datetime) -> bool:
    """Whether some machine has claimed this occurrence (for ``run --dry-run``; takes nothing)."""
    path = _task_path(lock_dir / "claims", task, "@" + _claim_stamp(occurrence))
    return os.path.lexists(path)


def sweep_claims(lock_dir: Path, *, now: datetime, max_age: timedelta = timedelta(days=7)) -> int:
    """Delete claims whose occurrence is older than ``max_age``; return how many went.

    Age comes from the occurrence in the file name, not the mtime, which a copy or a clock
    on another machine could distort. Housekeeping never fails a run: a claim that another
    machine swept first, or that cannot be removed, is left alone.
    """
    # Stamps are fixed-width digits, so text order is time order: an hourly sweep of a week
    # of every-minute claims (10,080 files) compares strings instead of parsing each date.
    cutoff = (_utc(now) - max_age).strftime(_CLAIM_STAMP)
    removed = 0
    try:
        with os.scandir(lock_dir / "claims") as listing:
            entries = list(listing)
    except OSError:
        return 0
    for entry in entries:
        stem, at, stamp = entry.name.rpartition("@")
        if not at or stamp >= cutoff or not _STAMP_SHAPE.fullmatch(stamp):
            continue
        if _task_from_stem(stem) is not None:
            with suppress(OSError):
                Path(entry.path).unlink()
                removed += 1
    return removed


# --- pause markers (SPEC 5.3) -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PauseInfo:
    """An operator pause: why, since when, and who set it from where (None when unknown)."""

    reason: str | None
    since: datetime | None
    host: str | None
    user: str | None


def set_pause(
    lock_dir: Path, task: str, *, reason: str | None, now: datetime, host: str, user: str
) -> None:
    """Mark ``task`` paused (atomically; pausing again replaces the reason and time)."""
    directory = ensure_private_dir(lock_dir / "paused")
    path = _task_path(directory, task, ".pause")
    record = {"reason": reason, "since": _iso(now), "host": host, "user": user}
    write_atomic(path, _dumps(record), _file_mode(directory), durable=True)


def clear_pause(lock_dir: Path, task: str) -> bool:
    """Remove ``task``'s pause marker; False if it was not paused."""
    path = _task_path(lock_dir / "paused", task, ".pause")
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    fsync_dir(path.parent)
    return True


def read_pause(lock_dir: Path, task: str) -> PauseInfo | None:
    """Return ``task``'s pause, or None when it is not paused."""
    path = _task_path(lock_dir / "paused", task, ".pause")
    if not os.path.lexists(path):
        return None
    return _pause_from_record(_read_record(path))


def paused_tasks(lock_dir: Path) -> dict[str, PauseInfo]:
    """Every paused task in ``lock_dir``, from one directory listing (empty when none)."""
    try:
        with os.scandir(lock_dir / "paused") as listing:
            entries = list(listing)
    except OSError:
        return {}
    paused: dict[str, PauseInfo] = {}
    for entry in entries:
        stem, dot, suffix = entry.name.rpartition(".")
        task = _task_from_stem(stem) if dot and suffix == "pause" else None
        if task is not None:
            paused[task] = _pause_from_record(_read_record(Path(entry.path)))
    return paused


def _pause_from_record(record: dict[str, object] | None) -> PauseInfo:
    # The marker's presence is the pause; a damaged record still pauses, with nothing to say.
    record = record or {}
    reason, host, user = record.get("reason"), record.get("host"), record.get("user")
    return PauseInfo(
        reason=reason if isinstance(reason, str) else None,
        since=_parse_time(record.get("since")),
        host=host if isinstance(host, str) else None,
        user=user if isinstance(user, str) else None,
    )
