"""Coordination as files inside ``lock_dir``: where each file lives, the small JSON records
they hold, and the flock every lock here is (docs/guarantees.md)::

    LOCK_DIR/overlap/TASK.lock       kernel lock (flock) held for the whole run (overlap.py)
    LOCK_DIR/overlap/TASK.holder     who holds it: host, pid, start, the command (JSON)
    LOCK_DIR/overlap/TASK.guard      serialises "try the lock + read/write .holder"
    LOCK_DIR/claims/TASK@YYYYMMDDTHHMMZ   one per occurrence, never released (claims.py)
                                          (…THHMMSSZ: the 2nd, 3rd… after a DST gap)
    LOCK_DIR/paused/TASK.pause       operator pause (JSON; pauses.py)
    LOCK_DIR/groups/GROUP.N.slot     a group's slots (slots.py)

A task name's ``:`` is ``%`` in file names: a cifs ``lock_dir`` rejects ``:``, and no task
name holds ``%``, so the mapping is reversible. Every file is opened with ``O_NOFOLLOW``."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from cronctl.core.model import TASK_NAME
from cronctl.edge.safefiles import open_nofollow
from cronctl.errors import UnsafeDirectoryError

MAX_RECORD_BYTES = 64 * 1024


def file_stem(task: str) -> str:
    if not re.fullmatch(TASK_NAME, task):
        raise ValueError(f"invalid task name {task!r}: it must match {TASK_NAME}")
    return task.replace(":", "%")


def task_from_stem(stem: str) -> str | None:
    task = stem.replace("%", ":")
    return task if re.fullmatch(TASK_NAME, task) else None


def task_path(directory: Path, task: str, suffix: str) -> Path:
    """The task's file ``TASK<suffix>`` in ``directory``, never outside it."""
    name = file_stem(task) + suffix
    text = f"{directory}/{name}"
    # The name pattern already excludes '/', but this is the check that a path never escapes
    # (text, not pathlib: every guarded run asks it three times).
    if "/" in name or os.path.normpath(text) != text:
        raise ValueError(f"task {task!r} does not map to a file inside {directory}")
    return Path(text)


def file_mode(directory: Path) -> int:
    return mode_under(directory.stat().st_mode)


def mode_under(dir_mode: int) -> int:
    # A setgid lock_dir is shared by a group on purpose; let the group read who holds what.
    return 0o640 if dir_mode & stat.S_ISGID else 0o600


def iso(moment: datetime) -> str:
    return utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"naive datetime {moment!r}: cronctl only works with aware times")
    return moment.astimezone(UTC)


def dumps(record: Mapping[str, object]) -> bytes:
    import json  # only where a record is written: a quiet `run` never needs it

    return json.dumps(record).encode()


def read_record(path: Path | str, dir_fd: int | None = None) -> dict[str, object] | None:
    """A small JSON record written here; None when missing or unreadable."""
    try:
        fd = open_nofollow(path, os.O_RDONLY, dir_fd=dir_fd)
    except (OSError, UnsafeDirectoryError):
        return None
    try:
        raw = os.read(fd, MAX_RECORD_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    return parse_record(raw)


def parse_record(raw: bytes) -> dict[str, object] | None:
    import json  # only where a record is read, likewise (tests/cli/test_main.py)

    try:
        record = json.loads(raw.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):  # RecursionError: nesting thousands deep
        return None
    return record if isinstance(record, dict) else None


def parse_time(value: object) -> datetime | None:
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


def flock_nonblocking(fd: int) -> bool:
    """Take the flock on ``fd`` without waiting; False when another description holds it.
    Not filelock: importing it slows every guarded `run` (docs/architecture.md)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _CONTENDED:
            return False
        raise
    return True


def lock_file(path: str, mode: int, dir_fd: int | None = None) -> int | None:
    """Open ``path`` (made if need be; read-only: flock needs no more) and flock it without
    waiting: the descriptor, or None when another description holds the lock."""
    fd = open_nofollow(path, os.O_RDONLY | os.O_CREAT, mode, dir_fd=dir_fd)
    try:
        locked = flock_nonblocking(fd)
    except BaseException:
        os.close(fd)
        raise
    if not locked:
        os.close(fd)
        return None
    return fd


def entries(directory: Path) -> list[os.DirEntry[str]]:
    """The directory's entries; none when it cannot be listed (housekeeping never fails)."""
    try:
        with os.scandir(directory) as listing:
            return list(listing)
    except OSError:
        return []
