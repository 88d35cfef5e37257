"""The file adapter of the coordination port: :mod:`cronctl.coord.files.locks` behind the Protocol.

A thin wrapper on purpose: locks.py keeps the file layout, the guard and the holder records.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from cronctl.coord.files import locks
from cronctl.coord.port import Claim, Overlap, PauseInfo

if TYPE_CHECKING:
    from cronctl.core.runs import RunRow


class FilesCoordinator:
    """Claims, locks and pauses as files in ``lock_dir`` (SPEC 4.2, 4.3, 5.3)."""

    kind: Literal["files", "postgresql"] = "files"

    def __init__(self, lock_dir: Path) -> None:
        """Coordinate through ``lock_dir`` (already resolved and checked by the caller)."""
        self.lock_dir = lock_dir
        # overlap/, checked and opened at the first overlap lock, used by every later one
        # until close(): a run of 100 guarded tasks walked and checked it 100 times.
        self._overlap: locks.OverlapDir | None = None
        self._overlap_lock = threading.Lock()
        self._overlap_users = 0  # attempts in flight: close() never pulls the fd from under one
        self._closed = False

    def describe(self) -> str:
        """The lock directory."""
        return f"lock_dir {self.lock_dir}"

    def claim(self, claims: Sequence[Claim], *, host: str, pid: int, now: datetime) -> set[Claim]:
        """One O_EXCL file per claim."""
        return {
            (task, when)
            for task, when in claims
            if locks.claim_occurrence(self.lock_dir, task, when, host=host, pid=pid, now=now)
        }

    def claimed(self, task: str, occurrence: datetime) -> bool:
        """Whether the claim file exists."""
        return locks.claim_exists(self.lock_dir, task, occurrence)

    def try_overlap(
        self,
        task: str,
        *,
        lease: timedelta | None,
        now: datetime,
        host: str,
        pid: int,
        timeout: timedelta | None = None,
    ) -> Overlap:
        """flock on ``overlap/TASK.lock``."""
        with self._overlap_lock:
            if self._closed:
                directory = None  # after close(): this attempt opens (and closes) its own
            else:
                if self._overlap is None:
                    self._overlap = locks.OverlapDir(self.lock_dir)
                directory = self._overlap
                self._overlap_users += 1
        try:
            got = locks.try_overlap_lock(
                self.lock_dir,
                task,
                lease=lease,
                now=now,
                host=host,
                pid=pid,
                timeout=timeout,
                directory=directory,
            )
        finally:
            if directory is not None:
                with self._overlap_lock:
                    self._overlap_users -= 1
                    if self._closed and not self._overlap_users:
                        self._close_overlap()
        return Overlap(got.status, got.lock, got.holder)

    def overlap_held(self, task: str) -> bool:
        """Probe the flock under the guard."""
        return locks.overlap_held(self.lock_dir, task)

    def paused_tasks(self) -> dict[str, PauseInfo]:
        """The pause markers."""
        return locks.paused_tasks(self.lock_dir)

    def set_pause(
        self, task: str, *, reason: str | None, now: datetime, host: str, user: str
    ) -> None:
        """Write the pause marker."""
        locks.set_pause(self.lock_dir, task, reason=reason, now=now, host=host, user=user)

    def clear_pause(self, task: str) -> bool:
        """Remove the pause marker."""
        return locks.clear_pause(self.lock_dir, task)

    def publish(self, rows: Sequence[RunRow]) -> None:
        """Nothing: without a store, history stays on each machine."""

    def sweep(self, now: datetime) -> None:
        """Claims older than a week (SPEC 4.3)."""
        locks.sweep_claims(self.lock_dir, now=now)

    def close(self) -> None:
        """Close the overlap directory, if a lock was taken in it (the locks stay held)."""
        with self._overlap_lock:
            self._closed = True
            if not self._overlap_users:
                self._close_overlap()

    def _close_overlap(self) -> None:
        # Under _overlap_lock, with no attempt in flight.
        directory, self._overlap = self._overlap, None
        if directory is not None:
            directory.close()
