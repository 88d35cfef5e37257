"""Find and read schedule files; decode TOML keeping enough to locate problems."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

from cronctl.core.assemble import build_schedule
from cronctl.core.lines import index_lines, syntax_error_line
from cronctl.core.model import Problem, Schedule
from cronctl.core.schema import FileResult, parse_document
from cronctl.errors import ScheduleFileError

DEFAULT_FILE = "schedules.toml"


def schedule_paths(given: Sequence[Path] | None, env: Mapping[str, str]) -> list[Path]:
    """--file values (a directory means its *.toml, sorted), else CRONCTL_FILE, else the default."""
    if given:
        candidates = list(given)
    elif env.get("CRONCTL_FILE"):
        candidates = [Path(p) for p in env["CRONCTL_FILE"].split(os.pathsep) if p]
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


def read_file(path: Path) -> FileResult:
    """Read and validate one file; unreadable bytes and TOML syntax become problems."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ScheduleFileError(f"{path}: cannot read: {exc.strerror}", path) from None
    return parse_bytes(path, data)


def parse_bytes(path: Path, data: bytes) -> FileResult:
    """Validate a schedule file's bytes as if read from `path` (e.g. a revision's from git)."""
    result = FileResult(path=path, display=str(path))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        result.problems.append(
            Problem(
                str(path),
                line,
                None,
                "error",
                "toml-syntax",
                "file is not UTF-8 text; TOML files must be UTF-8 encoded",
            )
        )
        return result
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        where, message = syntax_error_line(str(exc))
        result.problems.append(
            Problem(
                str(path),
                where or 1,
                None,
                "error",
                "toml-syntax",
                f"TOML syntax: {message}; fix the file so it parses",
            )
        )
        return result
    parse_document(doc, index_lines(text), result)
    return result


def load_paths(paths: Sequence[Path]) -> Schedule:
    """Read every file and combine them into one Schedule."""
    return build_schedule([read_file(p) for p in paths])


def load(
    files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    env: Mapping[str, str] | None = None,
) -> Schedule:
    """Load schedule files as the CLI would; raises ScheduleFileError only if none can be read."""
    if files is None:
        given = None
    elif isinstance(files, str | os.PathLike):
        given = [Path(files)]
    else:
        given = [Path(f) for f in files]
    return load_paths(schedule_paths(given, os.environ if env is None else env))
