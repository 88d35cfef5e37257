"""Who a process is, from ``/proc``: ``(boot id, pid, start time)`` names one process for
good, where a pid alone may be recycled once it exits. Zombies count as gone: in a container
whose pid 1 never reaps, an orphan stays a zombie forever."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from cronctl.core.process_id import ProcessId

_PROC = Path("/proc")


@cache
def boot_id() -> str:
    """This boot's id and this process's pid namespace, or "" where there is no boot id:
    containers on one kernel share the boot id but count pids apart."""
    try:
        boot = (_PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""
    try:
        return f"{boot}/{(_PROC / 'self/ns/pid').readlink()}" if boot else ""
    except OSError:
        return boot


def _stat_fields(pid: int) -> list[bytes] | None:
    # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so split after
    # the last ")"; fields[0] is then the state (field 3) and fields[19] the start time (22).
    # None: gone, or a zombie.
    try:  # os, not pathlib: a guarded run reads this for every holder it meets and leaves
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        try:
            raw = os.read(fd, 4096)
        finally:
            os.close(fd)
    except OSError:
        return None
    fields = raw.rpartition(b")")[2].split()
    return fields if len(fields) > 19 and fields[0] not in (b"Z", b"X") else None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def identify(pid: int) -> ProcessId | None:
    fields = _stat_fields(pid)
    if fields is None:
        return None
    return ProcessId(pid, int(fields[19]), boot_id())


def same_process_alive(who: ProcessId) -> bool:
    if not who.boot or who.boot != boot_id():
        return False
    now = identify(who.pid)
    return now is not None and now.start_ticks == who.start_ticks


def group_alive(pgid: int) -> bool:
    """Whether group ``pgid`` has a live member (Linux never reuses the number meanwhile)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a member changed uid (setuid program): it exists
    try:
        with os.scandir(_PROC) as listing:
            names = [entry.name for entry in listing if entry.name.isdigit()]
    except OSError:
        return True  # cannot tell the living from zombies: the safe answer is "alive"
    members = (_stat_fields(int(name)) for name in names)
    return any(fields is not None and int(fields[2]) == pgid for fields in members)
