"""Waits of the main thread that a signal can end (docs/commands.md, "Signals"), AWAKE_S at a
time: Python runs a handler in the main thread once it runs Python again, and the kernel may
hand SIGTERM to any thread, so a main thread in one long wait slept through it. (Blocking
signals in the other threads would pass the mask on to every task they start.)"""

from __future__ import annotations

import threading
import time
from typing import Protocol

AWAKE_S = 0.2


class _Joinable(Protocol):
    def join(self, timeout: float | None = None) -> None: ...

    def is_alive(self) -> bool: ...


def join_awake(thread: _Joinable, timeout: float | None = None) -> None:
    deadline = None if timeout is None else time.monotonic() + timeout
    while thread.is_alive():
        left = AWAKE_S if deadline is None else min(AWAKE_S, deadline - time.monotonic())
        if left <= 0:
            return
        thread.join(left)


def wait_awake(event: threading.Event, seconds: float) -> bool:
    """``event.wait(seconds)``, or less: the caller waits again, by its clock, if early."""
    return event.wait(min(seconds, AWAKE_S))
