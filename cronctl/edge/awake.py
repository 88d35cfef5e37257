"""Waits of the main thread that a signal can end (docs/commands.md, "Signals").

Python runs a signal handler in the main thread only, and only once that thread runs Python
code again. The kernel may hand a SIGTERM to any thread of the process that does not block
it, and then a main thread blocked in one long wait sleeps through the signal until the
wait ends: `work` ignored SIGTERM until its next minute, `run` until its tasks ended by
themselves (seen under load, about one stop in twenty). The main thread therefore never
waits longer than AWAKE_S at a time. (Blocking the signals in the other threads would
pass the blocked mask on to every task those threads start.)
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["AWAKE_S", "join_awake", "wait_awake"]

#: The longest the main thread waits in one go while it could be told to stop.
AWAKE_S = 0.2


class _Event(Protocol):
    def wait(self, timeout: float | None = None) -> bool: ...


class _Joinable(Protocol):
    def join(self, timeout: float | None = None) -> None: ...

    def is_alive(self) -> bool: ...


def join_awake(thread: _Joinable, timeout: float | None = None) -> None:
    """``thread.join(timeout)`` in waits of at most AWAKE_S."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while thread.is_alive():
        left = AWAKE_S if deadline is None else min(AWAKE_S, deadline - time.monotonic())
        if left <= 0:
            return
        thread.join(left)


def wait_awake(event: _Event, seconds: float) -> bool:
    """``event.wait(seconds)``, or less (AWAKE_S at most): True when the event is set. The
    caller waits again, from its clock, if it returned early."""
    return event.wait(min(seconds, AWAKE_S))
