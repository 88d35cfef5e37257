"""Which file system holds a path (``/proc/self/mountinfo``), and whether several machines
can share it: for the warning that on_one_server relies on a lock_dir only this one sees."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

MOUNTINFO_PATH = Path("/proc/self/mountinfo")


@dataclass(frozen=True, slots=True)
class Mount:
    mount_point: str
    fstype: str
    source: str


# The kernel escapes space, tab, newline and backslash in mountinfo as three octal digits.
# Compiled on first use (re's cache), not at import: only the lock_dir probe reads mountinfo.
_OCTAL_ESCAPE = rb"\\([0-7]{3})"


def _unescape(field: str) -> str:
    raw = os.fsencode(field)
    decoded = re.sub(_OCTAL_ESCAPE, lambda m: bytes([int(m.group(1), 8)]), raw)
    return os.fsdecode(decoded)


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts in file order, split at the ``-`` since the optional fields vary (proc(5));
    a line off the format is skipped (it only feeds a warning)."""
    mounts: list[Mount] = []
    for line in text.splitlines():
        fields = line.split(" ")
        try:
            separator = fields.index("-", 6)
        except ValueError:
            continue
        if len(fields) <= separator + 1:
            continue
        source = _unescape(fields[separator + 2]) if len(fields) > separator + 2 else ""
        mounts.append(Mount(_unescape(fields[4]), fields[separator + 1], source))
    return mounts


def filesystem_type(path: Path, mountinfo: str | None = None) -> str:
    """The type of the file system holding ``path`` (resolved, need not exist): the longest
    mount point containing it, the last listed on a tie (on top); else ``"unknown"``."""
    if mountinfo is None:
        try:
            mountinfo = MOUNTINFO_PATH.read_text(encoding="utf-8", errors="surrogateescape")
        except OSError:
            return "unknown"
    target = str(Path(path).resolve())
    best: Mount | None = None
    for mount in parse_mountinfo(mountinfo):
        point = mount.mount_point
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best.mount_point)):
            best = mount
    return best.fstype if best is not None else "unknown"


# Shared means: several machines can mount it and an O_EXCL create is decided in one place
# (the server or the cluster's lock manager), which is what on_one_server's claims rely on.
# Doubtful cases are left out on purpose, because a wrong "shared" silences the warning about
# double runs while a wrong "local" only asks the operator to write `lock_dir_shared = true`:
#   - fuse.sshfs: usually one developer's view of one server, with client-side attribute caches;
#   - 9p and virtiofs: a host directory shown to its own VMs or WSL, normally one machine.
_SHARED_FSTYPES = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "ceph",
        "fuse.ceph-fuse",
        "glusterfs",
        "fuse.glusterfs",
        "lustre",
        "gpfs",
        "beegfs",
        # Cluster file systems on shared block devices, with a distributed lock manager.
        "ocfs2",
        "gfs2",
    }
)


def is_shared_fstype(fstype: str) -> bool:
    return fstype.lower() in _SHARED_FSTYPES
