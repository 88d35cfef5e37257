"""cronctl: scheduled jobs in version control.

from cronctl import load
schedule = load("schedules.toml")
assert not schedule.errors and not schedule.duplicate_names()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cronctl._version import __version__
from cronctl.errors import (
    CronctlError,
    CronSyntaxError,
    DurationError,
    LockDirNotSharedError,
    ScheduleFileError,
    UnsafeDirectoryError,
    UsageError,
    ZoneError,
)

if TYPE_CHECKING:
    from cronctl.core.model import Problem, Schedule, Settings, Task
    from cronctl.edge.schedfiles import load

#: The public names that are imported on first use (PEP 562): every `cronctl ...` command
#: imports this package first, and a quiet `cronctl run` never needs the schedule model.
_LAZY = {"Problem": "cronctl.core.model", "Schedule": "cronctl.core.model",
         "Settings": "cronctl.core.model", "Task": "cronctl.core.model",
         "load": "cronctl.edge.schedfiles"}  # fmt: skip


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(module, fromlist=[name]), name)
    globals()[name] = value
    return value


__all__ = [
    "CronSyntaxError",
    "CronctlError",
    "DurationError",
    "LockDirNotSharedError",
    "Problem",
    "Schedule",
    "ScheduleFileError",
    "Settings",
    "Task",
    "UnsafeDirectoryError",
    "UsageError",
    "ZoneError",
    "__version__",
    "load",
]
