"""Results that ran but could not be saved in state.db, kept beside it until the next run.

When the final write of a run fails (disk full, the database locked past the busy timeout),
the run has happened and its outcome is known: `run` reports it once, then leaves it here as
``STATE_DIR/unsaved/RUN_ID.json``. The next `run` applies the file to the still-open row
instead of recovering that row as "cronctl died, outcome unknown", which would report the
same run a second time, and wrongly.
"""

from __future__ import annotations

import json
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Final

from cronctl.edge.paths import ensure_private_dir, open_nofollow, write_atomic

DIR_NAME: Final = "unsaved"
_TIMES: Final = ("started", "ended")


def keep(state_dir: Path, run_id: str, fields: dict[str, object]) -> str | None:
    """Write the result of ``run_id``; return None, or why it could not be written either."""
    data = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in fields.items()}
    try:
        directory = ensure_private_dir(state_dir / DIR_NAME)
        write_atomic(directory / f"{run_id}.json", json.dumps(data).encode())
    except OSError as exc:  # UnsafeDirectoryError is one too
        return str(exc)
    return None


def take(state_dir: Path, run_id: str) -> dict[str, object] | None:
    """The kept result of ``run_id`` (None if there is none or it is unreadable)."""
    import os

    path = state_dir / DIR_NAME / f"{run_id}.json"
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        raw = file.read(1 << 20)
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    for name in _TIMES:
        if isinstance(data.get(name), str):
            with suppress(ValueError):
                data[name] = datetime.fromisoformat(data[name])
    return data


def forget(state_dir: Path, run_id: str) -> None:
    """Remove the kept result once it is in the database."""
    with suppress(OSError):
        (state_dir / DIR_NAME / f"{run_id}.json").unlink()
