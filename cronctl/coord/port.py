"""The coordination port: what the use cases need from claims, overlap locks, group slots
and pauses (:class:`Coordinator`), the optional fleet history (:class:`FleetHistory`), and
the values that cross them.

Two adapters implement it, side by side in this package: ``files`` (files in ``lock_dir``)
and ``postgres`` (a PostgreSQL schema, which alone keeps a fleet history).
:func:`cronctl.coord.open_coordinator` chooses one from the settings; nothing outside
``cronctl.coord`` knows which one it has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, Protocol

from cronctl.coord.redact import redact_text, redact_url
from cronctl.core.process_id import ProcessId
from cronctl.core.runs import RunRow
from cronctl.core.visible import visible
from cronctl.errors import CronctlError, UsageError

__all__ = [
    "NAMED_FAILING",
    "NAMED_NOT_OK",
    "UNREACHABLE",
    "ChainEnd",
    "Claim",
    "Coordinator",
    "FleetHistory",
    "GroupSlot",
    "HeldLock",
    "HolderInfo",
    "HostLatest",
    "HostOutcome",
    "HostSeen",
    "Overlap",
    "PauseInfo",
    "RunQuery",
    "StoreCheck",
    "StoreUnavailable",
    "TaskLatest",
    "fleet_history_of",
    "is_coordination_url",
    "redact_text",
    "redact_url",
]


@dataclass(frozen=True, slots=True)
class HolderInfo:
    """Who holds an overlap lock: the machine, the cronctl process and when its run started.

    ``command`` identifies the task's own process (its group leader) once it has started, and
    ``timeout`` is the task's timeout at that time (None: none).
    """

    host: str
    pid: int
    started: datetime
    command: ProcessId | None = None
    timeout: timedelta | None = None

    def describe(self) -> str:
        """One phrase for messages: ``pid 42 on web-1 since 2026-08-03T09:00:00Z``.

        The pid is the command's when known: that is the process an operator would look at.
        The host is shown as task output is (a store row may hold any text).
        """
        pid = self.command.pid if self.command is not None else self.pid
        since = self.started.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"pid {pid} on {visible(self.host, one_line=True)} since {since}"

    def overdue(self, now: datetime, slack: timedelta) -> bool:
        """Whether the holder has run past its timeout by more than ``slack``."""
        return self.timeout is not None and now - self.started > self.timeout + slack


@dataclass(frozen=True, slots=True)
class PauseInfo:
    """An operator pause: why, since when, and who set it from where (None when unknown)."""

    reason: str | None
    since: datetime | None
    host: str | None
    user: str | None


#: The message recorded for a guarded task when the store cannot be reached
#: (docs/fleets-postgresql.md).
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


class GroupSlot(Protocol):
    """One held slot of a ``[[group]]``: cronctl holds it while the task runs (never the
    task's processes: a task that closes the descriptors it inherited must not free it)."""

    def release(self) -> None:
        """Free the slot; idempotent."""
        ...


@dataclass(frozen=True, slots=True)
class Overlap:
    """The answer of :meth:`Coordinator.try_overlap`.

    - ``acquired``: ``lock`` is ours; ``holder`` is None.
    - ``held``: another run holds it; ``holder`` says who when known; ``lock`` is None.
    - ``overtaken``: the holder ran past the lease, so it is treated as stuck; ``lock`` is ours
      and ``holder`` names the stuck run for the warning.
    """

    status: Literal["acquired", "held", "overtaken"]
    lock: HeldLock | None
    holder: HolderInfo | None

    @property
    def may_run(self) -> bool:
        """Whether the caller should run the task (acquired or overtaken)."""
        return self.lock is not None


Claim = tuple[str, datetime]


@dataclass(frozen=True, slots=True)
class ChainEnd:
    """How a run of a task that others follow ended (its last attempt), as every machine
    sharing the lock_dir or store reads it: the decision of what runs after it is durable
    (docs/chains.md). One per (task, occurrence, host); recording it again replaces it."""

    task: str
    occurrence: datetime
    outcome: str
    run_id: str
    host: str
    ended: datetime


@dataclass(frozen=True, slots=True)
class StoreCheck:
    """What :meth:`Coordinator.check` measured of the store (for `cronctl doctor`).

    ``connect_s``: connecting and creating or checking the schema; ``round_trip_s``: one
    query, which read the store's clock ``server_now`` while this machine's read ``local_now``
    (the middle of the round trip); ``version`` of ``latest``: the schema in the store, and
    the one this cronctl writes.
    """

    connect_s: float
    round_trip_s: float
    server_now: datetime
    local_now: datetime
    version: int
    latest: int


@dataclass(frozen=True, slots=True)
class RunQuery:
    """One page of fleet history for the dashboard: every filter optional, newest first by
    (occurrence, id), strictly before the keyset cursor ``before`` (a row's occurrence and
    id)."""

    task: str | None = None
    host: str | None = None
    outcome: str | None = None
    trigger: str | None = None
    before: tuple[datetime, str] | None = None
    limit: int = 50


@dataclass(frozen=True, slots=True)
class HostSeen:
    """A host's latest check-in with the store: its cronctl ``version``, its own clock
    ``clock`` and the store's now() ``seen`` at that moment."""

    host: str
    version: str
    clock: datetime
    seen: datetime

    @property
    def skew_s(self) -> float:
        """How far the host's clock was ahead of the store's (negative: behind), in seconds;
        the network's delay of that one statement included."""
        return (self.clock - self.seen).total_seconds()


@dataclass(frozen=True, slots=True)
class HostLatest:
    """What a host's last runs say, for the fleet page: when its newest ended (or started,
    or was due), how many tasks it ran, how many of them last ran there with one of the
    outcomes asked for, and the first NAMED_FAILING of those, by name."""

    host: str
    last_seen: datetime
    tasks: int
    failing: list[str]
    failing_total: int


@dataclass(frozen=True, slots=True)
class HostOutcome:
    """How a host's last finished run of a task ended, in brief: the host, the outcome and
    the record's id."""

    host: str
    outcome: str
    run_id: str


#: How many of a task's hosts whose last run was not ok :class:`TaskLatest` names.
NAMED_NOT_OK = 3
#: How many of a host's failing tasks :class:`HostLatest` names.
NAMED_FAILING = 20


@dataclass(frozen=True, slots=True)
class TaskLatest:
    """How a task last went across the fleet, for the dashboard's overview: of the hosts
    that ran it, how many last ran it ok, how many not (and of those, how many with one of
    the failing outcomes asked for), and the first NAMED_NOT_OK of the not ok, by host.

    Counted, not listed: an overview of a fleet in an outage, every task failing on every
    host, costs what a quiet one does (docs/dashboard.md#speed)."""

    task: str
    ok_hosts: int
    not_ok_hosts: int
    failing_hosts: int
    not_ok: list[HostOutcome]


class Coordinator(Protocol):
    """What `run`, `work` and `exec` need from coordination (claims, overlap locks, group
    slots, pauses), for one machine and process: the host and pid given when it is opened
    (:func:`cronctl.coord.open_coordinator`) name this run in every claim, lock and pause it
    takes. Every method may raise :class:`StoreUnavailable` (the file adapter raises
    OSError-based errors instead)."""

    @property
    def fleet(self) -> FleetHistory | None:
        """The store's history of every machine's runs; None: history stays on each machine
        (files in lock_dir). Read it through :func:`fleet_history_of`."""
        ...

    @property
    def may_be_unreachable(self) -> bool:
        """Whether the store can be out of reach for a while (a server across the network):
        a run then keeps the pauses it last read (coord/outbox.py)."""
        ...

    @property
    def skipped_rows(self) -> int:
        """How many rows of the store this process left out because no reader could use
        them (each named once on stderr: docs/faults.md); 0 without a store."""
        ...

    def describe(self) -> str:
        """Where coordination happens, safe to print (no password)."""
        ...

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
        """Claim the (task, occurrence)s in the order given, at once, until ``limit`` are won
        (None: every one); return those this machine won. Every claim before the last one
        won was decided; when fewer than ``limit`` were won, all were.

        ``runs`` names each claim's run (its record's id). A claim in ``leased`` is a lease
        until :meth:`keep_claim` marks its run started, and is taken over from a claimer that
        is gone before that; any other is started as it is won
        (docs/fleets-postgresql.md#claims-are-leases). ``held`` is given the claims not won
        that another machine holds as a lease still: asked again, they may yet be taken over
        (never by files: nothing in a shared directory tells a dead machine from a slow one)."""
        ...

    def orphans(self) -> list[Claim]:
        """Leased claims whose claimer is gone before ``until`` (given at its claim), read
        with the pauses: a machine that runs the task claims them to take them over."""
        ...

    def keep_claim(self, claim: Claim, *, started: bool) -> bool:
        """Renew the lease of a claim this machine won in ``leased``, or (``started``) mark
        its run started, which it must before the run starts: False when the claim is no
        longer this machine's (taken over while it did not answer); the run must not start."""
        ...

    def claimed(self, task: str, occurrence: datetime) -> bool:
        """Whether some machine holds this claim (dry run; takes nothing)."""
        ...

    def record_end(self, end: ChainEnd) -> None:
        """Record, durably, how a run of a task that others follow ended (docs/chains.md)."""
        ...

    def chain_ends(self, tasks: AbstractSet[str], since: datetime) -> list[ChainEnd]:
        """The ends of these tasks, recorded by any machine, of occurrences at or after
        ``since``, oldest first (a record no reader can use is left out)."""
        ...

    def try_overlap(
        self, task: str, *, lease: timedelta | None, now: datetime, timeout: timedelta | None = None
    ) -> Overlap:
        """Try, without waiting, to take the task's overlap lock (``timeout``: the task's)."""
        ...

    def overlap_held(self, task: str) -> bool:
        """Whether the task's overlap lock is held right now (dry run; takes nothing)."""
        ...

    def try_group_slot(self, group: str, size: int) -> GroupSlot | None:
        """Try, without waiting, to take one of the ``size`` slots of ``group`` (shared by
        every machine of this lock_dir or store, per project); None: all are held."""
        ...

    def paused_tasks(self) -> dict[str, PauseInfo]:
        """Every operator pause."""
        ...

    def set_pause(self, task: str, *, reason: str | None, now: datetime, user: str) -> None:
        """Pause a task, set by ``user`` on this host (pausing again replaces the reason and
        time)."""
        ...

    def clear_pause(self, task: str) -> bool:
        """Resume a task; False when it was not paused."""
        ...

    def check(self) -> StoreCheck | None:
        """Reach the store and measure it; None when there is no store to reach."""
        ...

    def sweep(self, now: datetime) -> None:
        """Housekeeping: claims and chain ends older than any catch-up can reach."""
        ...

    def stop_waiting(self) -> None:
        """Told to stop (SIGTERM): cut short what waits for the store, now and from now on,
        so the run can record its rows and end. Safe to call from a signal handler."""
        ...

    def close(self) -> None:
        """Close connections; idempotent."""
        ...


class FleetHistory(Protocol):
    """Every machine's run records, kept by a store (PostgreSQL; files in lock_dir keep none):
    published as runs end, read by the ``--fleet`` views and the dashboard's fleet pages.
    Every method may raise :class:`StoreUnavailable`."""

    def publish(self, rows: Sequence[RunRow]) -> None:
        """Send run records to the fleet history (idempotent by run id)."""
        ...

    def fleet_latest(self, task: str | None = None, host: str | None = None) -> list[RunRow]:
        """The latest finished run of every (task, host) in the fleet history, by task and
        host; only one task's, or one host's, when given."""
        ...

    def fleet_summary(self, failing: Sequence[str]) -> list[TaskLatest]:
        """Every task's :class:`TaskLatest` (``failing``: the outcomes that count), by task,
        counted by the store: what the overview shows."""
        ...

    def fleet_host_summary(self, failing: Sequence[str]) -> list[HostLatest]:
        """Every host's :class:`HostLatest` (``failing``: the outcomes that count), by host,
        counted by the store."""
        ...

    def fleet_history(
        self,
        task: str | None,
        host: str | None,
        limit: int,
        *,
        failed: bool = False,
        since: datetime | None = None,
    ) -> list[RunRow]:
        """The fleet history, newest first, optionally one task's and one host's, only the
        failures (outcome failed, timeout or error), only occurrences at or after ``since``."""
        ...

    def fleet_page(self, query: RunQuery) -> list[RunRow]:
        """One page of the fleet history, filtered and keyset-paged by the store."""
        ...

    def fleet_run(self, run_id: str) -> RunRow | None:
        """One record of the fleet history with its published output tail as ``tail``."""
        ...

    def fleet_hosts(self) -> list[HostSeen]:
        """Every host's latest check-in (version, clock), by host."""
        ...


#: Why a fleet view cannot be shown without a store, and how to configure one.
NO_FLEET_HISTORY = (
    "--fleet reads the coordination store, and none is configured: set coordination "
    'in [cronctl] (coordination = "postgresql://..."), CRONCTL_COORDINATION or '
    "--coordination URL"
)


def fleet_history_of(coord: Coordinator) -> FleetHistory:
    """The coordinator's fleet history, for a view that shows it.

    :raises UsageError: there is none (files in lock_dir), with how to configure a store.
    """
    if coord.fleet is None:
        raise UsageError(NO_FLEET_HISTORY)
    return coord.fleet


def is_coordination_url(url: str) -> bool:
    """Whether ``url`` is a store cronctl can use: a ``postgresql://`` or ``postgres://`` URL."""
    return url.startswith(("postgresql://", "postgres://")) and len(url) > len("postgres://")
