"""Overlap locks, occurrence claims and pause markers, all as files inside ``lock_dir``.

Layout (task names are validated, so each becomes exactly one file name; what each promises
is in docs/guarantees.md)::

    LOCK_DIR/overlap/TASK.lock       kernel lock (flock) held for the whole run
    LOCK_DIR/overlap/TASK.holder     who holds it: host, pid, start, the command (JSON)
    LOCK_DIR/overlap/TASK.guard      serialises "try the lock + read/write .holder"
    LOCK_DIR/claims/TASK@YYYYMMDDTHHMMZ   one per occurrence, never released
                                          (…THHMMSSZ: the 2nd, 3rd… after a DST gap)
    LOCK_DIR/paused/TASK.pause       operator pause (JSON)

A ``:`` in a task name is written as ``%`` in file names: Windows servers behind a cifs
``lock_dir`` reject ``:``, and ``%`` can never occur in a task name, so the mapping is reversible
and keeps names as short as the task's (a 100-character name still fits NAME_MAX).

Every file is opened with ``O_NOFOLLOW`` (see :func:`cronctl.edge.paths.open_nofollow`).

A lock is a lease, not a transaction: work that must never run twice has to be idempotent or
fenced downstream.
"""

from __future__ import annotations

import errno
import fcntl
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

from cronctl.coord.liveness import command_lives
from cronctl.coord.port import HolderInfo, PauseInfo
from cronctl.core.due import CLAIM_SWEEP_AGE
from cronctl.core.model import TASK_NAME
from cronctl.core.process_id import ProcessId
from cronctl.edge.paths import (
    ensure_private_dir,
    fsync_dir,
    open_dir,
    open_nofollow,
    write_atomic,
)
from cronctl.edge.process import procs
from cronctl.errors import UnsafeDirectoryError

__all__ = [
    "OverlapDir",
    "OverlapLock",
    "OverlapResult",
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

_CLAIM_STAMP = "%Y%m%dT%H%MZ"
_CLAIM_STAMP_SECONDS = "%Y%m%dT%H%M%SZ"
# A claim's stamp: the occurrence's minute, with seconds for the 2nd, 3rd... after a DST gap.
_STAMP_SHAPE = r"[0-9]{8}T[0-9]{4}(?:[0-9]{2})?Z"
# The guard is held for a few system calls; waiting longer means its holder is stopped.
_GUARD_WAIT_S = 5.0
_MAX_RECORD_BYTES = 64 * 1024


# --- names and files ----------------------------------------------------------------------


def _file_stem(task: str) -> str:
    if not re.fullmatch(TASK_NAME, task):
        raise ValueError(f"invalid task name {task!r}: it must match {TASK_NAME}")
    return task.replace(":", "%")


def _task_from_stem(stem: str) -> str | None:
    task = stem.replace("%", ":")
    return task if re.fullmatch(TASK_NAME, task) else None


def _task_path(directory: Path, task: str, suffix: str) -> Path:
    return _stem_path(directory, _file_stem(task), suffix, task)


def _stem_path(directory: Path, stem: str, suffix: str, task: str) -> Path:
    name = stem + suffix
    text = f"{directory}/{name}"
    # The name pattern already excludes '/', but this is the check that a path never escapes
    # (text, not pathlib: every guarded run asks it three times).
    if "/" in name or os.path.normpath(text) != text:
        raise ValueError(f"task {task!r} does not map to a file inside {directory}")
    return Path(text)


def _file_mode(directory: Path) -> int:
    return _mode_under(directory.stat().st_mode)


def _mode_under(dir_mode: int) -> int:
    # A setgid lock_dir is shared by a group on purpose; let the group read who holds what.
    return 0o640 if dir_mode & stat.S_ISGID else 0o600


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
    import json  # only where a record is read, likewise (tests/cli/test_main.py)

    return json.loads(text)


def _read_record(path: Path | str, dir_fd: int | None = None) -> dict[str, object] | None:
    """Read a small JSON object written by this module; None when missing or unreadable."""
    try:
        fd = open_nofollow(path, os.O_RDONLY, dir_fd=dir_fd)
    except (OSError, UnsafeDirectoryError):
        return None
    try:
        raw = os.read(fd, _MAX_RECORD_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    return _parse_record(raw)


def _parse_record(raw: bytes) -> dict[str, object] | None:
    try:
        record = _loads(raw.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):  # RecursionError: nesting thousands deep
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


#: What flock(LOCK_NB) says when another description holds the lock (EACCES on some
#: file systems, as filelock also reads it).
_CONTENDED = frozenset((errno.EACCES, errno.EAGAIN, errno.EWOULDBLOCK))


def _flock_nonblocking(fd: int) -> bool:
    # flock(LOCK_EX|LOCK_NB) on our own O_NOFOLLOW descriptor, as filelock's lock_descriptor
    # does; taken directly because importing filelock would slow every guarded `run`'s
    # start (docs/architecture.md#dependencies-and-why).
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _CONTENDED:
            return False
        raise
    return True


# --- overlap lock ---------------------------------------------------------------------------------


class OverlapDir:
    """``LOCK_DIR/overlap``, checked and opened once for many locks (a run takes one per
    guarded task): each lock's files are opened by name relative to this descriptor
    (``openat``), so the directories above them are neither walked nor checked again, and
    cannot be swapped under a run once it has checked them. :meth:`close` when done.
    """

    __slots__ = ("fd", "mode", "path")

    def __init__(self, lock_dir: Path) -> None:
        """Make or check ``lock_dir/overlap`` (within ``lock_dir``) and open it."""
        self.path = ensure_private_dir(lock_dir / "overlap", within=lock_dir)
        fd, st = open_dir(self.path)
        self.fd: int | None = fd
        self.mode = _mode_under(st.st_mode)

    def file(self, stem: str, suffix: str, task: str) -> str:
        """The path of one of a lock's files, as text: opened by its name through
        :attr:`dir_fd`, the rest is for messages (no pathlib: a guarded run asks three)."""
        name = stem + suffix
        if "/" in name or name in (".", ".."):  # the name pattern excludes these already
            raise ValueError(f"task {task!r} does not map to a file inside {self.path}")
        return f"{self.path}/{name}"

    @property
    def dir_fd(self) -> int:
        """The open directory."""
        if self.fd is None:
            raise ValueError(f"{self.path} was closed")
        return self.fd

    def close(self) -> None:
        """Close the directory; idempotent. Locks taken in it are not affected."""
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)


class OverlapLock:
    """A held overlap lock: an open descriptor carrying a ``flock``.

    Why not ``filelock.FileLock``: flock belongs to the open file description, and the
    guarantee (docs/guarantees.md) wants the lock to outlive cronctl for as long as the task
    runs. That means handing the descriptor to the child (``pass_fds``), and FileLock owns
    its descriptor privately, closes it in forked children (an at-fork hook) and unlocks the
    shared description on release. So this module opens the file itself (``O_NOFOLLOW``) and
    locks it with ``fcntl.flock``; the child must be started with ``start_new_session=True``
    and ``pass_fds=(lock.fd,)``, never ``preexec_fn`` (which would run at-fork hooks).
    """

    __slots__ = ("_fd", "_holder", "_holder_fd", "path")

    def __init__(self, fd: int, path: Path | str) -> None:
        """Wrap ``fd``, already locked, for the lock file at ``path``."""
        self._fd: int | None = fd
        self.path = path
        self._holder: HolderInfo | None = None
        self._holder_fd: int | None = None  # the holder record, rewritten in place

    def record_command(self, pid: int) -> None:
        """Add the started command's identity to the holder record.

        A task may close the descriptor it inherited (``os.closerange``, a shell closing every
        fd); if cronctl then dies, the flock is gone while the task still runs. The record
        (pid, start time, boot) lets the next contender see that the task lives on. A command
        that already exited is not recorded: there is nothing left to protect.
        """
        who = procs.identify(pid)
        if who is None or self._holder is None or self._holder_fd is None:
            return
        self._holder = HolderInfo(
            self._holder.host, self._holder.pid, self._holder.started, who, self._holder.timeout
        )
        _write_holder(self._holder_fd, self._holder)

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
        holder_fd, self._holder_fd = self._holder_fd, None
        if holder_fd is not None:
            os.close(holder_fd)


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
    timeout: timedelta | None = None,
    directory: OverlapDir | None = None,
) -> OverlapResult:
    """Try, without waiting, to take ``task``'s overlap lock in ``lock_dir``.

    ``lease`` is None for ``without_overlapping = true`` (no expiry); with a duration, a lock
    whose holder started more than ``lease`` before ``now`` is overtaken: its file is unlinked
    (the stuck holder keeps its lock on the orphaned inode) and a fresh one is locked.

    The attempt and the ``.holder`` record happen under a short guard lock, so a contender
    never reads the previous holder's record in the instant between the new holder's flock
    and its write; without that, yesterday's start time could make a fresh run look stuck.

    The flock is the first line of defence; the second is the holder record's command
    (:meth:`OverlapLock.record_command`): a free flock whose last holder's command, or a
    member of its process group, still runs on this host and boot counts as held, since the
    task closed the descriptor it was given. ``timeout`` is recorded so that a contender can
    tell a holder that should have been killed long ago.

    ``directory``: ``lock_dir``'s overlap directory, already opened (a run taking many locks
    opens it once); without it, it is opened for this call.
    """
    if directory is None:
        directory = OverlapDir(lock_dir)
        try:
            return _try_overlap_lock(directory, task, lease, now, host, pid, timeout)
        finally:
            directory.close()
    return _try_overlap_lock(directory, task, lease, now, host, pid, timeout)


def _try_overlap_lock(
    directory: OverlapDir,
    task: str,
    lease: timedelta | None,
    now: datetime,
    host: str,
    pid: int,
    timeout: timedelta | None,
) -> OverlapResult:
    dir_fd, mode = directory.dir_fd, directory.mode
    stem = _file_stem(task)  # the name check, once
    lock_path = directory.file(stem, ".lock", task)
    holder_path = directory.file(stem, ".holder", task)
    me = HolderInfo(host=host, pid=pid, started=_utc(now), timeout=timeout)
    with _guard(directory.file(stem, ".guard", task), mode=mode, dir_fd=dir_fd) as guarded:
        lock = _lock_file(lock_path, mode, dir_fd)
        if lock is not None:
            # One descriptor of the holder record: the previous holder's is read through it
            # and ours written through it (see _record_holder).
            fd = _open_holder(lock, holder_path, mode, dir_fd)
            old = _pread_all(fd)
            # Without the guard the record may be stale, so it is not evidence either way.
            previous = _holder_from(_parse_record(old)) if guarded and old else None
            if previous is None or not command_lives(previous):
                return OverlapResult("acquired", _record_holder(lock, fd, me, len(old)), None)
            if not _past_lease(previous, me, lease):
                os.close(fd)
                lock.release()
                return OverlapResult("held", None, previous)
            return OverlapResult("overtaken", _record_holder(lock, fd, me, len(old)), previous)
        holder = _holder_from(_read_record(holder_path, dir_fd))
        # Without the guard the record may be stale, so it is not evidence of a stuck run.
        if not guarded or holder is None or not _past_lease(holder, me, lease):
            return OverlapResult("held", None, holder)
        with suppress(FileNotFoundError):
            os.unlink(lock_path.rpartition("/")[2], dir_fd=dir_fd)
        lock = _lock_file(lock_path, mode, dir_fd)
        if lock is None:
            return OverlapResult("held", None, holder)
        fd = _open_holder(lock, holder_path, mode, dir_fd)
        # The old record was not read here: cut whatever it was to the new one's length.
        return OverlapResult("overtaken", _record_holder(lock, fd, me, None), holder)


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
                if not guarded or not _flock_nonblocking(fd):
                    return True
            finally:
                os.close(fd)
            holder = _read_holder(_task_path(directory, task, ".holder"))
            return holder is not None and command_lives(holder)
    except FileNotFoundError:
        return False  # never taken on this lock_dir


@contextmanager
def _guard(
    path: Path | str, *, create: bool = True, mode: int | None = None, dir_fd: int | None = None
) -> Iterator[bool]:
    flags = os.O_RDONLY | (os.O_CREAT if create else 0)
    if mode is None:
        mode = _file_mode(Path(path).parent) if create else 0o600
    fd = open_nofollow(path, flags, mode, dir_fd=dir_fd)
    try:
        deadline = time.monotonic() + _GUARD_WAIT_S
        while not (got := _flock_nonblocking(fd)) and time.monotonic() < deadline:
            time.sleep(0.005)
        yield got
    finally:
        os.close(fd)


def _lock_file(path: Path | str, mode: int, dir_fd: int | None = None) -> OverlapLock | None:
    # flock works on a read-only descriptor, so the lock file never needs to be writable.
    fd = open_nofollow(path, os.O_RDONLY | os.O_CREAT, mode, dir_fd=dir_fd)
    try:
        locked = _flock_nonblocking(fd)
    except BaseException:
        os.close(fd)
        raise
    if not locked:
        os.close(fd)
        return None
    return OverlapLock(fd, path)


def _past_lease(holder: HolderInfo, me: HolderInfo, lease: timedelta | None) -> bool:
    return lease is not None and me.started - holder.started > lease


def _open_holder(lock: OverlapLock, holder_path: str, mode: int, dir_fd: int) -> int:
    """Open (or create) the holder record for reading and writing; the lock is let go if
    that fails."""
    try:
        return open_nofollow(holder_path, os.O_RDWR | os.O_CREAT, mode, dir_fd=dir_fd)
    except BaseException:
        lock.release()
        raise


def _pread_all(fd: int) -> bytes:
    try:
        return os.pread(fd, _MAX_RECORD_BYTES, 0)
    except OSError:
        return b""


def _record_holder(lock: OverlapLock, fd: int, me: HolderInfo, old_size: int | None) -> OverlapLock:
    """Write ``me`` as the holder record (under the guard) on ``fd``, whose content was
    ``old_size`` bytes long (None: not known), and keep ``fd`` in ``lock`` for
    :meth:`OverlapLock.record_command`.

    The record is rewritten in place, not replaced by rename: every reader that acts on it
    holds the guard, as this first write does; the second write (the command's identity) is
    not guarded, and a read torn by it parses as no record, which a contender holding no
    flock never sees (cronctl holds the flock while it writes). Two renames a run cost more
    than the rest of the guard.
    """
    lock._holder, lock._holder_fd = me, fd
    try:
        _write_holder(fd, me, truncate=old_size is None or old_size > _HOLDER_WIDTH)
    except BaseException:
        lock.release()
        raise
    return lock


#: Holder records are padded with spaces to this width (JSON allows them), so that writing
#: one over another never needs a truncation; a longer one (a very long host name) is cut
#: to its own length.
_HOLDER_WIDTH = 512


def _write_holder(fd: int, holder: HolderInfo, truncate: bool = False) -> None:
    record: dict[str, object] = {
        "host": holder.host,
        "pid": holder.pid,
        "started": _iso(holder.started),
    }
    if holder.timeout is not None:
        record["timeout_s"] = holder.timeout.total_seconds()
    if holder.command is not None:
        command = holder.command
        record["command"] = {"pid": command.pid, "start": command.start_ticks, "boot": command.boot}
    # Not fsynced: the record only matters while the task lives, and no task survives a
    # reboot (the boot id says so); an fsync here would cost every run a disk flush.
    data = _dumps(record)
    if len(data) < _HOLDER_WIDTH:
        data = data.ljust(_HOLDER_WIDTH)
    if os.pwrite(fd, data, 0) != len(data):
        raise OSError(errno.ENOSPC, "short write of the overlap holder record")
    if truncate or len(data) > _HOLDER_WIDTH:
        os.ftruncate(fd, len(data))


def _read_holder(path: Path) -> HolderInfo | None:
    return _holder_from(_read_record(path))


def _holder_from(record: dict[str, object] | None) -> HolderInfo | None:
    if record is None:
        return None
    host, pid, started = record.get("host"), record.get("pid"), _parse_time(record.get("started"))
    if not isinstance(host, str) or not isinstance(pid, int) or started is None:
        return None
    timeout_s = record.get("timeout_s")
    timeout = None
    if isinstance(timeout_s, int | float) and 0 <= timeout_s < 10**9:
        timeout = timedelta(seconds=timeout_s)
    return HolderInfo(host, pid, started, _read_command(record.get("command")), timeout)


def _read_command(value: object) -> ProcessId | None:
    if not isinstance(value, dict):
        return None
    pid, start, boot = value.get("pid"), value.get("start"), value.get("boot")
    if not isinstance(pid, int) or not isinstance(start, int) or not isinstance(boot, str):
        return None
    # Linux pids never exceed 2**22 (PID_MAX_LIMIT); a larger one is a damaged record.
    return ProcessId(pid, start, boot) if 0 < pid <= 2**22 else None


# --- occurrence claims ----------------------------------------------------------------------------


def _claim_stamp(occurrence: datetime) -> str:
    moment = _utc(occurrence)
    if moment.microsecond:
        raise ValueError(f"occurrence {moment.isoformat()} is not on a whole second")
    # A whole minute keeps the short stamp. Seconds tell apart the several occurrences
    # the first minute after a DST gap carries (cronctl.core.due): TASK@YYYYMMDDTHHMMSSZ.
    return moment.strftime(_CLAIM_STAMP_SECONDS if moment.second else _CLAIM_STAMP)


def claim_occurrence(
    lock_dir: Path,
    task: str,
    occurrence: datetime,
    *,
    host: str,
    pid: int,
    now: datetime,
    leased: bool = False,
) -> bool:
    """Claim one occurrence of ``task`` for this machine; False if someone already has.

    The claim is ``claims/TASK@YYYYMMDDTHHMMZ``, keyed by the occurrence's UTC minute (not
    this machine's clock), created with ``O_CREAT|O_EXCL|O_NOFOLLOW`` so exactly one
    contender wins, then filled with host, pid and time and fsynced. It is never released;
    :func:`sweep_claims` removes it after a week. Anything already at that name, even a
    symlink, counts as taken and is never written through.

    A ``leased`` claim also names its cronctl for good (pid start time, boot) and holds
    until :func:`mark_started`; one whose cronctl is provably gone (this host, this boot,
    the process ended) and whose run was never marked started is taken over.
    """
    directory = ensure_private_dir(lock_dir / "claims", within=lock_dir)
    path = _task_path(directory, task, "@" + _claim_stamp(occurrence))
    record: dict[str, object] = {"host": host, "pid": pid, "claimed": _iso(now),
                                 "occurrence": _iso(occurrence)}  # fmt: skip
    if leased:
        me = procs.identify(pid)
        record.update(state="leased", boot=procs.boot_id(), pid_start=me and me.start_ticks)
    if not _write_new(path, record, _file_mode(directory)):
        return _take_over(path, host, pid)
    fsync_dir(directory)
    return True


def _write_new(path: Path, record: Mapping[str, object], mode: int) -> bool:
    """Create ``path`` (O_EXCL) holding ``record``, fsynced; False when it exists."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, mode)
    except FileExistsError:
        return False
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
    return True


#: The mark of a leased claim's run started (or taken over): ``claims/TASK@STAMP.start``.
_STARTED = ".start"


def _take_over(path: Path, host: str, pid: int) -> bool:
    """Whether the leased claim at ``path`` was this machine's to take, and is now: its
    cronctl provably gone (only this host's, of this boot, can be proved so) and its run
    never marked started. The start mark decides, so one contender wins."""
    record = _read_record(path)
    if record is None or record.get("state") != "leased" or record.get("host") != host:
        return False
    holder_pid, start, boot = record.get("pid"), record.get("pid_start"), record.get("boot")
    if not (isinstance(holder_pid, int) and isinstance(start, int) and isinstance(boot, str)):
        return False
    if boot != procs.boot_id() or procs.same_process_alive(ProcessId(holder_pid, start, boot)):
        return False
    return _start_mark(path, host, pid)


def _start_mark(path: Path, host: str, pid: int) -> bool:
    """Make (O_EXCL) or find the start mark of the claim at ``path``: whether it names us."""
    mark = path.with_name(path.name + _STARTED)
    if _write_new(mark, {"host": host, "pid": pid}, _file_mode(path.parent)):
        fsync_dir(path.parent)
        return True
    record = _read_record(mark)
    return record is not None and record.get("host") == host and record.get("pid") == pid


def mark_started(lock_dir: Path, task: str, occurrence: datetime, *, host: str, pid: int) -> bool:
    """Mark a leased claim's run started, before it starts: False when another machine took
    the claim over (this cronctl was taken for gone), and the run must not start."""
    directory = ensure_private_dir(lock_dir / "claims", within=lock_dir)
    return _start_mark(_task_path(directory, task, "@" + _claim_stamp(occurrence)), host, pid)


def claim_exists(lock_dir: Path, task: str, occurrence: datetime) -> bool:
    """Whether some machine has claimed this occurrence (for ``run --dry-run``; takes nothing)."""
    path = _task_path(lock_dir / "claims", task, "@" + _claim_stamp(occurrence))
    return os.path.lexists(path)


def sweep_claims(lock_dir: Path, *, now: datetime, max_age: timedelta = CLAIM_SWEEP_AGE) -> int:
    """Delete claims whose occurrence is older than ``max_age``; return how many went.

    Safe because no on_one_server task reaches back that far (``due.CLAIM_REACH``, a day
    shorter): a swept claim can never be wanted again.

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
        stem, at, stamp = entry.name.removesuffix(_STARTED).rpartition("@")
        # Compared by minute: 01:00:01 (a second occurrence after a DST gap) is as old as 01:00.
        if not at or f"{stamp[:13]}Z" >= cutoff or not re.fullmatch(_STAMP_SHAPE, stamp):
            continue
        if _task_from_stem(stem) is not None:
            with suppress(OSError):
                Path(entry.path).unlink()
                removed += 1
    return removed


# --- pause markers --------------------------------------------------------------------------------


def set_pause(
    lock_dir: Path, task: str, *, reason: str | None, now: datetime, host: str, user: str
) -> None:
    """Mark ``task`` paused (atomically; pausing again replaces the reason and time)."""
    directory = ensure_private_dir(lock_dir / "paused", within=lock_dir)
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
