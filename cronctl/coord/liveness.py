"""Whether an overlap lock's holder still runs, by the process identity both adapters keep
beside the lock: a task may close the descriptor that carries the lock, and its cronctl may
die. "This machine" is the boot the identity names, not the host name (`--host` may give
one machine two names, and they must still never run one task twice)."""

from __future__ import annotations

from cronctl.coord.port import HolderInfo
from cronctl.edge.process import procs


def command_lives(holder: HolderInfo) -> bool:
    """Whether the holder's command (or its process group) still runs on this boot. A pid
    now another process's was recycled: the kernel only hands out a number no process group
    uses, so the old group is gone too."""
    command = holder.command
    if command is None or command.boot != procs.boot_id():
        return False
    now = procs.identify(command.pid)  # once: each read of /proc is three system calls
    if now is not None:
        # The same process (a boot id is needed to say so), or the number was recycled.
        return bool(command.boot) and now.start_ticks == command.start_ticks
    return procs.group_alive(command.pid)
