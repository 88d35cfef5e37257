"""The run record every layer speaks: one occurrence dealt with by one machine."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal, TypeAlias, get_args

#: How a started command ended (edge/process/runner.py); ``error``: it could not start.
Ended: TypeAlias = Literal["ok", "failed", "timeout", "interrupted", "error"]
#: Every outcome a run row may hold: the two states of a run in progress, how it ended,
#: ``missed`` (older than misfire_grace), the skips, and ``would run`` (`run --dry-run`'s
#: rows, never recorded).
Outcome: TypeAlias = Literal[
    "pending",
    "running",
    Ended,
    "missed",
    "skipped: paused",
    "skipped: condition",
    "skipped: another server",
    "skipped: still running",
    "skipped: group full",
    "would run",
]
#: The outcomes history may hold (a stored row outside them is refused).
OUTCOMES: Final[frozenset[Outcome]] = frozenset(get_args(Outcome)) - {"would run"}
#: The outcomes that count as a failure (`status`'s FAILS, `history --failed`, `notify`); a
#: run stopped by a signal (``interrupted``) was asked to stop, it did not fail.
FAILED: Final[frozenset[Outcome]] = frozenset({"failed", "timeout", "error"})
#: A run that ended badly, failed or stopped: shown red, its output kept and published.
NOT_OK: Final[frozenset[Outcome]] = FAILED | {"interrupted"}
#: A run that ended on its own, ok or failing (not a skip, a miss or a stop).
FINISHED: Final[frozenset[Outcome]] = FAILED | {"ok"}
#: A run not over yet.
UNFINISHED: Final[frozenset[Outcome]] = frozenset({"pending", "running"})
#: How long the machine that ran it keeps a run's log, and its row of history.
LOG_RETENTION: Final = timedelta(days=14)
HISTORY_RETENTION: Final = timedelta(days=90)
#: The trigger of a start-up run (`on_start = true`, run by `cronctl work` as it starts).
START_TRIGGER: Final = "start"
#: The trigger of a chained task's run, started because its upstream tasks ended (docs/chains.md).
AFTER_TRIGGER: Final = "after"
#: Every trigger a run is recorded with ("manual": `cronctl exec`, the dashboard's Run now).
TRIGGERS: Final = ("schedule", "manual", START_TRIGGER, AFTER_TRIGGER)


@dataclass(frozen=True, slots=True)
class RunRow:
    """One occurrence dealt with by one machine (run, skipped or missed): a line of history."""

    id: str
    task: str
    occurrence: datetime
    outcome: Outcome
    host: str
    pid: int | None = None  # the cronctl process responsible for the row
    exit_code: int | None = None
    started: datetime | None = None
    ended: datetime | None = None
    duration_s: float | None = None
    log_path: str | None = None
    tail: str = ""  # bounded by the caller (4 KiB)
    message: str | None = None
    trigger: str = "schedule"  # or "manual" (`cronctl exec`), START_TRIGGER, AFTER_TRIGGER
    attempt: int = 1  # 2, 3, ... for the retries of the same occurrence
    upstream: str = ""  # a chained run's upstream run ids, space-separated (AFTER_TRIGGER)
