"""`cronctl explain NAME [--at T]`: why a task did (or did not) run at a time."""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from cronctl.cli.options import NameArg, shared
from cronctl.cli.render.tables import pause_json
from cronctl.cli.wiring import Where, fail_on_errors, host_name, load_schedule, parse_instant
from cronctl.commands.explain import Explanation, explain_here
from cronctl.coord.port import PauseInfo
from cronctl.core.model import format_utc
from cronctl.core.runs import RunRow
from cronctl.errors import UsageError


@shared("file", "state_dir", "lock_dir", "host", "coordination")
def explain_(
    name: NameArg,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            metavar="TIME",
            help="The instant to explain (ISO 8601 with offset or Z). Default: now.",
        ),
    ] = None,
    output: Annotated[
        str, typer.Option("--format", metavar="text|json", help="Output format.")
    ] = "text",
    as_json: Annotated[bool, typer.Option("--json", help="The same as --format json.")] = False,
    *,
    where: Where,
) -> None:
    """Whether NAME was (or will be) due at --at, and why it ran or did not.

    Reads the schedule, this machine's history and the pauses; changes nothing.

    \b
    Example:
      cronctl explain backup --at 2026-12-03T02:00:00Z
    """
    if output not in ("text", "json"):
        raise UsageError(f"--format {output!r}: give text or json")
    schedule = fail_on_errors(load_schedule(where.file))
    instant = parse_instant(at, "--at")
    states, locks = where.dirs(schedule)
    me = host_name(where.host)
    coord = where.coordinator(schedule, locks, reads_only=True)
    try:
        result = explain_here(
            schedule, states, coord, name, instant, host=me, now=datetime.now(UTC)
        )
    finally:
        coord.close()
    print(json.dumps(as_dict(result), indent=2) if as_json or output == "json" else render(result))


def render(result: Explanation) -> str:
    """The explanation as text: a headline, then one line per reason."""
    head = f"{result.task}: {result.verdict.replace('-', ' ')}"
    if not result.due and result.fate != result.verdict:
        head += f" (previous occurrence: {result.fate.replace('-', ' ')})"
    return "\n".join([head, *(f"  - {line}" for line in result.reasons)])


def _plain(value: object) -> object:
    """A value of an explanation in JSON: times in UTC, runs and the pause as objects."""
    if isinstance(value, datetime):
        return format_utc(value)
    if isinstance(value, RunRow):
        said = [f.name for f in fields(value) if f.name not in ("task", "pid", "tail", "upstream")]
        return {name: _plain(getattr(value, name)) for name in said}
    if isinstance(value, PauseInfo):
        return pause_json(value)
    return [_plain(item) for item in value] if isinstance(value, tuple) else value


def as_dict(result: Explanation) -> dict[str, Any]:
    """The JSON shape documented in docs/commands.md (`cronctl explain`)."""
    return {f.name: _plain(getattr(result, f.name)) for f in fields(result)}
