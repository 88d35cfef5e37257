"""What a run's outcome says: the killing signal, a held lock's holder, a stop request.

Split from `cronctl.run.once` so the order of a due task stays readable there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta

from cronctl.coord.port import HeldLock, HolderInfo
from cronctl.core.model import Task, format_duration
from cronctl.core.runs import RunRow
from cronctl.edge.process import runner

__all__ = ["NOT_STARTED", "OVERDUE_SLACK", "record_command", "result_message", "still_running"]


def record_command(
    task: Task, lock: HeldLock | None, pid: object, warn: Callable[[str], None]
) -> None:
    """Name the started command in the overlap lock's holder record; never stops the run.

    The command is already running: a record that cannot be written (full disk) costs only
    the second line of defence, so it is a warning, not a reason to abandon the command.
    """
    if lock is None or not isinstance(pid, int):
        return
    try:
        lock.record_command(pid)
    except OSError as exc:
        warn(
            f"cronctl: warning: task {task.name}: could not record its command in the overlap "
            f"lock ({exc}); if it closes its descriptors and cronctl dies, a second copy could "
            "start"
        )


NOT_STARTED = "not started: cronctl was told to stop"
# A holder's own cronctl kills it at its timeout plus the kill grace (10 s): past this much
# more, nobody is enforcing it (the holder's cronctl died, or the task escaped the group).
OVERDUE_SLACK = timedelta(seconds=70)


def result_message(result: runner.CommandResult) -> str | None:
    """The result's message, naming the signal that ended it (never "exit None")."""
    if result.signal is None or result.exit_code is not None:
        return result.message
    killed = f"killed by {runner.signal_name(result.signal)}"
    return f"{killed}; {result.message}" if result.message else killed


def still_running(row: RunRow, holder: HolderInfo | None, now: datetime) -> RunRow:
    """The skip for a held lock; a failure when the holder is long past its own timeout."""
    if holder is None:
        return replace(row, outcome="skipped: still running", message="holder unknown")
    if holder.overdue(now, OVERDUE_SLACK):
        timeout = format_duration(holder.timeout or timedelta(0))
        message = (
            f"did not run: the run by {holder.describe()} still holds the overlap lock, "
            f"long past its {timeout} timeout; stop it (kill the process group) or find "
            "what keeps it alive"
        )
        return replace(row, outcome="error", message=message)
    return replace(row, outcome="skipped: still running", message=holder.describe())
