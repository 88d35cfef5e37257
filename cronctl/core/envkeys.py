"""The keys of secrets read from files (`env_files`, `env_from_file`) and of `max_output`.
The files themselves are read by edge/secrets.py at each run, never here, so no value of a
secret can reach the schedule, its cache or `check`'s output."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from cronctl.core.values import Check, check_line

DEFAULT_MAX_OUTPUT = 16 * 1024 * 1024
#: The smallest cap: room for a useful head and tail on either side of the marker.
MIN_MAX_OUTPUT = 4096
#: `max_output = "unlimited"`: the output goes straight to the log, uncapped.
UNLIMITED = 0
_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_SIZE = r"(\d{1,12})\s*([KMGT]?)(?:I?B)?\Z"  # with re.ASCII and re.IGNORECASE
_NAME = r"[A-Za-z_][A-Za-z0-9_]*\Z"  # with re.ASCII: a name a shell can expand
#: Names cronctl sets for every run: a secret file must not replace them.
RESERVED_PREFIX = "CRONCTL_"
ENV_KEYS: dict[str, Check] = {
    "env_files": ("str_list", 'an array of file paths, e.g. ["/run/secrets/app.env"]'),
    "env_from_file": ("str_table", 'a table of file paths, e.g. { TOKEN = "api-token" }'),
    "max_output": ("str", 'a size such as "16MB", or "unlimited"'),
}


def parse_size(text: str, minimum: int = MIN_MAX_OUTPUT, least: str = "4KB") -> int:
    """'16MB' -> 16777216 (powers of 1024; KB, KiB and K mean the same); "unlimited" ->
    UNLIMITED. A size below ``minimum`` (written ``least``) raises ValueError."""
    if text.strip().lower() == "unlimited":
        return UNLIMITED
    match = re.match(_SIZE, text.strip(), re.ASCII | re.IGNORECASE)
    if match is None:
        raise ValueError(
            f"size {text[:40]!r} is not understood; write a number with B, KB, MB or GB "
            '(powers of 1024), e.g. "16MB", or "unlimited"'
        )
    size = int(match.group(1)) * _UNITS[match.group(2).upper()]
    if size < minimum:
        raise ValueError(f"size {text!r} is below the smallest cap, {least}")
    return size


def env_problem(key: str, value: Any) -> str | None:
    """What is wrong with the value of a key of ENV_KEYS whose type is right."""
    if key == "max_output":
        try:
            parse_size(value)
        except ValueError as exc:
            return f"'max_output': {exc}"
        return None
    if key == "env_files":
        seen: set[str] = set()
        for path in value:
            if bad := _path_problem(key, path):
                return bad
            if path in seen:
                return f"'env_files' names {path!r} twice"
            seen.add(path)
        return None
    for name, path in value.items():
        if not re.match(_NAME, name, re.ASCII):
            return (
                f"env_from_file name {name[:40]!r} is not a variable name: use letters, "
                "digits and _, not first a digit"
            )
        if name.startswith(RESERVED_PREFIX):
            return f"env_from_file name {name!r}: CRONCTL_* names are cronctl's own"
        if bad := _path_problem(f"env_from_file.{name}", path):
            return bad
    return None


def _path_problem(key: str, path: str) -> str | None:
    return f"{key!r}: a file path must not be empty" if not path.strip() else check_line(key, path)


def secret_path(text: str, base: Path, credentials: str | None) -> Path:
    """Where a secret file written as ``text`` is: an absolute path (after ``~``) is itself;
    a relative one is read in the directory of systemd credentials (``credentials``, from
    ``$CREDENTIALS_DIRECTORY``) when cronctl runs with it, else in the schedule's ``base``."""
    path = Path(text).expanduser()
    if path.is_absolute():
        return path
    return Path(os.path.normpath(Path(credentials or base) / path))
