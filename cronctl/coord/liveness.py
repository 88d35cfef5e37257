"""Whether an overlap lock's holder still runs, by the process identity kept beside it (a
task may close the lock's descriptor, its cronctl die). "This machine" is the identity's
boot, not the host name (`--host` may give one machine two names)."""

from __future__ import annotations

from cronctl.coord.port import HolderInfo
from cronctl.edge.process import procs


def command_lives(holder: HolderInfo) -> bool:
    """Whether the holder's command (or group) still runs on this boot. A recycled pid means
    the old group is gone too: the kernel hands out no number a process group uses."""
    command = holder.command
    if command is None or command.boot != procs.boot_id():
        return False
    now = procs.identify(command.pid)  # once: each read of /proc is three system calls
    if now is not None:
        # The same process (a boot id is needed to say so), or the number was recycled.
        return bool(command.boot) and now.start_ticks == command.start_ticks
    return procs.group_alive(command.pid)
