"""Read a run's log (``STATE_DIR/logs/TASK/RUN_ID.log``) back: never through a planted link,
FIFO or device (README, Safety), in chunks, so a 200 MB log costs 64 KiB of memory."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from cronctl.core.model import TASK_NAME
from cronctl.edge.safefiles import open_nofollow, verify_dir

CHUNK_BYTES = 64 * 1024
# Run ids are `YYYYMMDDTHHMMZ-` and 16 hex digits (execute.new_run_id); nothing else names
# a log file, so a recorded path can never lead out of the task's log directory.
_LOG_NAME = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]*\.log")


def log_file(state_dir: Path, task: str, recorded: str) -> Path | None:
    """Where a run's log is: the recorded file name in the task's (checked) log directory,
    whatever directory the record says; None when it cannot be there."""
    name = Path(recorded).name
    if not re.fullmatch(TASK_NAME, task) or not _LOG_NAME.fullmatch(name):
        return None
    directory = state_dir / "logs" / task
    if not verify_dir(directory, within=state_dir):
        return None
    return directory / name


def log_chunks(path: Path) -> Iterator[bytes]:
    """:raises FileNotFoundError: swept; UnsafeDirectoryError: not a regular file of ours."""
    yield from log_chunks_from(path)


def log_chunks_from(path: Path, last_lines: int | None = None) -> Iterator[bytes]:
    fd = open_log(path)
    try:
        if last_lines is not None:
            os.lseek(fd, tail_start(fd, last_lines), os.SEEK_SET)
        yield from read_on(fd)
    finally:
        os.close(fd)


def open_log(path: Path) -> int:
    return open_nofollow(path, os.O_RDONLY)


def read_on(fd: int) -> Iterator[bytes]:
    while chunk := os.read(fd, CHUNK_BYTES):
        yield chunk


def tail_start(fd: int, lines: int) -> int:
    """Where the last `lines` lines begin, read backwards a chunk at a time."""
    end = os.fstat(fd).st_size
    if lines <= 0:
        return end
    position = end
    wanted = lines
    if end and os.pread(fd, 1, end - 1) == b"\n":
        wanted += 1  # the final newline ends the last line; it starts none
    while position > 0:
        size = min(CHUNK_BYTES, position)
        position -= size
        chunk = os.pread(fd, size, position)
        index = len(chunk)
        while True:
            index = chunk.rfind(b"\n", 0, index)
            if index < 0:
                break
            wanted -= 1
            if wanted == 0:
                return position + index + 1
    return 0


def last_bytes(log_path: str | None, fallback: str, limit: int) -> bytes:
    """The last ``limit`` bytes of a run's log, or of ``fallback`` when it is unreadable."""
    if log_path:
        try:
            fd = open_nofollow(Path(log_path), os.O_RDONLY)
            try:
                return os.pread(fd, limit, max(0, os.fstat(fd).st_size - limit))
            finally:
                os.close(fd)
        except OSError:
            pass
    return fallback.encode()[-limit:]
