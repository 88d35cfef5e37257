"""The slots of a ``[[group]]`` as files in ``lock_dir`` (docs/guarantees.md)::

    LOCK_DIR/groups/GROUP.N.slot    N = 0 .. max_running - 1; a flock held by a cronctl
                                    process for the whole run of one task of the group

A run takes the first free slot. The flock is on cronctl's own descriptor, close-on-exec and
never handed to the task: a task that closes every descriptor it inherited cannot free its
group's slot under it, and the slot is freed when its cronctl lets go or dies (the kernel
drops the flock of a dead process at once). The slot number is the last dotted part before
``.slot``, so two group names never share a file (a name may hold dots, a number cannot).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from cronctl.coord.files.layout import lock_file, mode_under
from cronctl.core.model import GROUP_NAME
from cronctl.edge.safefiles import ensure_private_dir, open_dir


@dataclass(slots=True)
class FileSlot:
    _fd: int | None
    path: str

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def try_slot(lock_dir: Path, group: str, size: int) -> FileSlot | None:
    if not re.fullmatch(GROUP_NAME, group):
        raise ValueError(f"invalid group name {group!r}: it must match {GROUP_NAME}")
    directory = ensure_private_dir(lock_dir / "groups", within=lock_dir)
    dir_fd, st = open_dir(directory)
    mode = mode_under(st.st_mode)
    stem = group.replace(":", "%")  # as a task's: a cifs lock_dir refuses ':'
    try:
        for number in range(size):
            path = f"{directory}/{stem}.{number}.slot"
            if (fd := lock_file(path, mode, dir_fd)) is not None:
                return FileSlot(fd, path)
        return None
    finally:
        os.close(dir_fd)
