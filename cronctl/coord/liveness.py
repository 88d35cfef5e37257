"""Whether an overlap lock's holder still runs on this machine, by process identity.

Both adapters keep the holder's identity beside the lock (a holder record in lock_dir, a row
in ``cronctl.holders``): the task's command as (pid, start time, boot), and, in the store,
the holder's cronctl too. A task may close the descriptor that carries the lock and its
cronctl may die; on the holder's own machine the identity still tells a live holder from a
gone one. Another machine's processes cannot be seen from here.

"This machine" is the boot (and pid namespace) the identity names, not the holder's host
name: `CRONCTL_HOST` or `--host` may give one machine two names, and two runs under
different names must still never run one task twice.
"""

from __future__ import annotations

from cronctl.coord.port import HolderInfo
from cronctl.edge.process import procs

__all__ = ["command_lives"]


def command_lives(holder: HolderInfo) -> bool:
    """Whether the holder's command (or its process group) still runs on this machine.

    A recorded pid now used by a process with another start time was recycled: the kernel
    only hands out a number no process group uses, so the old group is gone too. Another
    boot's processes cannot be seen from here; the lock is then the only evidence.
    """
    command = holder.command
    if command is None or command.boot != procs.boot_id():
        return False
    now = procs.identify(command.pid)  # once: each read of /proc is three system calls
    if now is not None:
        # The same process (a boot id is needed to say so), or the number was recycled.
        return bool(command.boot) and now.start_ticks == command.start_ticks
    return procs.group_alive(command.pid)
