"""Parse schedule files into a Schedule: TOML decoded, every problem located by its line.
`run` imports this only when the files changed (the cache, edge/schedentry.py)."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

from cronctl.core.assemble import build_schedule
from cronctl.core.model import Problem, Schedule
from cronctl.core.schema import FileResult, parse_document
from cronctl.core.tomllines import index_lines, syntax_error_line
from cronctl.edge.schedpaths import MAX_SCHEDULE_BYTES, read_bytes, schedule_paths

# docs/schedule-file.md, Limits; counted before the tasks are validated, most of the cost.
MAX_TASKS = 50_000
# Nesting deeper is reported where it starts; tomllib gives up past a few hundred levels.
_DEEPEST = 100
_LONG_INTEGER = r"[0-9_]{4301,}"  # compiled on first use (re's cache)
_SPLIT = (
    "split the tasks between schedules of their own (each with its own `project` and its own "
    "crontab line or `work`), or remove the tasks no longer needed (docs/schedule-file.md#limits)"
)


def parse_bytes(path: Path, data: bytes, before: tuple[int, int] = (0, 0)) -> FileResult:
    """Validate a schedule file's bytes as if read from `path` (e.g. a revision's from git);
    `before`: the bytes and tables of the files before it, counted towards the limits."""
    result = FileResult(path=path, display=str(path))
    if before[0] + len(data) > MAX_SCHEDULE_BYTES:
        result.problems.append(_too_large(path, before[0], len(data)))
        return result
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        message = "file is not UTF-8 text; TOML files must be UTF-8 encoded"
        result.problems.append(_error(path, line, "toml-syntax", message))
        return result
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        where, message = syntax_error_line(str(exc))
    # tomllib recurses once per nesting level and calls int() on every integer literal; both
    # are limits of the parser, not syntax errors, so it reports no position.
    except RecursionError:
        where = _deep_line(text)
        message = f"arrays or inline tables are nested too deeply (more than {_DEEPEST} levels)"
    except ValueError:
        match = re.search(_LONG_INTEGER, text)
        where = text.count("\n", 0, match.start()) + 1 if match else None
        message = "an integer has more than 4,300 digits, more than any value cronctl accepts"
    else:
        tables = doc.get("task")
        result.tables = len(tables) if isinstance(tables, list) else 0
        if before[1] + result.tables > MAX_TASKS:
            result.problems.append(_too_many(path, before[1], result.tables))
            return result
        parse_document(doc, index_lines(text), result)
        return result
    message = f"TOML syntax: {message}; fix the file so it parses"
    result.problems.append(_error(path, where or 1, "toml-syntax", message))
    return result


def _error(path: Path, line: int | None, code: str, message: str) -> Problem:
    return Problem(str(path), line, None, "error", code, message)


def _deep_line(text: str) -> int | None:
    # Brackets inside strings or comments are counted too: this only points at a line.
    depth = 0
    for number, line in enumerate(text.splitlines(), start=1):
        for char in line:
            depth += char in "[{"
            depth -= char in "]}"
            if depth > _DEEPEST:
                return number
    return None


def _too_large(path: Path, before: int, read: int) -> Problem:
    limit = MAX_SCHEDULE_BYTES // 2**20
    # read_bytes stops one byte past the limit: a file cut there is larger still.
    size = f"over {limit} MiB" if read > MAX_SCHEDULE_BYTES else f"{read / 2**20:,.1f} MiB"
    together = f" (with the files before it, over {limit} MiB)" if before else ""
    message = (
        f"holds {size}{together}: the schedule files may hold at most {limit} MiB together "
        f"(and {MAX_TASKS:,} tasks), so cronctl does not read it; {_SPLIT}"
    )
    return _error(path, None, "schedule-too-large", message)


def _too_many(path: Path, before: int, tables: int) -> Problem:
    together = f" ({before + tables:,} with the files before it)" if before else ""
    message = (
        f"holds {tables:,} [[task]] tables{together}: the schedule files may hold at most "
        f"{MAX_TASKS:,} tasks together, so cronctl does not read them; {_SPLIT}"
    )
    return _error(path, None, "too-many-tasks", message)


def parse_files(paths: Sequence[Path], contents: Sequence[bytes]) -> list[FileResult]:
    """Each file's result; files after the one that passes a limit are not parsed."""
    results: list[FileResult] = []
    size = tables = 0
    for path, data in zip(paths, contents, strict=True):
        if size > MAX_SCHEDULE_BYTES or tables > MAX_TASKS:
            results.append(FileResult(path=path, display=str(path)))
            continue
        results.append(parse_bytes(path, data, (size, tables)))
        size += len(data)
        tables += results[-1].tables
    return results


def load_paths(paths: Sequence[Path]) -> Schedule:
    return build_schedule(parse_files(paths, [read_bytes(p) for p in paths]))


def parse_all(
    paths: Sequence[Path], contents: Sequence[bytes]
) -> tuple[Schedule, dict[tuple[str, str, str], Path]]:
    """The Schedule, and every path the text resolved to, for the cache to check again."""
    results = parse_files(paths, contents)
    resolved = {key: path for result in results for key, path in result.resolved.items()}
    return build_schedule(results), resolved


def load(
    files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    env: Mapping[str, str] | None = None,
) -> Schedule:
    """Load schedule files as the CLI would; raises ScheduleFileError only if none can be read."""
    if isinstance(files, str | os.PathLike):
        files = [files]
    given = None if files is None else [Path(f) for f in files]
    return load_paths(schedule_paths(given, os.environ if env is None else env))
