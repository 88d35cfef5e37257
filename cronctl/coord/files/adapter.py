"""The file adapter of the coordination port, over the modules beside it."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from datetime import datetime, timedelta
from pathlib import Path

from cronctl.coord.files import ends, overlap, pauses, slots
from cronctl.coord.files.claims import claim_exists, claim_occurrence, mark_started, sweep_claims
from cronctl.coord.port import ChainEnd, Claim, Orphan, Overlap, PauseInfo, StoreCheck
from cronctl.core.due import CLAIM_SWEEP_AGE
from cronctl.edge.safefiles import ensure_private_dir, verify_dir


class FilesCoordinator:
    """Claims, locks and pauses as files in ``lock_dir`` (docs/guarantees.md)."""

    #: No store: each machine keeps its own history, and lock_dir is there or fails loudly.
    fleet = None
    may_be_unreachable = False
    skipped_rows = 0

    def __init__(self, lock_dir: Path, *, host: str, pid: int) -> None:
        self.lock_dir = lock_dir
        self.host = host
        self.pid = pid
        # overlap/, checked and opened once at the first overlap lock, until close().
        self._overlap: overlap.OverlapDir | None = None
        self._overlap_lock = threading.Lock()
        self._overlap_users = 0  # attempts in flight: close() never pulls the fd from under one
        self._closed = False

    def describe(self) -> str:
        return f"lock_dir {self.lock_dir}"

    def claim(
        self,
        claims: Sequence[Claim],
        *,
        leased: AbstractSet[Claim] = frozenset(),
        now: datetime,
        limit: int | None = None,
        **_: object,  # runs, held, until: unused (a claim file names no run; see the port)
    ) -> set[Claim]:
        won: set[Claim] = set()
        for task, when in claims:
            if limit is not None and len(won) >= limit:
                break
            lease = (task, when) in leased
            if claim_occurrence(
                self.lock_dir, task, when, host=self.host, pid=self.pid, now=now, leased=lease
            ):
                won.add((task, when))
        return won

    def keep_claim(self, claim: Claim, *, started: bool) -> bool:
        # A lease needs no renewing: only a claim whose cronctl is provably gone is taken over.
        if not started:
            return True
        task, when = claim
        return mark_started(self.lock_dir, task, when, host=self.host, pid=self.pid)

    def orphans(self) -> list[Orphan]:
        """None: only a run asking for its occurrence takes a claim over."""
        return []

    def claimed(self, task: str, occurrence: datetime) -> bool:
        return claim_exists(self.lock_dir, task, occurrence)

    def record_end(self, end: ChainEnd) -> None:
        ends.record_end(self.lock_dir, end)

    def chain_ends(self, tasks: AbstractSet[str], since: datetime) -> list[ChainEnd]:
        return ends.chain_ends(self.lock_dir, tasks, since)

    def try_overlap(
        self, task: str, *, lease: timedelta | None, now: datetime, timeout: timedelta | None = None
    ) -> Overlap:
        with self._overlap_lock:
            if self._closed:
                directory = None  # after close(): this attempt opens (and closes) its own
            else:
                if self._overlap is None:
                    self._overlap = overlap.OverlapDir(self.lock_dir)
                directory = self._overlap
                self._overlap_users += 1
        try:
            return overlap.try_overlap_lock(self.lock_dir, task, lease=lease, now=now,
                                            host=self.host, pid=self.pid, timeout=timeout,
                                            directory=directory)  # fmt: skip
        finally:
            if directory is not None:
                with self._overlap_lock:
                    self._overlap_users -= 1
                    if self._closed and not self._overlap_users:
                        self._close_overlap()

    def overlap_held(self, task: str) -> bool:
        return overlap.overlap_held(self.lock_dir, task)

    def try_group_slot(self, group: str, size: int) -> slots.FileSlot | None:
        return slots.try_slot(self.lock_dir, group, size)

    def paused_tasks(self) -> dict[str, PauseInfo]:
        return pauses.paused_tasks(self.lock_dir)

    def set_pause(self, task: str, *, reason: str | None, now: datetime, user: str) -> None:
        directory = ensure_private_dir(self.lock_dir)
        pauses.set_pause(directory, task, reason=reason, now=now, host=self.host, user=user)

    def clear_pause(self, task: str) -> bool:
        # Unlinking goes through lock_dir/paused: never through a planted link (docs/guarantees.md).
        return verify_dir(self.lock_dir) and pauses.clear_pause(self.lock_dir, task)

    def check(self) -> StoreCheck | None:
        return None

    def sweep(self, now: datetime) -> None:
        sweep_claims(self.lock_dir, now=now)
        ends.sweep_ends(self.lock_dir, now - CLAIM_SWEEP_AGE)

    def stop_waiting(self) -> None:
        """Nothing waits: every file operation here is tried without waiting."""

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
