"""Results that could not be saved in state.db (disk full, locked), kept in
``STATE_DIR/unsaved/`` for the next run to apply, rather than recovered as "outcome unknown".
For a full disk, space is reserved before the commands start: one ``PID-NONCE.slots`` file a
run (a file an occurrence would make every worker wait on the directory's lock),
``posix_fallocate``d with a :data:`RESERVE` slot per occurrence; a crash leaves zeros, read
as nothing kept. A result with no slot is written as ``RUN_ID.json``, as older cronctl did."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Final

from cronctl.edge.process import procs
from cronctl.edge.safefiles import ensure_private_dir, open_nofollow, verify_dir, write_atomic

DIR_NAME: Final = "unsaved"
# Bytes reserved per run: the result with a 4 KiB tail, even all 4-byte UTF-8, fits.
RESERVE: Final = 32 * 1024
_SUFFIX: Final = ".slots"
# Slot files of this process still in use (a `work` tick's run may outlive the next tick).
_LIVE: set[str] = set()
_LIVE_LOCK = threading.Lock()


def _path(state_dir: Path, run_id: str) -> Path:
    return state_dir / DIR_NAME / f"{run_id}.json"


def _encode(fields: dict[str, object], run_id: str | None = None) -> bytes:
    # json here and in _decode only: a `run` never imports it otherwise (tests/cli/test_main.py).
    import json

    values = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in fields.items()}
    record: dict[str, object] = values if run_id is None else {"id": run_id, "result": values}
    return json.dumps(record, ensure_ascii=False).encode()


def _decode(raw: bytes) -> dict[str, object] | None:
    import json  # see _encode

    raw = raw.rstrip(b"\0")
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        return None
    return _with_times(data) if isinstance(data, dict) else None


def _with_times(result: dict[str, object]) -> dict[str, object]:
    for name in ("started", "ended"):
        value = result.get(name)
        if isinstance(value, str):
            with suppress(ValueError):
                result[name] = datetime.fromisoformat(value)
    return result


class Reservation:
    def __init__(self, state_dir: Path, run_ids: Iterable[str]) -> None:
        """:raises OSError: the space could not be reserved (UnsafeDirectoryError too)."""
        self._state_dir = state_dir
        self._index = {run_id: i for i, run_id in enumerate(run_ids)}
        directory = ensure_private_dir(state_dir / DIR_NAME, within=state_dir)
        self.path = directory / f"{os.getpid()}-{os.urandom(4).hex()}{_SUFFIX}"
        with _LIVE_LOCK:
            _LIVE.add(self.path.name)
        self._fd: int | None = None
        self._kept = False
        try:
            self._fd = open_nofollow(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL)
            os.posix_fallocate(self._fd, 0, RESERVE * max(1, len(self._index)))
        except BaseException:
            self.close()
            raise

    def keep(self, run_id: str, fields: dict[str, object]) -> str | None:
        """Write ``run_id``'s result (in its slot if any); None, or why it could not be."""
        slot = self._index.get(run_id)
        data = _encode(fields, run_id)
        if slot is None or self._fd is None or len(data) > RESERVE:
            return keep(self._state_dir, run_id, fields)
        try:
            os.pwrite(self._fd, data, slot * RESERVE)  # inside the reserved space
            os.fsync(self._fd)
        except OSError as exc:
            return str(exc)
        self._kept = True
        return None

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        if not self._kept:
            with suppress(OSError):
                self.path.unlink()
        with _LIVE_LOCK:
            _LIVE.discard(self.path.name)


def reserve(state_dir: Path, run_ids: Iterable[str]) -> Reservation | None:
    try:
        return Reservation(state_dir, run_ids)
    except OSError:
        return None


def keep(state_dir: Path, run_id: str, fields: dict[str, object]) -> str | None:
    """Write ``run_id``'s result as ``RUN_ID.json``; None, or why it could not be."""
    try:
        write_atomic(_path(state_dir, run_id), _encode(fields))
    except OSError as exc:
        return str(exc)
    return None


class Kept:
    """What earlier runs whose owner is gone kept: read once by recovery, applied, removed."""

    def __init__(self, state_dir: Path) -> None:
        self._state_dir = state_dir
        self._results: dict[str, dict[str, object]] = {}
        self._spent: list[Path] = []
        directory = state_dir / DIR_NAME
        if not verify_dir(directory, within=state_dir):  # a planted link is refused here
            return
        with os.scandir(directory) as entries:
            names = [e.name for e in entries if e.name.endswith(_SUFFIX)]
        self._spent = [directory / name for name in names if _owner_gone(name)]
        for path in self._spent:
            self._results.update(_read_slots(path))

    def take(self, run_id: str) -> dict[str, object] | None:
        if run_id in self._results:
            return self._results[run_id]
        try:
            fd = open_nofollow(_path(self._state_dir, run_id), os.O_RDONLY)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as file:
            return _decode(file.read(RESERVE + (1 << 20)))

    def done(self) -> None:
        for path in self._spent:
            with suppress(OSError):
                path.unlink()


def _owner_gone(name: str) -> bool:
    pid_text = name.partition("-")[0]
    if not pid_text.isdigit():
        return False  # not a name cronctl makes: leave it alone
    pid = int(pid_text)
    if pid == os.getpid():
        with _LIVE_LOCK:
            return name not in _LIVE
    # Linux pids stop at 2**22 (PID_MAX_LIMIT): a larger one is not ours, and os.kill overflows.
    return pid <= 2**22 and not procs.alive(pid)


def _read_slots(path: Path) -> dict[str, dict[str, object]]:
    found: dict[str, dict[str, object]] = {}
    with suppress(OSError):
        fd = open_nofollow(path, os.O_RDONLY)
        try:
            for offset in range(0, os.fstat(fd).st_size, RESERVE):
                if os.pread(fd, 1, offset) in (b"", b"\0"):
                    continue
                record = _decode(os.pread(fd, RESERVE, offset))
                result = record.get("result") if record else None
                if record and isinstance(record.get("id"), str) and isinstance(result, dict):
                    found[str(record["id"])] = _with_times(result)
        finally:
            os.close(fd)
    return found


def forget(state_dir: Path, run_id: str) -> None:
    with suppress(OSError):
        _path(state_dir, run_id).unlink()
