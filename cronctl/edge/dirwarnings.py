"""Warnings about where a schedule keeps its data (a lock_dir only this machine sees, by the
file system ``/proc/self/mountinfo`` says holds it; a metrics_file another user could steer),
and the daily stamp that keeps `run` from repeating one."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from pathlib import Path

from cronctl.core.model import Problem, Schedule
from cronctl.edge.dirs import data_dirs
from cronctl.edge.safefiles import check_file_path, ensure_private_dir, open_nofollow
from cronctl.errors import UnsafeDirectoryError

MOUNTINFO_PATH = Path("/proc/self/mountinfo")
NOTICE_INTERVAL_S = 24 * 3600
# The kernel escapes space, tab, newline and backslash in mountinfo as three octal digits.
# Compiled on first use (re's cache), not at import: only the lock_dir probe reads mountinfo.
_OCTAL_ESCAPE = rb"\\([0-7]{3})"
# Shared: several machines mount it and an O_EXCL create is decided in one place (the server,
# or the lock manager of ocfs2 and gfs2), as on_one_server's claims need. Doubtful types are
# left out: fuse.sshfs (one developer's cached view), 9p and virtiofs (a host's directory shown
# to its own VMs). A wrong "shared" silences the double-run warning; a wrong "local" only asks
# for `lock_dir_shared = true`.
_SHARED_FSTYPES = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "fuse.ceph-fuse",
                             "glusterfs", "fuse.glusterfs", "lustre", "gpfs", "beegfs", "ocfs2",
                             "gfs2"})  # fmt: skip


def _unescape(field: str) -> str:
    return os.fsdecode(re.sub(_OCTAL_ESCAPE, lambda m: bytes([int(m[1], 8)]), os.fsencode(field)))


def filesystem_type(path: Path, mountinfo: str | None = None) -> str:
    """The type of the file system holding ``path`` (resolved, need not exist): the longest
    mount point containing it, the last listed on a tie (on top); else ``"unknown"``."""
    if mountinfo is None:
        try:
            mountinfo = MOUNTINFO_PATH.read_text(encoding="utf-8", errors="surrogateescape")
        except OSError:
            return "unknown"
    target = str(Path(path).resolve())
    best, found = "", "unknown"
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        try:  # the type follows the "-": the optional fields before it vary (proc(5))
            point, fstype = _unescape(fields[4]), fields[fields.index("-", 6) + 1]
        except (ValueError, IndexError):
            continue  # a line off the format: it only feeds a warning
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, found = point, fstype
    return found


def is_shared_fstype(fstype: str) -> bool:
    return fstype.lower() in _SHARED_FSTYPES


def lock_dir_warning(
    schedule: Schedule, lock_dir: Path, only_if_present: bool = False
) -> Problem | None:
    """`only_if_present`: a lock_dir missing here (a CI runner) says nothing of the servers."""
    tasks = [t for t in schedule.tasks if t.on_one_server]
    if not tasks or schedule.settings.lock_dir_shared:
        return None
    if schedule.settings.coordination or os.environ.get("CRONCTL_COORDINATION"):
        return None  # claims live in the coordination store, not in lock_dir
    if only_if_present and not lock_dir.is_dir():
        return None
    fstype = filesystem_type(lock_dir)
    if is_shared_fstype(fstype):
        return None
    message = (
        f"lock_dir {lock_dir} is on {fstype}, which only this machine sees, so on_one_server "
        f"({', '.join(t.name for t in tasks)}) holds only here; point lock_dir at a shared "
        "mount (NFS, CIFS, CephFS, ...) or set lock_dir_shared = true in [cronctl] if it is "
        "shared in a way cronctl cannot detect"
    )
    first = tasks[0]
    return Problem(str(first.source), first.line, None, "warning", "lock-dir-not-shared", message)


def lock_dir_problems(
    schedule: Schedule, flag_state: Path | None, flag_lock: Path | None, env: Mapping[str, str]
) -> list[Problem]:
    _, locks = data_dirs(schedule, flag_state, flag_lock, env)
    # A named lock_dir (flag, environment, file) may be a mount a CI runner lacks: judged only
    # where it exists. The default, STATE_DIR/locks, is local everywhere: judged even unmade.
    named = bool(flag_lock or env.get("CRONCTL_LOCK_DIR") or schedule.settings.lock_dir)
    warning = lock_dir_warning(schedule, locks, only_if_present=named)
    return [warning] if warning else []


def metrics_file_problems(schedule: Schedule) -> list[Problem]:
    """What `run` would refuse of `metrics_file`'s path, said by `check` and `doctor` first."""
    path = schedule.settings.metrics_file
    if path is None:
        return []
    try:
        check_file_path(path)
    except UnsafeDirectoryError as exc:
        where = str(schedule.files[0]) if schedule.files else str(path)
        message = f"metrics_file is not safe to write: {exc} `run` and `work` will not write it"
        return [Problem(where, None, None, "warning", "metrics-file-unsafe", message)]
    except OSError:
        return []  # not judged where it cannot be looked at (a CI runner); the write says so
    return []


def daily_notice(state_dir: Path, key: str) -> bool:
    """True at most once a day per key: `run` would otherwise mail a warning every minute."""
    stamp = ensure_private_dir(state_dir / "notices", within=state_dir) / key
    # Never through a link: a symlink planted at the stamp must not make root touch its target.
    fd = open_nofollow(stamp, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        info = os.fstat(fd)
        if info.st_size > 0 and time.time() - info.st_mtime < NOTICE_INTERVAL_S:
            return False  # set within the day
        os.write(fd, b"1")  # a stamp that has been set has a byte: a fresh create has none
        os.utime(fd)
    finally:
        os.close(fd)
    return True
