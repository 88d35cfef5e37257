"""Coordination (docs/guarantees.md, docs/fleets-postgresql.md): the port (port.py) and its
two adapters, files in ``lock_dir`` and a PostgreSQL store. Cheap to import: ``run`` imports
it on every start."""

from __future__ import annotations

from pathlib import Path

from cronctl.coord.files.adapter import FilesCoordinator
from cronctl.coord.port import Coordinator

__all__ = ["open_coordinator"]


def open_coordinator(
    url: str | None, lock_dir: Path, *, host: str, pid: int, project: str | None = None
) -> Coordinator:
    """PostgreSQL when ``url`` is set, else files in lock_dir (already the project's own;
    ``project`` keeps its rows apart in a store). Nothing connects here."""
    if not url:
        return FilesCoordinator(lock_dir, host=host, pid=pid)
    # Only when coordination is configured: it brings the PostgreSQL adapter (and, on first
    # use, its driver) to a run that needs it, and to no other.
    from cronctl.coord.postgres.adapter import PostgresCoordinator

    return PostgresCoordinator(url, host=host, pid=pid, project=project)
