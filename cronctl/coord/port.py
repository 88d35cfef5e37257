"""The coordination port (:class:`Coordinator`) and the values that cross it; adapters:
``files`` and ``postgres`` (:func:`cronctl.coord.open_coordinator` chooses)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal, Protocol

from cronctl.core.process_id import ProcessId
from cronctl.core.visible import visible
from cronctl.errors import CronctlError

if TYPE_CHECKING:
    from cronctl.coord.history import FleetHistory


@dataclass(frozen=True, slots=True)
class HolderInfo:
    """Who holds an overlap lock; ``command``: the task's process group leader, once started."""

    host: str
    pid: int
    started: datetime
    command: ProcessId | None = None
    timeout: timedelta | None = None

    def describe(self) -> str:
        """``pid 42 on web-1 since 2026-08-03T09:00:00Z``, the command's pid when known."""
        pid = self.command.pid if self.command is not None else self.pid
        since = self.started.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"pid {pid} on {visible(self.host, one_line=True)} since {since}"

    def overdue(self, now: datetime, slack: timedelta) -> bool:
        return self.timeout is not None and now - self.started > self.timeout + slack


@dataclass(frozen=True, slots=True)
class PauseInfo:
    """An operator pause; None: unknown."""

    reason: str | None
    since: datetime | None
    host: str | None
    user: str | None


#: Recorded for a guarded task when the store cannot be reached (docs/fleets-postgresql.md).
UNREACHABLE = "coordination store unreachable"


class StoreUnavailable(CronctlError):
    """The coordination store cannot be reached, or answered with an error."""


class HeldLock(Protocol):
    """A held overlap lock whose descriptor the task's processes inherit (``pass_fds``)."""

    @property
    def fd(self) -> int: ...

    def release(self) -> None:
        """Drop cronctl's own reference; processes still holding the descriptor keep the lock."""

    def record_command(self, pid: int) -> None:
        """Name the started command in the holder record (best effort)."""


class GroupSlot(Protocol):
    """A held ``[[group]]`` slot: cronctl's, never the task's (closing its descriptors must
    not free it)."""

    def release(self) -> None:
        """Idempotent."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Overlap:
    """``acquired`` (``lock`` ours), ``held`` (``holder``: who, when known) or ``overtaken``
    (past its lease: ``lock`` ours, ``holder`` the stuck run)."""

    status: Literal["acquired", "held", "overtaken"]
    lock: HeldLock | None
    holder: HolderInfo | None

    @property
    def may_run(self) -> bool:
        return self.lock is not None


Claim = tuple[str, datetime]
#: A claim left unstarted by a claimer that is gone, and how long its run may still start.
Orphan = tuple[str, datetime, timedelta]


@dataclass(frozen=True, slots=True)
class ChainEnd:
    """How a followed task's run ended (its last attempt; docs/chains.md). One per (task,
    occurrence, host): recording it again replaces it."""

    task: str
    occurrence: datetime
    outcome: str
    run_id: str
    host: str
    ended: datetime


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class StoreCheck:
    """`cronctl doctor`'s measures: connect (with the schema check), one round trip, both
    clocks (local mid-trip), the schema ``version`` and the ``latest`` this cronctl writes."""

    connect_s: float
    round_trip_s: float
    server_now: datetime
    local_now: datetime
    version: int
    latest: int


class Coordinator(Protocol):
    """Coordination for one machine and process (its host and pid name every claim, lock and
    pause). Any method may raise :class:`StoreUnavailable` (files: OSError-based errors)."""

    @property
    def fleet(self) -> FleetHistory | None:
        """Every machine's runs (None: each machine keeps its own); see fleet_history_of."""

    @property
    def may_be_unreachable(self) -> bool:
        """Whether a run should keep the pauses it last read (coord/outbox.py)."""

    @property
    def skipped_rows(self) -> int:
        """Store rows this process left out as unusable (docs/faults.md)."""

    def describe(self) -> str:
        """Where coordination happens, without a password."""

    def claim(
        self,
        claims: Sequence[Claim],
        *,
        now: datetime,
        limit: int | None = None,
        runs: Mapping[Claim, str] | None = None,
        leased: AbstractSet[Claim] = frozenset(),
        held: set[Claim] | None = None,
        until: Mapping[Claim, datetime] | None = None,
    ) -> set[Claim]:
        """Claim in order until ``limit`` are won (None: all); return those won. Every claim
        before the last won was decided; all were when fewer than ``limit`` were won.

        ``runs``: each claim's run id. A claim in ``leased`` is a lease, taken over from a
        claimer gone before :meth:`keep_claim` marks it started; others start as won
        (docs/fleets-postgresql.md#claims-are-leases). ``held`` gets those not won that another
        machine holds as a lease still (never by files: a dead machine looks like a slow one)."""

    def orphans(self) -> list[Orphan]:
        """Leased claims whose claimer went before ``until`` (read with the pauses), with how
        long each may still start, for a machine that runs the task to take over."""

    def keep_claim(self, claim: Claim, *, started: bool) -> bool:
        """Renew a lease won in ``leased``, or (``started``) mark its run started, as it must
        before it starts. False: taken over meanwhile, and the run must not start."""

    def claimed(self, task: str, occurrence: datetime) -> bool:
        """Whether some machine holds this claim; takes nothing."""

    def record_end(self, end: ChainEnd) -> None:
        """Durably."""

    def chain_ends(self, tasks: AbstractSet[str], since: datetime) -> list[ChainEnd]:
        """Ends of occurrences at or after ``since``, oldest first; unusable records left out."""

    def try_overlap(
        self, task: str, *, lease: timedelta | None, now: datetime, timeout: timedelta | None = None
    ) -> Overlap:
        """Without waiting (``timeout``: the task's)."""

    def overlap_held(self, task: str) -> bool:
        """Whether the task's overlap lock is held now; takes nothing."""

    def try_group_slot(self, group: str, size: int) -> GroupSlot | None:
        """Without waiting, one of ``group``'s ``size`` slots (shared by every machine, per
        project); None: all are held."""

    def paused_tasks(self) -> dict[str, PauseInfo]: ...

    def set_pause(self, task: str, *, reason: str | None, now: datetime, user: str) -> None:
        """As ``user`` on this host; again: replaces the reason and time."""

    def clear_pause(self, task: str) -> bool:
        """False when it was not paused."""

    def check(self) -> StoreCheck | None:
        """None when there is no store."""

    def sweep(self, now: datetime) -> None:
        """Drop claims and chain ends older than any catch-up reaches."""

    def stop_waiting(self) -> None:
        """SIGTERM: cut short every wait for the store, now and later, so the run can record
        its rows and end. Safe in a signal handler."""

    def close(self) -> None:
        """Close connections; idempotent."""
