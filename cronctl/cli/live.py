"""Failure reports printed as each task ends, not when the slowest task of the minute ends.

A 0.1 s failure used to wait behind a sleeper, so cron's mails (and a terminal) got the
reports late and out of order. Each report is printed whole, under a lock, from the thread
whose task just ended; `notify = "change"` decides which ones are printed at all.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable

from cronctl.core.model import Task, format_utc
from cronctl.edge.store import RunRow


class LiveReports:
    """The `on_done` of a run: prints what each ending occurrence calls for."""

    def __init__(self) -> None:
        """Nothing reported yet."""
        self._lock = threading.Lock()
        self.handled: set[str] = set()  # run ids already dealt with (printed or silenced)

    def __call__(self, task: Task, result: RunRow, kind: str | None) -> None:
        """Print a failure report or a recovery line for `result` (`kind`), or nothing."""
        from cronctl.cli.render import _failure

        with self._lock:
            self.handled.add(result.id)
            if kind == "failure":
                _failure(result)
            elif kind == "recovered":
                print(
                    f"cronctl: task {task.name} recovered: ok for {format_utc(result.occurrence)}",
                    file=sys.stderr,
                    flush=True,
                )

    def forget(self, run_ids: Iterable[str]) -> None:
        """Drop ids whose tick has been rendered."""
        with self._lock:
            self.handled.difference_update(run_ids)
