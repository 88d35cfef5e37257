"""What a machine keeps of the store (docs/fleets-postgresql.md): the ids of records not yet
published (``STATE_DIR/coord-outbox``), sent by the next run that reaches it (an upsert by
id: a repeat is harmless), and the last pauses read (``STATE_DIR/coord-pauses``)."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from cronctl.coord.port import StoreUnavailable
from cronctl.core.runs import NOT_OK, UNFINISHED, RunRow
from cronctl.edge.process.logfiles import last_bytes
from cronctl.edge.safefiles import open_nofollow, write_atomic
from cronctl.edge.state.store import Store
from cronctl.errors import UnsafeDirectoryError

if TYPE_CHECKING:
    from cronctl.coord.history import FleetHistory

OUTBOX = "coord-outbox"
PAUSES = "coord-pauses"
#: At most this many ids wait (a store down for days must not grow the file without end).
MAX_WAITING = 100_000
# Each winner records the occurrence; 49 machines of 50 saying "someone else ran it" each
# minute would swamp the fleet history without telling anyone anything.
_NOT_PUBLISHED = UNFINISHED | {"skipped: another server"}
#: The most of a run's output the store keeps: the end, where failures say why.
OUTPUT_TAIL_BYTES = 8 * 1024
_UTF8_CONTINUATION = bytes(range(0x80, 0xC0))


class Records:
    """The fleet records of one `run` (or `work` tick), each sent by a sender thread within
    GATHER_S of its run's end with those of the runs that end meanwhile (a wave of runs ending
    together costs a round trip or two, not one each); :meth:`finish` sends the rest."""

    def __init__(self, fleet: FleetHistory) -> None:
        self._fleet = fleet
        self._sent: set[str] = set()
        self._lock = threading.Lock()
        self._waiting: list[RunRow] = []  # ended, not sent yet
        self._sender: threading.Thread | None = None
        self._now = threading.Event()  # finish: stop gathering, send at once

    def send(self, rows: Sequence[RunRow]) -> None:
        with self._lock:
            self._waiting += [r for r in rows if r.outcome not in _NOT_PUBLISHED]
            if self._sender is not None or not self._waiting:
                return  # the sender under way takes them
            self._sender = threading.Thread(target=self._drain, name="cronctl-records")
            self._sender.daemon = True
            self._sender.start()

    def _drain(self) -> None:
        self._now.wait(GATHER_S)
        while True:
            with self._lock:
                batch, self._waiting = self._waiting, []
                if not batch:
                    self._sender = None
                    return
            try:
                self._fleet.publish([published(row) for row in batch])
            except StoreUnavailable:
                continue  # finish keeps them in the outbox
            with self._lock:
                self._sent.update(row.id for row in batch)

    def finish(
        self, store: Store, rows: Sequence[RunRow], state_dir: Path
    ) -> StoreUnavailable | None:
        """Send the rest and any left waiting; keep in the outbox what did not go (saying why)."""
        self._now.set()
        with self._lock:
            sender = self._sender
        if sender is not None:
            sender.join()
        waiting = [store.get_run(run_id) for run_id in _read(state_dir / OUTBOX)]
        with self._lock:
            unsent = [*waiting, *(r for r in rows if r.id not in self._sent)]
        todo = {r.id: r for r in unsent if r is not None and r.outcome not in _NOT_PUBLISHED}
        if not todo:
            return None
        try:
            self._fleet.publish([published(row) for row in todo.values()])
        except StoreUnavailable as exc:
            _write(state_dir / OUTBOX, list(todo)[-MAX_WAITING:])
            return exc
        if waiting:
            _write(state_dir / OUTBOX, [])
        return None


#: How long the records of runs ending together are gathered before they are sent
#: (docs/fleets-postgresql.md#measured): a wave of runs ends over a fraction of a second.
GATHER_S = 0.25


def published(row: RunRow) -> RunRow:
    """The record as the store keeps it: for a run that did not end ok, the last
    OUTPUT_TAIL_BYTES of its log as written (task secrets already masked) as its ``tail``."""
    # Only the runs an operator opens to see why, so the store stays small: a run every
    # minute on 50 hosts that prints 8 KB would be 5 GB in the 14 days it is kept.
    if row.outcome not in NOT_OK:
        return replace(row, tail="")
    data = last_bytes(row.log_path, row.tail, OUTPUT_TAIL_BYTES)
    if len(data) == OUTPUT_TAIL_BYTES:
        data = data.lstrip(_UTF8_CONTINUATION)  # cut inside a character: drop its remains
    return replace(row, tail=data.decode("utf-8", errors="replace"))


def _read(path: Path) -> list[str]:
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except (FileNotFoundError, UnsafeDirectoryError):
        return []
    try:
        with os.fdopen(fd, "rb") as handle:
            text = handle.read(64 * MAX_WAITING).decode("ascii", errors="ignore")
    except OSError:
        return []
    return [line for line in text.splitlines() if line and len(line) < 64]


def _write(path: Path, lines: list[str]) -> None:
    if not lines:
        with suppress(FileNotFoundError):
            path.unlink()
        return
    write_atomic(path, "".join(f"{i}\n" for i in lines).encode("ascii", "replace"), durable=True)


def remember_pauses(state_dir: Path, paused: Sequence[str]) -> None:
    if (names := sorted(paused)) != _read(state_dir / PAUSES):
        _write(state_dir / PAUSES, names)


def remembered_pauses(state_dir: Path) -> list[str]:
    return _read(state_dir / PAUSES)
