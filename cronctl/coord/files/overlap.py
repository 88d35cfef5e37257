"""Overlap locks as files in ``LOCK_DIR/overlap`` (layout.py): a flock held for the whole
run, a holder record beside it, and a guard serialising the two."""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager, suppress
from datetime import datetime, timedelta
from pathlib import Path

from cronctl.coord.files import layout
from cronctl.coord.liveness import command_lives
from cronctl.coord.port import HolderInfo, Overlap
from cronctl.core.process_id import ProcessId
from cronctl.edge.process import procs
from cronctl.edge.safefiles import ensure_private_dir, open_dir, open_nofollow

# The guard is held for a few system calls; waiting longer means its holder is stopped.
_GUARD_WAIT_S = 5.0


class OverlapDir:
    """``LOCK_DIR/overlap``, checked and opened once for a run's many locks, whose files are
    opened relative to it: the directories above are not walked again, nor swapped."""

    __slots__ = ("fd", "mode", "path")

    def __init__(self, lock_dir: Path) -> None:
        self.path = ensure_private_dir(lock_dir / "overlap", within=lock_dir)
        fd, st = open_dir(self.path)
        self.fd: int | None = fd
        self.mode = layout.mode_under(st.st_mode)

    def file(self, stem: str, suffix: str) -> str:
        """As text (opened by name through :attr:`fd`; the rest is for messages)."""
        return f"{self.path}/{stem}{suffix}"

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)


class OverlapLock:
    """A held overlap lock: a descriptor carrying a ``flock``, which the task inherits
    (``pass_fds``, never ``preexec_fn``) so the lock outlives cronctl (docs/guarantees.md).
    Not ``filelock``: it closes its descriptor in children and unlocks on release."""

    __slots__ = ("_fd", "_holder", "_holder_fd", "path")

    def __init__(self, fd: int, path: Path | str) -> None:
        self._fd: int | None = fd
        self.path = path
        self._holder: HolderInfo | None = None
        self._holder_fd: int | None = None  # the holder record, rewritten in place

    def record_command(self, pid: int) -> None:
        """Add the command's identity to the holder record: if the task closes its descriptor
        and cronctl dies, the record still tells a contender that the task lives on."""
        who = procs.identify(pid)
        if who is None or self._holder is None or self._holder_fd is None:
            return
        self._holder = HolderInfo(
            self._holder.host, self._holder.pid, self._holder.started, who, self._holder.timeout
        )
        _write_holder(self._holder_fd, self._holder)

    @property
    def fd(self) -> int:
        if self._fd is None:
            raise ValueError(f"overlap lock {self.path} was already released")
        return self._fd

    def release(self) -> None:
        """Close cronctl's descriptor; idempotent. Never ``LOCK_UN``: that acts on the
        description the task's processes share, dropping the lock under a running task."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        holder_fd, self._holder_fd = self._holder_fd, None
        if holder_fd is not None:
            os.close(holder_fd)


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
) -> Overlap:
    """Try, without waiting, to take ``task``'s lock (``directory``: already open, else opened
    for this call). A holder that started more than ``lease`` before ``now`` is overtaken: its
    file unlinked (it keeps the orphaned inode) and a fresh one locked. The guard keeps a
    contender from reading the previous holder's record between a new holder's flock and its
    write (an old start would look stuck). A free flock whose last holder's command (or
    group) still runs on this boot counts as held: the task closed its descriptor."""
    with ExitStack() as opened:
        if directory is None:
            directory = opened.enter_context(closing(OverlapDir(lock_dir)))
        dir_fd, mode = directory.fd, directory.mode
        assert dir_fd is not None  # closed only with no attempt in flight (FilesCoordinator)
        stem = layout.file_stem(task)  # the name check, once
        lock_path, holder_path = directory.file(stem, ".lock"), directory.file(stem, ".holder")
        me = HolderInfo(host=host, pid=pid, started=layout.utc(now), timeout=timeout)
        with _guard(directory.file(stem, ".guard"), mode, dir_fd) as guarded:
            lock = _lock_file(lock_path, mode, dir_fd)
            if lock is not None:
                # One descriptor of the holder record: the previous holder's is read through it
                # and ours written through it (see _record_holder).
                fd = _open_holder(lock, holder_path, mode, dir_fd)
                try:
                    old = os.pread(fd, layout.MAX_RECORD_BYTES, 0)
                except OSError:
                    old = b""
                # Without the guard the record may be stale, so it is not evidence either way.
                previous = _holder_from(layout.parse_record(old)) if guarded and old else None
                if previous is None or not command_lives(previous):
                    return Overlap("acquired", _record_holder(lock, fd, me, len(old)), None)
                if not _past_lease(previous, me, lease):
                    os.close(fd)
                    lock.release()
                    return Overlap("held", None, previous)
                return Overlap("overtaken", _record_holder(lock, fd, me, len(old)), previous)
            holder = _holder_from(layout.read_record(holder_path, dir_fd))
            # Without the guard the record may be stale, so it is not evidence of a stuck run.
            if not guarded or holder is None or not _past_lease(holder, me, lease):
                return Overlap("held", None, holder)
            with suppress(FileNotFoundError):
                os.unlink(lock_path.rpartition("/")[2], dir_fd=dir_fd)
            lock = _lock_file(lock_path, mode, dir_fd)
            if lock is None:
                return Overlap("held", None, holder)
            fd = _open_holder(lock, holder_path, mode, dir_fd)
            # The old record was not read here: cut whatever it was to the new one's length.
            return Overlap("overtaken", _record_holder(lock, fd, me, None), holder)


def overlap_held(lock_dir: Path, task: str) -> bool:
    """Whether ``task``'s overlap lock is held right now; creates nothing. flock has no
    "test", so this takes and drops the lock, under the guard: a contender waits for the
    guard instead of mistaking the probe for a run."""
    directory = lock_dir / "overlap"
    try:
        with _guard(layout.task_path(directory, task, ".guard")) as guarded:
            fd = open_nofollow(layout.task_path(directory, task, ".lock"), os.O_RDONLY)
            try:
                if not guarded or not layout.flock_nonblocking(fd):
                    return True
            finally:
                os.close(fd)
            holder = _holder_from(layout.read_record(layout.task_path(directory, task, ".holder")))
            return holder is not None and command_lives(holder)
    except FileNotFoundError:
        return False  # never taken on this lock_dir


@contextmanager
def _guard(path: Path | str, mode: int | None = None, dir_fd: int | None = None) -> Iterator[bool]:
    """Whether the guard was taken within _GUARD_WAIT_S; made with ``mode``, if given."""
    flags = os.O_RDONLY if mode is None else os.O_RDONLY | os.O_CREAT
    fd = open_nofollow(path, flags, mode or 0o600, dir_fd=dir_fd)
    try:
        deadline = time.monotonic() + _GUARD_WAIT_S
        while not (got := layout.flock_nonblocking(fd)) and time.monotonic() < deadline:
            time.sleep(0.005)
        yield got
    finally:
        os.close(fd)


def _lock_file(path: str, mode: int, dir_fd: int) -> OverlapLock | None:
    fd = layout.lock_file(path, mode, dir_fd)
    return None if fd is None else OverlapLock(fd, path)


def _past_lease(holder: HolderInfo, me: HolderInfo, lease: timedelta | None) -> bool:
    return lease is not None and me.started - holder.started > lease


def _open_holder(lock: OverlapLock, holder_path: str, mode: int, dir_fd: int) -> int:
    try:
        return open_nofollow(holder_path, os.O_RDWR | os.O_CREAT, mode, dir_fd=dir_fd)
    except BaseException:
        lock.release()
        raise


def _record_holder(lock: OverlapLock, fd: int, me: HolderInfo, old_size: int | None) -> OverlapLock:
    """Write ``me`` under the guard on ``fd``, ``old_size`` bytes long (None: unknown). In
    place, not renamed (cheaper): every reader that acts on it holds the guard; a read torn by
    record_command's unguarded write parses as no record, which only a flock holder sees."""
    lock._holder, lock._holder_fd = me, fd
    try:
        _write_holder(fd, me, truncate=old_size is None or old_size > _HOLDER_WIDTH)
    except BaseException:
        lock.release()
        raise
    return lock


#: Holder records are padded with spaces (JSON allows them) so writing one over another
#: needs no truncation; a longer one is cut to its own length.
_HOLDER_WIDTH = 512


def _write_holder(fd: int, holder: HolderInfo, truncate: bool = False) -> None:
    record: dict[str, object] = {
        "host": holder.host,
        "pid": holder.pid,
        "started": layout.iso(holder.started),
    }
    if holder.timeout is not None:
        record["timeout_s"] = holder.timeout.total_seconds()
    if holder.command is not None:
        command = holder.command
        record["command"] = {"pid": command.pid, "start": command.start_ticks, "boot": command.boot}
    # Not fsynced: the record only matters while the task lives, and no task survives a
    # reboot (the boot id says so); an fsync here would cost every run a disk flush.
    data = layout.dumps(record)
    if len(data) < _HOLDER_WIDTH:
        data = data.ljust(_HOLDER_WIDTH)
    if os.pwrite(fd, data, 0) != len(data):
        raise OSError(errno.ENOSPC, "short write of the overlap holder record")
    if truncate or len(data) > _HOLDER_WIDTH:
        os.ftruncate(fd, len(data))


def _holder_from(record: dict[str, object] | None) -> HolderInfo | None:
    if record is None:
        return None
    host, pid = record.get("host"), record.get("pid")
    started = layout.parse_time(record.get("started"))
    if not isinstance(host, str) or not isinstance(pid, int) or started is None:
        return None
    timeout_s = record.get("timeout_s")
    timeout = None
    if isinstance(timeout_s, int | float) and 0 <= timeout_s < 10**9:
        timeout = timedelta(seconds=timeout_s)
    command, value = None, record.get("command")
    if isinstance(value, dict):
        cpid, start, boot = value.get("pid"), value.get("start"), value.get("boot")
        # Linux pids never exceed 2**22 (PID_MAX_LIMIT); a larger one is a damaged record.
        if isinstance(cpid, int) and isinstance(start, int) and isinstance(boot, str):
            command = ProcessId(cpid, start, boot) if 0 < cpid <= 2**22 else None
    return HolderInfo(host, pid, started, command, timeout)
