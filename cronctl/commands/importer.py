"""`cronctl import`: a crontab's text -> a schedule file's text and a report (no I/O). The
TOML is read back through cronctl's own loader: what the import writes, `check` accepts."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from cronctl.core.assemble import build_schedule
from cronctl.core.crontab import CrontabImport, parse_crontab
from cronctl.core.schema import FileResult, parse_document
from cronctl.core.tomllines import index_lines


@dataclass(frozen=True, slots=True)
class ImportResult:
    """The schedule file's text, the report as `CRONTAB:LINE: message` lines, the exit status."""

    toml: str
    report: tuple[str, ...]
    tasks: int
    left_out: int

    @property
    def exit_status(self) -> int:
        return 1 if self.left_out else 0


def import_crontab(
    text: str,
    *,
    system: bool,
    source_name: str,
    run_as: str = "root",
    skip_other_users: bool = False,
) -> ImportResult:
    """Convert a crontab named `source_name`, for cronctl running as `run_as` (a system
    line for another user: core/crontab.py)."""
    converted = parse_crontab(text, system=system, run_as=run_as, skip_other_users=skip_other_users)
    parts = {"defaults": converted.defaults, "task": list(converted.tasks)}
    body = tomli_w.dumps({key: value for key, value in parts.items() if value})
    header = _header(converted, run_as if system else None, _printable(source_name))
    toml = header + ("\n" + body if body else "")
    _verify(toml)
    report = tuple(f"{_where(source_name, r.line)}: {r.message}" for r in converted.report)
    return ImportResult(toml, report, len(converted.tasks), converted.left_out)


def _header(converted: CrontabImport, run_as: str | None, source: str) -> str:
    system = run_as is not None
    lines = [
        f"Imported by `cronctl import{' --system' if system else ''}` from {source}.",
        "Review it, then validate it with `cronctl check -f FILE`.",
        "Each task's description holds its original crontab line.",
    ]
    tasks, defaults = converted.tasks, converted.defaults
    if "timezone" not in defaults and any("timezone" not in t for t in tasks):
        lines += [
            "cron read the times in the machine's local time zone; cronctl reads them in UTC",
            "unless a task or [defaults] sets timezone: set it if the machine's zone is not UTC.",
        ]
    if "workdir" not in defaults and any("workdir" not in t for t in tasks):
        lines += [
            "cron started commands in the user's home directory; cronctl starts them in",
            "workdir, which is this file's directory unless a task or [defaults] sets it.",
        ]
    if system and tasks:
        lines += [
            "cron ran each line as the user in its user field; this file is for cronctl",
            f"running as {_printable(str(run_as))}: a line for another user runs its command",
            "through `runuser -u USER --` or is left out (see the report; the user is in",
            "each description).",
        ]
    return "".join(f"# {line}\n" for line in lines)


def _verify(toml: str) -> None:
    """Read the produced text back through cronctl's loader; any error is a bug here."""
    result = FileResult(path=Path("imported.toml"), display="imported.toml")
    parse_document(tomllib.loads(toml), index_lines(toml), result)
    errors = build_schedule([result]).errors
    if errors:
        raise RuntimeError(
            "cronctl import produced a schedule file that cronctl rejects: "
            + "; ".join(p.describe() for p in errors)
        )


def _where(source: str, line: int | None) -> str:
    return source if line is None else f"{source}:{line}"


def _printable(text: str) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in text)
