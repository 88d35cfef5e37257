"""Keep every descendant of a task cronctl's own: the child subreaper, and orphans reaped.

As child subreaper, a task's process that left its group (``setsid``) stays in cronctl's tree,
where ``members`` finds it by ancestry or its ``CRONCTL_RUN_ID``. ``Reaper`` waits for such
orphans, never for a child a Popen owns (``waitpid(-1)`` would make Popen read exit 0 for a
failed task): children are registered (``spawning``) from before their fork until their own
wait is over, and no reaping happens while a start is in progress. Elsewhere than Linux
nothing here does anything.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36
# How often the reaper looks for orphans that have exited (a zombie lives at most this long).
REAP_INTERVAL_S = 1.0

_cond = threading.Condition()
_starting = 0  # starts between their fork and their registration
_owned: set[int] = set()  # children whose exit status belongs to their Popen


@contextmanager
def spawning() -> Iterator[Callable[[int], None]]:
    """Around a Popen: the reaper leaves the pid given to the callable until ``release``."""
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
    with _cond:
        _owned.discard(pid)


def become_subreaper() -> bool:
    if sys.platform != "linux":
        return False
    import ctypes  # only here: the quiet minute of `run` never needs it

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _children(pid: int) -> list[int]:
    # Of each of its threads: an orphan is handed to one thread.
    found: list[int] = []
    with suppress(OSError):
        for thread in Path(f"/proc/{pid}/task").iterdir():
            with suppress(OSError, ValueError):
                found += map(int, (thread / "children").read_bytes().split())
    return found


def _descendants(root: int) -> dict[int, int]:
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
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return environ.startswith(marker + b"\0") or b"\0" + marker + b"\0" in environ


def members(leader: int | None, marker: str | None) -> list[int]:
    """cronctl's descendants of one task, but the leader: under ``leader`` (not reaped yet),
    or with ``marker`` (``CRONCTL_RUN_ID=…``) in their environment."""
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
    """Signal each pid that is ``still`` itself once pinned by a pidfd; how many."""
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
    def __init__(self) -> None:
        self._started = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.subreaper = False

    def ensure(self) -> None:
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
        """Stop reaping, for a process that starts children of its own (the test suite): its
        children would be reaped like orphans, and their Popen read exit 0."""
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


reaper = Reaper()
