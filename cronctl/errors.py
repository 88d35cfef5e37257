"""Errors raised by cronctl.

The hierarchy::

    CronctlError                    anything cronctl reports instead of doing its job (exit 2)
    ├── ScheduleFileError           a schedule file is missing, unreadable or has errors
    ├── CronSyntaxError             an expression is outside cronctl's cron language (ValueError)
    ├── ZoneError                   a time zone cronctl cannot use (ValueError)
    ├── DurationError               a duration such as "1h30m" that does not parse (ValueError)
    ├── UnsafeDirectoryError        a state or lock dir others could tamper with (PermissionError)
    ├── LockDirNotSharedError       on_one_server over a local lock_dir where that is refused
    ├── EnvFileError                a secret file that is missing, unsafe or breaks its format
    └── UsageError                  flags or arguments that do not make sense together

Every error carries where it came from, so the CLI can say it without a traceback.
"""

from __future__ import annotations

from pathlib import Path


class CronctlError(Exception):
    """Base of every error cronctl raises on purpose; the CLI maps it to exit code 2."""

    exit_code = 2


class ScheduleFileError(CronctlError):
    """A schedule file is missing, unreadable, or holds errors that stop the command."""

    def __init__(self, message: str, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class CronSyntaxError(CronctlError, ValueError):
    """An expression is not in cronctl's cron language; `code` is the stable problem code."""

    def __init__(self, message: str, code: str = "cron-syntax", field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.field = field


class ZoneError(CronctlError, ValueError):
    """A time zone that is neither UTC, a fixed offset nor a known IANA name."""


class DurationError(CronctlError, ValueError):
    """A duration that is not a positive "1h30m"-style string."""


class UnsafeDirectoryError(CronctlError, PermissionError):
    """A state or lock directory that others could write into or that another user owns."""

    def __init__(self, message: str, path: Path) -> None:
        super().__init__(message)
        self.path = path


class LockDirNotSharedError(CronctlError):
    """on_one_server tasks over a lock_dir on a local file system, refused by policy."""


class UsageError(CronctlError):
    """Command-line arguments that do not make sense together."""


class EnvFileError(CronctlError):
    """A secret file cannot be used (missing, unsafe, not KEY=VALUE); never quotes a value."""

    def __init__(self, message: str, path: str, line: int | None = None) -> None:
        super().__init__(f"{path}:{line}: {message}" if line is not None else f"{path}: {message}")
        self.path = path
        self.line = line
