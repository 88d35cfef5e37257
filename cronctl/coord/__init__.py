"""Coordination (docs/guarantees.md, docs/fleets-postgresql.md): the port and its adapters.
Cheap to import: ``run`` imports it on every start."""

from __future__ import annotations

from pathlib import Path

from cronctl.coord.files.adapter import FilesCoordinator
from cronctl.coord.port import Coordinator

__all__ = ["open_coordinator"]


def open_coordinator(
    url: str | None,
    lock_dir: Path,
    *,
    host: str,
    pid: int,
    project: str | None = None,
    reads_only: bool = False,
) -> Coordinator:
    """PostgreSQL when ``url`` is set (``project`` keeps its rows apart; ``reads_only``: its
    reads create and migrate no schema), else files in lock_dir (the project's own already).
    Nothing connects here."""
    if not url:
        return FilesCoordinator(lock_dir, host=host, pid=pid)
    # Only here: the adapter (and, on first use, its driver) only for a run that needs it.
    from cronctl.coord.postgres.adapter import PostgresCoordinator

    return PostgresCoordinator(url, host=host, pid=pid, project=project, reads_only=reads_only)
