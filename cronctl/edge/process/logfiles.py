"""Read a run's captured output back for `cronctl logs`: safely, and in constant memory.

The log lives at ``STATE_DIR/logs/TASK/RUN_ID.log``. Everything on the way is checked the
way cronctl checks what it writes (README, Safety): no directory or file is reached through a
symbolic link, a FIFO or device planted at the name is refused instead of blocking the
reader, and the output is handed on in chunks, so a 200 MB log costs 64 KiB of memory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from cronctl.edge.paths import open_nofollow, verify_dir

__all__ = ["CHUNK_BYTES", "log_chunks", "log_file"]

#: How much of a log is held in memory at once.
CHUNK_BYTES = 64 * 1024
# Run ids are `YYYYMMDDTHHMMZ-` and 16 hex digits (execute.new_run_id); nothing else names
# a log file, so a recorded path can never lead out of the task's log directory.
_LOG_NAME = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]*\.log")
_TASK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,99}")


def log_file(state_dir: Path, task: str, recorded: str) -> Path | None:
    """Where a run's log is, from the path its record names; None when it cannot be there.

    Only the file name of the recorded path is used: the directory is always the task's log
    directory inside ``state_dir`` (checked here), whatever the record says.
    """
    name = Path(recorded).name
    if not _TASK_NAME.fullmatch(task) or not _LOG_NAME.fullmatch(name):
        return None
    directory = state_dir / "logs" / task
    if not verify_dir(directory, within=state_dir):
        return None
    return directory / name


def log_chunks(path: Path) -> Iterator[bytes]:
    """The bytes of a log file, ``CHUNK_BYTES`` at a time.

    :raises FileNotFoundError: the log is gone (logs are swept after 14 days).
    :raises UnsafeDirectoryError: ``path`` is a link, a FIFO or anything but a regular file
        owned by root or the current user; nothing is read from it.
    """
    fd = open_nofollow(path, os.O_RDONLY)
    try:
        while chunk := os.read(fd, CHUNK_BYTES):
            yield chunk
    finally:
        os.close(fd)
