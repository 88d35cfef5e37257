"""What cronctl reports instead of doing its job (exit 2), each with where it came from, so
the CLI can say it without a traceback."""

from __future__ import annotations

from pathlib import Path


class CronctlError(Exception):
    exit_code = 2


class ScheduleFileError(CronctlError):
    def __init__(self, message: str, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class CronSyntaxError(CronctlError, ValueError):
    """`code` is the stable problem code; `field` the field at fault, if one is."""

    def __init__(self, message: str, code: str = "cron-syntax", field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.field = field


class ZoneError(CronctlError, ValueError): ...


class DurationError(CronctlError, ValueError): ...


class UnsafeDirectoryError(CronctlError, PermissionError):
    def __init__(self, message: str, path: Path) -> None:
        super().__init__(message)
        self.path = path


class LockDirNotSharedError(CronctlError):
    """on_one_server over a local lock_dir where that is refused."""


class UsageError(CronctlError): ...


class EnvFileError(CronctlError):
    """Never quotes a value: a malformed line may still be a secret."""

    def __init__(self, message: str, path: str, line: int | None = None) -> None:
        super().__init__(f"{path}:{line}: {message}" if line is not None else f"{path}: {message}")
        self.path = path
        self.line = line
