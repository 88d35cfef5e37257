"""Which schedule files a command reads (flag, ``CRONCTL_FILE``, the default), and their bytes.

Parsing them is edge/schedfiles.py: a quiet `run` reads their bytes to know them unchanged,
and never parses them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from cronctl.errors import ScheduleFileError, UsageError

#: The schedule file a command reads when no flag or CRONCTL_FILE names one.
DEFAULT_FILE = "schedules.toml"


def schedule_paths(given: Sequence[Path] | None, env: Mapping[str, str]) -> list[Path]:
    """--file values (a directory means its *.toml, sorted), else CRONCTL_FILE, else the default."""
    if given:
        candidates = list(given)
    elif "CRONCTL_FILE" in env:
        candidates = _env_files(env["CRONCTL_FILE"])
    else:
        candidates = [Path(DEFAULT_FILE)]
    paths: list[Path] = []
    for candidate in candidates:
        if candidate.is_dir():
            found = sorted(p for p in candidate.glob("*.toml") if p.is_file())
            if not found:
                raise ScheduleFileError(
                    f"{candidate}: directory holds no *.toml schedule files", candidate
                )
            paths.extend(found)
        elif candidate.is_file():
            paths.append(candidate)
        elif not candidate.exists():
            hint = " (create one with `cronctl init`)" if not given else ""
            raise ScheduleFileError(f"{candidate}: no such schedule file{hint}", candidate)
        else:
            raise ScheduleFileError(f"{candidate}: not a regular file", candidate)
    return paths


def _env_files(value: str) -> list[Path]:
    """CRONCTL_FILE's paths; an empty value or an empty entry would quietly schedule nothing."""
    parts = value.split(os.pathsep)
    if not all(parts):
        raise UsageError(
            f"CRONCTL_FILE={value!r} is empty or has an empty entry; give schedule files "
            f"separated by {os.pathsep!r} (e.g. CRONCTL_FILE=/srv/a.toml{os.pathsep}/srv/b.toml), "
            "or unset it"
        )
    return [Path(p) for p in parts]


#: The most the schedule files may hold together (docs/schedule-file.md, Limits): a far
#: larger file would keep `check` parsing for minutes without a word. A file is read only
#: this far and one byte more, so the parse can refuse it without reading the rest.
MAX_SCHEDULE_BYTES = 10 * 2**20


def read_bytes(path: Path) -> bytes:
    """A schedule file's bytes, at most MAX_SCHEDULE_BYTES + 1 of them (more: the parse
    refuses the file); a file that cannot be read stops the command (exit 2)."""
    try:
        with path.open("rb") as fh:
            return fh.read(MAX_SCHEDULE_BYTES + 1)
    except OSError as exc:
        raise ScheduleFileError(f"{path}: cannot read: {exc.strerror}", path) from None
