"""Shell completion of task names (`cronctl next <TAB>`), from the files --file names."""

from __future__ import annotations

from pathlib import Path

import typer

from cronctl.cli.wiring import load_schedule


def task_names(ctx: typer.Context, incomplete: str) -> list[str]:
    """The task names that start with `incomplete`; nothing (never an error) if unreadable."""
    files = ctx.params.get("file")
    try:
        schedule = load_schedule([Path(f) for f in files] if files else None)
    except Exception:
        return []
    return [t.name for t in schedule.tasks if t.name.startswith(incomplete)]
