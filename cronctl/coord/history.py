"""The optional fleet history (:class:`FleetHistory`): every machine's run records, kept by
a store, and the values its readers get. Apart from the runtime port (port.py): only the
``--fleet`` views and the dashboard read it, and every `run` imports the port."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from cronctl.core.runs import RunRow
from cronctl.errors import UsageError

if TYPE_CHECKING:
    from cronctl.coord.port import Coordinator


@dataclass(frozen=True, slots=True)
class RunQuery:
    """One page of history: every filter optional, newest first by (occurrence, id),
    strictly before the keyset cursor ``before``."""

    task: str | None = None
    host: str | None = None
    outcome: str | None = None
    trigger: str | None = None
    before: tuple[datetime, str] | None = None
    limit: int = 50


@dataclass(frozen=True, slots=True)
class HostSeen:
    """A host's latest check-in: its cronctl ``version``, its ``clock`` and the store's
    now() ``seen`` at that moment."""

    host: str
    version: str
    clock: datetime
    seen: datetime

    @property
    def skew_s(self) -> float:
        """The host's clock ahead of the store's (negative: behind), the statement's network
        delay included."""
        return (self.clock - self.seen).total_seconds()


@dataclass(frozen=True, slots=True)
class HostLatest:
    """A host's last runs for the fleet page: when its newest ended (or started, or was
    due), how many tasks it ran, how many last ran there with a failing outcome asked for,
    and the first NAMED_FAILING of those, by name."""

    host: str
    last_seen: datetime
    tasks: int
    failing: list[str]
    failing_total: int


@dataclass(frozen=True, slots=True)
class HostOutcome:
    host: str
    outcome: str
    run_id: str


NAMED_NOT_OK = 3
NAMED_FAILING = 20


@dataclass(frozen=True, slots=True)
class TaskLatest:
    """How a task last went across the fleet: hosts whose last run was ok, not ok, failing
    (an outcome asked for), and the first NAMED_NOT_OK of the not ok, by host. Counted, not
    listed: a fleet in an outage costs what a quiet one does (docs/dashboard.md#speed)."""

    task: str
    ok_hosts: int
    not_ok_hosts: int
    failing_hosts: int
    not_ok: list[HostOutcome]


class FleetHistory(Protocol):
    """Every machine's run records, kept by a store: published as runs end, read by the
    ``--fleet`` views and the dashboard. Every method may raise :class:`StoreUnavailable`."""

    def publish(self, rows: Sequence[RunRow]) -> None:
        """Send run records (idempotent by run id)."""

    def fleet_latest(self, task: str | None = None, host: str | None = None) -> list[RunRow]:
        """The latest finished run of every (task, host), by task and host; one task's, or
        one host's, when given."""

    def fleet_summary(self, failing: Sequence[str]) -> list[TaskLatest]:
        """Every task's :class:`TaskLatest` (``failing``: the outcomes that count), by task."""

    def fleet_host_summary(self, failing: Sequence[str]) -> list[HostLatest]:
        """Every host's :class:`HostLatest` (``failing``: the outcomes that count), by host."""

    def fleet_history(
        self,
        task: str | None,
        host: str | None,
        limit: int,
        *,
        failed: bool = False,
        since: datetime | None = None,
    ) -> list[RunRow]:
        """Newest first, optionally one task's and one host's, only the failures, only
        occurrences at or after ``since``."""

    def fleet_page(self, query: RunQuery) -> list[RunRow]:
        """One page, filtered and keyset-paged by the store."""

    def fleet_run(self, run_id: str) -> RunRow | None:
        """One record with its published output tail as ``tail``."""

    def fleet_hosts(self) -> list[HostSeen]:
        """Every host's latest check-in, by host."""


def fleet_history_of(coord: Coordinator) -> FleetHistory:
    """The coordinator's fleet history; a UsageError saying how to configure a store when
    there is none."""
    if coord.fleet is None:
        raise UsageError(
            "--fleet reads the coordination store, and none is configured: set coordination "
            'in [cronctl] (coordination = "postgresql://..."), CRONCTL_COORDINATION or '
            "--coordination URL"
        )
    return coord.fleet
