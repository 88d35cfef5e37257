"""A ``[[group]]``'s slots as ``LOCK_DIR/groups/GROUP.N.slot`` (N < max_running), each a
flock on cronctl's own close-on-exec descriptor for one task's run (docs/guarantees.md): a
task closing its descriptors cannot free it; its cronctl's exit does. N is the last dotted
part, so two group names never share a file."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from cronctl.coord.files.layout import lock_file, mode_under
from cronctl.core.model import GROUP_NAME
from cronctl.edge.safefiles import ensure_private_dir, open_dir


@dataclass(slots=True, eq=False, repr=False)
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
