"""The coordination port: claims, overlap locks, pauses and the optional fleet history
(docs/guarantees.md, docs/fleets-postgresql.md).

One port, two adapters, chosen once from the settings by :func:`open_coordinator`:

- :mod:`cronctl.coord.files.adapter` — files in ``lock_dir`` (a thin wrapper over the modules
  beside it); machines coordinate only when they share the directory; no fleet history;
- :mod:`cronctl.coord.postgres.adapter` — a PostgreSQL schema ``cronctl``; imported, with its
  driver, only when ``coordination`` is configured.

The use cases never ask which one they have. This module stays cheap to import: ``run``
imports it on every start.
"""

from __future__ import annotations

from pathlib import Path

from cronctl.coord.files.adapter import FilesCoordinator
from cronctl.coord.port import Coordinator

__all__ = ["open_coordinator"]


def open_coordinator(
    url: str | None, lock_dir: Path, *, host: str, pid: int, project: str | None = None
) -> Coordinator:
    """The backend the settings chose: PostgreSQL when ``url`` is set, else files in lock_dir;
    ``host`` and ``pid`` name this run in the claims, locks and pauses it takes. ``project``
    (``[cronctl] project``) keeps the project's rows apart in the store; lock_dir is already
    the project's own (edge/dirs.py), so files need nothing more.

    Nothing connects here; the PostgreSQL adapter connects on first use (once per run).
    """
    if not url:
        return FilesCoordinator(lock_dir, host=host, pid=pid)
    # Only when coordination is configured: it brings the PostgreSQL adapter (and, on first
    # use, its driver) to a run that needs it, and to no other.
    from cronctl.coord.postgres.adapter import PostgresCoordinator

    return PostgresCoordinator(url, host=host, pid=pid, project=project)
