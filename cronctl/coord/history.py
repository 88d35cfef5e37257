"""The optional fleet history (:class:`FleetHistory`) and its values: apart from port.py,
which every `run` imports, as only the ``--fleet`` views and the dashboard read it."""

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
    """One page, newest first by (occurrence, id), strictly before the keyset ``before``."""

    task: str | None = None
    host: str | None = None
    outcome: str | None = None
    trigger: str | None = None
    before: tuple[datetime, str] | None = None
    limit: int = 50


@dataclass(frozen=True, slots=True)
class HostSeen:
    """A host's latest check-in: its ``clock``, and the store's now() then as ``seen``."""

    host: str
    version: str
    clock: datetime
    seen: datetime

    @property
    def skew_s(self) -> float:
        """Ahead of the store's clock (negative: behind), network delay included."""
        return (self.clock - self.seen).total_seconds()


@dataclass(frozen=True, slots=True)
class HostLatest:
    """A host on the fleet page: its newest run's end (or start, or due time), tasks run,
    those whose last run there failed (as asked): counted, the first NAMED_FAILING named."""

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
    """How a task last went across the fleet, counted by host (the first NAMED_NOT_OK not ok
    named): an outage costs what a quiet fleet does (docs/dashboard.md#speed)."""

    task: str
    ok_hosts: int
    not_ok_hosts: int
    failing_hosts: int
    not_ok: list[HostOutcome]


class FleetHistory(Protocol):
    """Every machine's run records in a store. Any method may raise StoreUnavailable."""

    def publish(self, rows: Sequence[RunRow]) -> None:
        """Send run records (idempotent by run id)."""

    def fleet_latest(self, task: str | None = None, host: str | None = None) -> list[RunRow]:
        """The latest finished run of every (task, host), by task and host; filtered if given."""

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
        """Newest first, filtered if given; ``since``: occurrences at or after."""

    def fleet_page(self, query: RunQuery) -> list[RunRow]:
        """Filtered and keyset-paged by the store."""

    def fleet_run(self, run_id: str) -> RunRow | None:
        """With its published output tail as ``tail``."""

    def fleet_hosts(self) -> list[HostSeen]:
        """Every host's latest check-in, by host."""


def fleet_history_of(coord: Coordinator) -> FleetHistory:
    """A UsageError saying how to configure a store when there is none."""
    if coord.fleet is None:
        raise UsageError(
            "--fleet reads the coordination store, and none is configured: set coordination "
            'in [cronctl] (coordination = "postgresql://..."), CRONCTL_COORDINATION or '
            "--coordination URL"
        )
    return coord.fleet
