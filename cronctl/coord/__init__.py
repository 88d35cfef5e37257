"""The coordination port: claims, overlap locks, pauses and fleet records (SPEC 4.2-4.3, 5.3, 8).

One interface, two adapters, chosen once from the settings by :func:`open_coordinator`:

- :mod:`cronctl.coord.files.adapter` — files in ``lock_dir`` (a thin wrapper over
  :mod:`cronctl.coord.files.locks`); machines coordinate only when they share the directory;
- :mod:`cronctl.coord.postgres.adapter` — a PostgreSQL schema ``cronctl``; imported, with its
  driver, only when ``coordination`` is configured.

The use cases never ask which one they have. This module stays cheap to import: ``run``
imports it on every start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from cronctl.errors import CronctlError

if TYPE_CHECKING:
    from cronctl.coord.files.locks import HolderInfo, PauseInfo
    from cronctl.edge.state.store import RunRow

__all__ = [
    "Coordinator",
    "HeldLock",
    "Overlap",
    "StoreUnavailable",
    "open_coordinator",
    "redact_url",
]

#: The message recorded for a guarded task when the store cannot be reached (SPEC 8.2).
UNREACHABLE = "coordination store unreachable"


class StoreUnavailable(CronctlError):
    """The coordination store cannot be reached (or answered with an error) during this run."""


class HeldLock(Protocol):
    """A held overlap lock whose descriptor the task's processes inherit (``pass_fds``)."""

    @property
    def fd(self) -> int:
        """The descriptor that keeps the lock alive while any process holds it."""
        ...

    def release(self) -> None:
        """Drop cronctl's own reference; processes still holding the descriptor keep the lock."""
        ...

    def record_command(self, pid: int) -> None:
        """Name the started command in the holder record (best effort)."""
        ...


@dataclass(frozen=True, slots=True)
class Overlap:
    """The answer of :meth:`Coordinator.try_overlap` (the statuses of locks.OverlapResult)."""

    status: Literal["acquired", "held", "overtaken"]
    lock: HeldLock | None
    holder: HolderInfo | None

    @property
    def may_run(self) -> bool:
        """Whether the caller should run the task (acquired or overtaken)."""
        return self.lock is not None


Claim = tuple[str, datetime]


class Coordinator(Protocol):
    """What the use cases need from a coordination backend. Every method may raise
    :class:`StoreUnavailable` (the file adapter raises OSError-based errors instead)."""

    kind: Literal["files", "postgresql"]

    def describe(self) -> str:
        """Where coordination happens, safe to print (no password)."""
        ...

    def claim(self, claims: Sequence[Claim], *, host: str, pid: int, now: datetime) -> set[Claim]:
        """Claim every (task, occurrence) at once; return those this machine won."""
        ...

    def claimed(self, task: str, occurrence: datetime) -> bool:
        """Whether some machine holds this claim (dry run; takes nothing)."""
        ...

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
        """Try, without waiting, to take the task's overlap lock (``timeout``: the task's)."""
        ...

    def overlap_held(self, task: str) -> bool:
        """Whether the task's overlap lock is held right now (dry run; takes nothing)."""
        ...

    def paused_tasks(self) -> dict[str, PauseInfo]:
        """Every operator pause."""
        ...

    def set_pause(
        self, task: str, *, reason: str | None, now: datetime, host: str, user: str
    ) -> None:
        """Pause a task (pausing again replaces the reason and time)."""
        ...

    def clear_pause(self, task: str) -> bool:
        """Resume a task; False when it was not paused."""
        ...

    def publish(self, rows: Sequence[RunRow]) -> None:
        """Send run records to the fleet history (idempotent by run id)."""
        ...

    def sweep(self, now: datetime) -> None:
        """Housekeeping: claims older than any catch-up can reach."""
        ...

    def close(self) -> None:
        """Close connections; idempotent."""
        ...


def redact_url(url: str) -> str:
    """The URL with any password shown as ``***`` (SPEC 8), for every message cronctl prints."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, slash, tail = rest.partition("/")
    userinfo, at, hostport = netloc.rpartition("@")
    if at and ":" in userinfo:
        userinfo = userinfo.split(":", 1)[0] + ":***"
    netloc = f"{userinfo}{at}{hostport}"
    # A password may also come as a query parameter (?password=...).
    path, q, query = tail.partition("?")
    if q:
        parts = [
            "password=***" if p.lower().startswith("password=") else p for p in query.split("&")
        ]
        query = "&".join(parts)
    return f"{scheme}{sep}{netloc}{slash}{path}{q}{query}"


def is_coordination_url(url: str) -> bool:
    """Whether ``url`` is a store cronctl can use: a ``postgresql://`` or ``postgres://`` URL."""
    return url.startswith(("postgresql://", "postgres://")) and len(url) > len("postgres://")


def open_coordinator(url: str | None, lock_dir: Path) -> Coordinator:
    """The backend the settings chose: PostgreSQL when ``url`` is set, else files in lock_dir.

    Nothing connects here; the PostgreSQL adapter connects on first use (once per run).
    """
    if not url:
        from cronctl.coord.files.adapter import FilesCoordinator

        return FilesCoordinator(lock_dir)
    from cronctl.coord.postgres.adapter import PostgresCoordinator

    return PostgresCoordinator(url)
