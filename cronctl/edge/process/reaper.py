"""Keep every descendant of a task cronctl's own: the child subreaper, and orphans reaped.

A task that calls ``setsid`` (or double-forks) leaves its process group, and its parent
exits: the kernel hands the orphan to the nearest *child subreaper* among its ancestors,
else to PID 1. ``become_subreaper`` makes cronctl that ancestor (``prctl(PR_SET_CHILD_
SUBREAPER)``, Linux 3.4), so such a process stays in cronctl's tree, where ``members`` finds
it again: under the task's command, or carrying the task's ``CRONCTL_RUN_ID`` in its
environment (the variable every command of a run inherits). As PID 1 in a container cronctl
gets every orphan of the container anyway.

Orphans that came to cronctl become zombies when they exit unless cronctl waits for them.
``Reaper`` does, without ever taking the exit status of a child that `subprocess` itself
waits for (``waitpid(-1)`` would: the command's Popen would then read exit 0 for a failed
task). Every child cronctl starts is registered (``spawning``) from before its fork until its
own wait is over, and the reaper waits only for children not registered, while no start is in
progress (a child may exit between its fork and its registration).

Elsewhere (no ``/proc``, not Linux) nothing here does anything: descendants that leave the
group escape, as cron's own do.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

__all__ = ["Reaper", "become_subreaper", "members", "reaper", "release", "signal_pids", "spawning"]

_PR_SET_CHILD_SUBREAPER = 36
#: How often the reaper looks for orphans that have exited (a zombie lives at most this long).
REAP_INTERVAL_S = 1.0

_cond = threading.Condition()
_starting = 0  # starts between their fork and their registration
_owned: set[int] = set()  # children whose exit status belongs to their Popen


@contextmanager
def spawning() -> Iterator[Callable[[int], None]]:
    """Around a ``Popen``: hand the started child's pid to the callable yielded. The reaper
    leaves that child alone until ``release(pid)``, once its own wait is over."""
    global _starting
    with _cond:
        _starting += 1
    started: list[int] = []
    try:
        yield started.append
    finally:
        with _cond:
            _owned.update(started)
            _starting -= 1


def release(pid: int) -> None:
    """Child ``pid`` has been waited for by its owner: from now on the number is free."""
    with _cond:
        _owned.discard(pid)


def become_subreaper() -> bool:
    """Make this process the child subreaper of its descendants; False where it cannot."""
    if sys.platform != "linux":
        return False
    import ctypes  # only here: the quiet minute of `run` never needs it

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _children(pid: int) -> list[int]:
    """The children of ``pid`` (of each of its threads: an orphan is handed to one thread)."""
    found: list[int] = []
    try:
        threads = [t.name for t in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:
        return found
    for tid in threads:
        try:
            found.extend(
                int(x) for x in Path(f"/proc/{pid}/task/{tid}/children").read_bytes().split()
            )
        except (OSError, ValueError):
            continue
    return found


def _descendants(root: int) -> dict[int, int]:
    """Every descendant of ``root``, with its parent."""
    parents: dict[int, int] = {}
    stack = [root]
    while stack:
        pid = stack.pop()
        for child in _children(pid):
            if child not in parents and child != root:
                parents[child] = pid
                stack.append(child)
    return parents


def _carries(pid: int, marker: bytes) -> bool:
    """Whether ``pid`` was started with ``marker`` (``NAME=VALUE``) in its environment."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return environ.startswith(marker + b"\0") or b"\0" + marker + b"\0" in environ


def members(leader: int | None, marker: str | None) -> list[int]:
    """cronctl's descendants that belong to one task: under its command ``leader`` (not yet
    reaped), or started with ``marker`` (``CRONCTL_RUN_ID=…``) in their environment, however
    far they moved from its process group. The leader itself is not listed."""
    parents = _descendants(os.getpid())
    if not parents:
        return []
    tag = marker.encode() if marker else None
    found: list[int] = []
    for pid in parents:
        if pid == leader:
            continue
        if (leader is not None and _under(pid, leader, parents)) or (
            tag is not None and _carries(pid, tag)
        ):
            found.append(pid)
    return found


def _under(pid: int, ancestor: int, parents: dict[int, int]) -> bool:
    while (pid := parents.get(pid, 0)) > 0:
        if pid == ancestor:
            return True
    return False


def signal_pids(pids: list[int], sig: int, still: Callable[[int], bool]) -> int:
    """Send ``sig`` to each of ``pids`` for which ``still(pid)`` holds once the process is
    pinned (a pidfd: a number recycled since it was found is never signalled); how many."""
    sent = 0
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            continue
        try:
            if still(pid):
                signal.pidfd_send_signal(fd, sig)
                sent += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return sent


class Reaper:
    """Waits, about once a second, for the exited children that no Popen owns."""

    def __init__(self) -> None:
        self._started = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.subreaper = False

    def ensure(self) -> None:
        """Become the subreaper and start reaping, once per process (until stop)."""
        with self._lock:
            if self._started:
                return
            self._started = True
            self._stop.clear()
        self.subreaper = become_subreaper()
        if sys.platform == "linux" or os.getpid() == 1:
            self._thread = threading.Thread(target=self._loop, name="cronctl-reaper", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop reaping; the next start begins again. For a process that runs cronctl inside
        itself and starts children of its own (the test suite): a child it did not start
        through cronctl is reaped like an orphan, and its own Popen then reads exit 0."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._started = False
            self._stop.set()
        if thread is not None:
            thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(REAP_INTERVAL_S):
            self.reap()

    def reap(self) -> int:
        """Wait for every exited child no Popen owns; how many. Skipped while a start is in
        progress (its child is not registered yet); the next round takes them."""
        reaped = 0
        children = _children(os.getpid())
        with _cond:
            if _starting:
                return 0
            for pid in children:
                if pid in _owned:
                    continue
                with suppress(ChildProcessError, OSError):
                    done, _status = os.waitpid(pid, os.WNOHANG)
                    reaped += done == pid
        return reaped


#: The one reaper of this process.
reaper = Reaper()
