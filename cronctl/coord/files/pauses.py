"""Operator pauses as files in ``LOCK_DIR/paused`` (layout.py): a task is paused while its
marker exists; the record inside says why, since when and who set it from where."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from cronctl.coord.files import layout
from cronctl.coord.port import PauseInfo
from cronctl.edge.safefiles import ensure_private_dir, fsync_dir, write_atomic


def set_pause(
    lock_dir: Path, task: str, *, reason: str | None, now: datetime, host: str, user: str
) -> None:
    directory = ensure_private_dir(lock_dir / "paused", within=lock_dir)
    path = layout.task_path(directory, task, ".pause")
    record = {"reason": reason, "since": layout.iso(now), "host": host, "user": user}
    write_atomic(path, layout.dumps(record), layout.file_mode(directory), durable=True)


def clear_pause(lock_dir: Path, task: str) -> bool:
    path = layout.task_path(lock_dir / "paused", task, ".pause")
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    fsync_dir(path.parent)
    return True


def paused_tasks(lock_dir: Path) -> dict[str, PauseInfo]:
    paused: dict[str, PauseInfo] = {}
    for entry in layout.entries(lock_dir / "paused"):
        stem, dot, suffix = entry.name.rpartition(".")
        task = layout.task_from_stem(stem) if dot and suffix == "pause" else None
        if task is None:
            continue
        # The marker's presence is the pause; a damaged record still pauses, saying nothing.
        record = layout.read_record(Path(entry.path)) or {}
        reason, host, user = record.get("reason"), record.get("host"), record.get("user")
        paused[task] = PauseInfo(
            reason if isinstance(reason, str) else None,
            layout.parse_time(record.get("since")),
            host if isinstance(host, str) else None,
            user if isinstance(user, str) else None,
        )
    return paused
