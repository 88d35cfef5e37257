"""Results that ran but could not be saved in state.db, kept beside it until the next run.

When the final write of a run fails (disk full, the database locked past the busy timeout),
the run has happened and its outcome is known: `run` reports it once, then leaves it here as
``STATE_DIR/unsaved/RUN_ID.json``. The next `run` applies the file to the still-open row
instead of recovering that row as "cronctl died, outcome unknown", which would report the
same run a second time, and wrongly.

So that this works on a full disk too, the file's space is reserved before the command starts
(``posix_fallocate``) and filled in place; it is removed when the result is saved normally. A
crash leaves it all zeros, which reads as "nothing kept": recovery then reports the run as
usual and removes it.
"""

from __future__ import annotations

import json
import os
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Final

from cronctl.edge.paths import ensure_private_dir, open_nofollow, write_atomic

DIR_NAME: Final = "unsaved"
#: Bytes reserved per run: the result with a 4 KiB tail, even all 4-byte UTF-8, fits.
RESERVE: Final = 32 * 1024
_TIMES: Final = ("started", "ended")


def _path(state_dir: Path, run_id: str) -> Path:
    return state_dir / DIR_NAME / f"{run_id}.json"


def reserve(state_dir: Path, run_id: str) -> bool:
    """Reserve the space of ``run_id``'s result before it runs; False if that failed."""
    try:
        ensure_private_dir(state_dir / DIR_NAME, within=state_dir)
        fd = open_nofollow(_path(state_dir, run_id), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except OSError:  # UnsafeDirectoryError is one too
        return False
    try:
        os.posix_fallocate(fd, 0, RESERVE)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def keep(state_dir: Path, run_id: str, fields: dict[str, object]) -> str | None:
    """Write the result of ``run_id``; return None, or why it could not be written either."""
    values = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in fields.items()}
    data = json.dumps(values, ensure_ascii=False).encode()
    path = _path(state_dir, run_id)
    try:
        fd = open_nofollow(path, os.O_WRONLY)
    except FileNotFoundError:
        fd = -1
    except OSError as exc:
        return str(exc)
    try:
        if fd >= 0 and len(data) <= RESERVE:
            os.pwrite(fd, data, 0)  # inside the reserved space: no block to allocate
            os.fsync(fd)
        else:
            write_atomic(path, data)
    except OSError as exc:
        return str(exc)
    finally:
        if fd >= 0:
            os.close(fd)
    return None


def take(state_dir: Path, run_id: str) -> dict[str, object] | None:
    """The kept result of ``run_id`` (None if there is none, only a reservation, or junk)."""
    try:
        fd = open_nofollow(_path(state_dir, run_id), os.O_RDONLY)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        raw = file.read(RESERVE + (1 << 20)).rstrip(b"\0")
    try:
        data = json.loads(raw) if raw else None
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
    """Remove the kept result (or the reservation) once the database has the outcome."""
    with suppress(OSError):
        _path(state_dir, run_id).unlink()
