"""The coordination port: claims, overlap locks, group slots and pauses (:class:`Coordinator`)
and the values that cross it; the optional fleet history is history.py's. Two adapters,
``files`` and ``postgres``; :func:`cronctl.coord.open_coordinator` chooses one."""

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
    """Who holds an overlap lock: machine, cronctl pid and start; ``command`` is the task's
    own process (its group leader) once started, ``timeout`` the task's then."""

    host: str
    pid: int
    started: datetime
    command: ProcessId | None = None
    timeout: timedelta | None = None

    def describe(self) -> str:
        """``pid 42 on web-1 since 2026-08-03T09:00:00Z``: the command's pid when known (the
        process an operator would look at); the host shown as task output is."""
        pid = self.command.pid if self.command is not None else self.pid
        since = self.started.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"pid {pid} on {visible(self.host, one_line=True)} since {since}"

    def overdue(self, now: datetime, slack: timedelta) -> bool:
        return self.timeout is not None and now - self.started > self.timeout + slack


@dataclass(frozen=True, slots=True)
class PauseInfo:
    """An operator pause: why, since when, and who set it from where (None when unknown)."""

    reason: str | None
    since: datetime | None
    host: str | None
    user: str | None


#: Recorded for a guarded task when the store cannot be reached (docs/fleets-postgresql.md).
UNREACHABLE = "coordination store unreachable"


class StoreUnavailable(CronctlError):
    """The coordination store cannot be reached (or answered with an error) during this run."""


class HeldLock(Protocol):
    """A held overlap lock whose descriptor the task's processes inherit (``pass_fds``)."""

    @property
    def fd(self) -> int:
        """The descriptor that keeps the lock alive while any process holds it."""

    def release(self) -> None:
        """Drop cronctl's own reference; processes still holding the descriptor keep the lock."""

    def record_command(self, pid: int) -> None:
        """Name the started command in the holder record (best effort)."""


class GroupSlot(Protocol):
    """One held slot of a ``[[group]]``: cronctl holds it while the task runs (never the
    task's processes: a task that closes the descriptors it inherited must not free it)."""

    def release(self) -> None:
        """Free the slot; idempotent."""


@dataclass(frozen=True, slots=True)
class Overlap:
    """:meth:`Coordinator.try_overlap`'s answer: ``acquired`` (``lock`` ours), ``held``
    (``holder`` says who when known; no ``lock``) or ``overtaken`` (the holder ran past the
    lease: ``lock`` ours, ``holder`` the stuck run for the warning)."""

    status: Literal["acquired", "held", "overtaken"]
    lock: HeldLock | None
    holder: HolderInfo | None

    @property
    def may_run(self) -> bool:
        return self.lock is not None


Claim = tuple[str, datetime]


@dataclass(frozen=True, slots=True)
class ChainEnd:
    """How a run of a task that others follow ended (its last attempt), durable for every
    machine sharing the lock_dir or store (docs/chains.md). One per (task, occurrence, host);
    recording it again replaces it."""

    task: str
    occurrence: datetime
    outcome: str
    run_id: str
    host: str
    ended: datetime


@dataclass(frozen=True, slots=True)
class StoreCheck:
    """What :meth:`Coordinator.check` measured (`cronctl doctor`): connecting with the schema
    check, one query's round trip, the store's clock then and this machine's (mid-trip), the
    store's schema ``version`` and the ``latest`` this cronctl writes."""

    connect_s: float
    round_trip_s: float
    server_now: datetime
    local_now: datetime
    version: int
    latest: int


class Coordinator(Protocol):
    """What `run`, `work` and `exec` need from coordination, for one machine and process:
    the host and pid it was opened with name this run in every claim, lock and pause.
    Every method may raise :class:`StoreUnavailable` (files raise OSError-based errors)."""

    @property
    def fleet(self) -> FleetHistory | None:
        """Every machine's runs (None: history stays on each machine); read it through
        :func:`fleet_history_of`."""

    @property
    def may_be_unreachable(self) -> bool:
        """Whether the store may be out of reach a while: a run then keeps the pauses it last
        read (coord/outbox.py)."""

    @property
    def skipped_rows(self) -> int:
        """Rows of the store this process left out as unusable (docs/faults.md)."""

    def describe(self) -> str:
        """Where coordination happens, safe to print (no password)."""

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
        """Claim the (task, occurrence)s in the order given until ``limit`` are won (None:
        every one); return those won. Every claim before the last one won was decided; when
        fewer than ``limit`` were won, all were.

        ``runs`` names each claim's run (its record's id). A claim in ``leased`` is a lease
        until :meth:`keep_claim` marks its run started, and is taken over from a claimer that
        is gone before that; any other is started as it is won
        (docs/fleets-postgresql.md#claims-are-leases). ``held`` is given the claims not won
        that another machine holds as a lease still: asked again, they may yet be taken over
        (never by files: nothing in a shared directory tells a dead machine from a slow one)."""

    def orphans(self) -> list[Claim]:
        """Leased claims whose claimer is gone before ``until`` (given at its claim), read
        with the pauses: a machine that runs the task claims them to take them over."""

    def keep_claim(self, claim: Claim, *, started: bool) -> bool:
        """Renew the lease of a claim won in ``leased``, or (``started``) mark its run started,
        which it must before the run starts: False when the claim is no longer this machine's
        (taken over while it did not answer); the run must not start."""

    def claimed(self, task: str, occurrence: datetime) -> bool:
        """Whether some machine holds this claim (dry run; takes nothing)."""

    def record_end(self, end: ChainEnd) -> None:
        """Record, durably, how a run of a task that others follow ended."""

    def chain_ends(self, tasks: AbstractSet[str], since: datetime) -> list[ChainEnd]:
        """The ends of these tasks of occurrences at or after ``since``, oldest first (a
        record no reader can use left out)."""

    def try_overlap(
        self, task: str, *, lease: timedelta | None, now: datetime, timeout: timedelta | None = None
    ) -> Overlap:
        """Try, without waiting, to take the task's overlap lock (``timeout``: the task's)."""

    def overlap_held(self, task: str) -> bool:
        """Whether the task's overlap lock is held right now (dry run; takes nothing)."""

    def try_group_slot(self, group: str, size: int) -> GroupSlot | None:
        """Try, without waiting, to take one of the ``size`` slots of ``group`` (shared by
        every machine of this lock_dir or store, per project); None: all are held."""

    def paused_tasks(self) -> dict[str, PauseInfo]: ...

    def set_pause(self, task: str, *, reason: str | None, now: datetime, user: str) -> None:
        """Pause a task as ``user`` on this host (again: replaces the reason and time)."""

    def clear_pause(self, task: str) -> bool:
        """Resume a task; False when it was not paused."""

    def check(self) -> StoreCheck | None:
        """Reach the store and measure it; None when there is no store to reach."""

    def sweep(self, now: datetime) -> None:
        """Housekeeping: claims and chain ends older than any catch-up can reach."""

    def stop_waiting(self) -> None:
        """Told to stop (SIGTERM): cut short what waits for the store, now and from now on,
        so the run can record its rows and end. Safe to call from a signal handler."""

    def close(self) -> None:
        """Close connections; idempotent."""
