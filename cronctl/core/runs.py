"""The run record every layer speaks: one occurrence dealt with by one machine."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

__all__ = ["FAILURES", "OUTCOMES", "START_TRIGGER", "RunRow"]

_SKIPS: Final = ("paused", "condition", "another server", "still running", "group full")
_ENDINGS: Final = ("ok", "failed", "timeout", "interrupted", "error", "missed")
#: The outcomes that count as a failure (`status`'s FAILS, `history --failed`); a run stopped
#: by a signal (``interrupted``) was asked to stop, it did not fail.
FAILURES: Final = ("failed", "timeout", "error")
#: Every outcome a run row may hold, plus the two states of a run in progress.
OUTCOMES: Final = frozenset(("pending", "running", *_ENDINGS, *(f"skipped: {w}" for w in _SKIPS)))
#: The trigger of a start-up run (`on_start = true`, run by `cronctl work` as it starts).
START_TRIGGER: Final = "start"


@dataclass(frozen=True, slots=True)
class RunRow:
    """One occurrence dealt with by one machine (run, skipped or missed): a line of history."""

    id: str
    task: str
    occurrence: datetime
    outcome: str  # one of OUTCOMES
    host: str
    pid: int | None = None  # the cronctl process responsible for the row
    exit_code: int | None = None
    started: datetime | None = None
    ended: datetime | None = None
    duration_s: float | None = None
    log_path: str | None = None
    tail: str = ""  # bounded by the caller (4 KiB)
    message: str | None = None
    trigger: str = "schedule"  # or "manual" (`cronctl exec`), or START_TRIGGER
    attempt: int = 1  # 2, 3, ... for the retries of the same occurrence
