"""cronctl: scheduled jobs in version control.

from cronctl import load
schedule = load("schedules.toml")
assert not schedule.errors and not schedule.duplicate_names()
"""

from cronctl.core.model import Problem, Schedule, Settings, Task
from cronctl.edge.files import load
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

__version__ = "0.1.0"

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
