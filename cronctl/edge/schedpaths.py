"""Which schedule files a command reads (flag, ``CRONCTL_FILE``, the default), and their bytes
(a quiet `run` reads them to know them unchanged, and never parses them)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from cronctl.errors import ScheduleFileError, UsageError

DEFAULT_FILE = "schedules.toml"
# docs/schedule-file.md, Limits: read this far and one byte more, so the parse can refuse a
# larger file without reading the rest (or parsing it for minutes without a word).
MAX_SCHEDULE_BYTES = 10 * 2**20


def schedule_paths(given: Sequence[Path] | None, env: Mapping[str, str]) -> list[Path]:
    """--file values (a directory means its *.toml, sorted), else CRONCTL_FILE, else the default."""
    if given:
        candidates = list(given)
    elif "CRONCTL_FILE" in env:
        value = env["CRONCTL_FILE"]
        if not all(parts := value.split(os.pathsep)):  # "" would quietly schedule nothing
            raise UsageError(
                f"CRONCTL_FILE={value!r} is empty or has an empty entry; give schedule files "
                f"separated by {os.pathsep!r} (e.g. CRONCTL_FILE=/srv/a.toml{os.pathsep}"
                "/srv/b.toml), or unset it"
            )
        candidates = [Path(p) for p in parts]
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


def read_bytes(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.read(MAX_SCHEDULE_BYTES + 1)
    except OSError as exc:
        raise ScheduleFileError(f"{path}: cannot read: {exc.strerror}", path) from None
