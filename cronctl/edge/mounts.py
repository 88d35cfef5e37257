"""Which file system holds a path, and whether several machines can share it.

Read from ``/proc/self/mountinfo``, for the warning that on_one_server tasks rely on a lock_dir
only this machine sees (edge/dirs.py).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MOUNTINFO_PATH", "Mount", "filesystem_type", "is_shared_fstype", "parse_mountinfo"]

#: The per-process mount table Linux exposes; the probe reads it when no text is given.
MOUNTINFO_PATH = Path("/proc/self/mountinfo")


@dataclass(frozen=True, slots=True)
class Mount:
    """One line of ``/proc/self/mountinfo``: where it is mounted, its type, and what it mounts."""

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
    """Parse the text of ``/proc/self/mountinfo`` into mounts, in file order.

    The format (proc(5)) is ``ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE
    SOURCE SUPER_OPTIONS``; the optional fields (``shared:1``, ``master:2``...) vary in
    number, so the ``-`` separator is what splits the line. Lines that do not follow the
    format are skipped rather than fatal: the probe only feeds a warning.
    """
    mounts: list[Mount] = []
    for line in text.splitlines():
        fields = line.split(" ")
        try:
            separator = fields.index("-", 6)
        except ValueError:
            continue
        if len(fields) <= separator + 1:
            continue
        mount_point = _unescape(fields[4])
        fstype = fields[separator + 1]
        source = _unescape(fields[separator + 2]) if len(fields) > separator + 2 else ""
        mounts.append(Mount(mount_point=mount_point, fstype=fstype, source=source))
    return mounts


def filesystem_type(path: Path, mountinfo: str | None = None) -> str:
    """Return the type of the file system holding ``path`` (``"ext4"``, ``"nfs4"``...).

    The path is resolved first (it need not exist yet), then matched against the longest mount
    point that contains it; when several mounts share that mount point, the last one listed is
    the one on top. ``mountinfo`` is the text to use; when omitted, ``/proc/self/mountinfo`` is
    read. Returns ``"unknown"`` when the table cannot be read or nothing matches (not Linux).
    """
    if mountinfo is None:
        try:
            mountinfo = MOUNTINFO_PATH.read_text(encoding="utf-8", errors="surrogateescape")
        except OSError:
            return "unknown"
    target = str(Path(path).resolve())
    best: Mount | None = None
    for mount in parse_mountinfo(mountinfo):
        if not _contains(mount.mount_point, target):
            continue
        if best is None or len(mount.mount_point) >= len(best.mount_point):
            best = mount
    return best.fstype if best is not None else "unknown"


def _contains(mount_point: str, target: str) -> bool:
    if mount_point == "/":
        return target.startswith("/")
    return target == mount_point or target.startswith(mount_point.rstrip("/") + "/")


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
    """Whether a file system type is one that several machines share (nfs, cifs, ceph, ...).

    Local types (ext4, xfs, btrfs, tmpfs, overlay, zfs) and anything unrecognised are not.
    """
    return fstype.lower() in _SHARED_FSTYPES
