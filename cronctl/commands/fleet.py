"""`status --fleet` and `history --fleet`, from the coordination store
(docs/fleets-postgresql.md); without one, ``fleet_history_of`` says how to set one."""

from __future__ import annotations

from dataclasses import dataclass

from cronctl.commands.operate import HistoryFilter
from cronctl.coord.history import fleet_history_of
from cronctl.coord.port import Coordinator
from cronctl.core.model import Schedule
from cronctl.core.runs import RunRow


@dataclass(frozen=True)
class FleetRow:
    """One task on one machine: its latest finished run, and whether the task is paused."""

    task: str
    host: str | None
    last_run: RunRow | None
    paused: bool
    pause_reason: str | None


def fleet_status(schedule: Schedule, coord: Coordinator) -> list[FleetRow]:
    """`status --fleet`: every task, one row per machine that ran it (its latest run)."""
    latest = fleet_history_of(coord).fleet_latest()  # first: without a store, nothing else is read
    pauses = coord.paused_tasks()
    by_task: dict[str, list[RunRow | None]] = {}
    for run in sorted(latest, key=lambda r: r.host):
        by_task.setdefault(run.task, []).append(run)
    rows: list[FleetRow] = []
    for task in schedule.tasks:
        pause = pauses.get(task.name)
        paused, reason = task.paused or pause is not None, pause.reason if pause else None
        for r in by_task.get(task.name) or [None]:  # one row even where it never ran
            rows.append(FleetRow(task.name, r.host if r else None, r, paused, reason))
    return rows


def fleet_history(coord: Coordinator, which: HistoryFilter, limit: int) -> list[RunRow]:
    """Every machine's runs from the store, newest first, filtered as `history` filters."""
    return fleet_history_of(coord).fleet_history(
        which.task, which.host, limit, failed=which.failed, since=which.since
    )
