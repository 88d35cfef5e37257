"""Coordination as files inside ``lock_dir``: where each file lives, the small JSON records
they hold, and the flock every lock here is.

Layout (task names are validated, so each becomes exactly one file name; what each promises
is in docs/guarantees.md)::

    LOCK_DIR/overlap/TASK.lock       kernel lock (flock) held for the whole run (overlap.py)
    LOCK_DIR/overlap/TASK.holder     who holds it: host, pid, start, the command (JSON)
    LOCK_DIR/overlap/TASK.guard      serialises "try the lock + read/write .holder"
    LOCK_DIR/claims/TASK@YYYYMMDDTHHMMZ   one per occurrence, never released (claims.py)
                                          (…THHMMSSZ: the 2nd, 3rd… after a DST gap)
    LOCK_DIR/paused/TASK.pause       operator pause (JSON; pauses.py)
    LOCK_DIR/groups/GROUP.N.slot     a group's slots (slots.py)

A ``:`` in a task name is written as ``%`` in file names: Windows servers behind a cifs
``lock_dir`` reject ``:``, and ``%`` can never occur in a task name, so the mapping is reversible
and keeps names as short as the task's (a 100-character name still fits NAME_MAX).

Every file is opened with ``O_NOFOLLOW`` (see :func:`cronctl.edge.safefiles.open_nofollow`).
"""

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

__all__ = [
    "MAX_RECORD_BYTES",
    "dumps",
    "file_mode",
    "file_stem",
    "flock_nonblocking",
    "iso",
    "mode_under",
    "parse_record",
    "parse_time",
    "read_record",
    "task_from_stem",
    "task_path",
    "utc",
]

MAX_RECORD_BYTES = 64 * 1024


def file_stem(task: str) -> str:
    """The task's name as it is written in file names (``:`` as ``%``)."""
    if not re.fullmatch(TASK_NAME, task):
        raise ValueError(f"invalid task name {task!r}: it must match {TASK_NAME}")
    return task.replace(":", "%")


def task_from_stem(stem: str) -> str | None:
    """The task a file name's stem names; None when it names none."""
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
    """The mode of a new file in ``directory``."""
    return mode_under(directory.stat().st_mode)


def mode_under(dir_mode: int) -> int:
    """The mode of a new file in a directory of mode ``dir_mode``."""
    # A setgid lock_dir is shared by a group on purpose; let the group read who holds what.
    return 0o640 if dir_mode & stat.S_ISGID else 0o600


def iso(moment: datetime) -> str:
    """An aware time as a record holds it (UTC, to the second)."""
    return utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc(moment: datetime) -> datetime:
    """An aware time in UTC (a naive one is refused)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"naive datetime {moment!r}: cronctl only works with aware times")
    return moment.astimezone(UTC)


def dumps(record: Mapping[str, object]) -> bytes:
    """A record as the bytes of its file."""
    import json  # only where a record is written: a quiet `run` never needs it

    return json.dumps(record).encode()


def _loads(text: str) -> object:
    import json  # only where a record is read, likewise (tests/cli/test_main.py)

    return json.loads(text)


def read_record(path: Path | str, dir_fd: int | None = None) -> dict[str, object] | None:
    """Read a small JSON record written here; None when missing or unreadable."""
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
    """The record in a file's bytes; None when they hold none."""
    try:
        record = _loads(raw.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):  # RecursionError: nesting thousands deep
        return None
    return record if isinstance(record, dict) else None


def parse_time(value: object) -> datetime | None:
    """A record's time (UTC); None when it holds none."""
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
    """Take the flock on ``fd`` without waiting; False when another description holds it."""
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
