"""Chain ends as ``LOCK_DIR/ends/TASK@YYYYMMDDTHHMM[SS]Z~HOST.end`` (docs/chains.md), HOST
16 hex digits of the host name's SHA-256. Renamed into place, read ``O_NOFOLLOW`` and checked
field by field: any machine sharing the directory writes them."""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet
from contextlib import suppress
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

from cronctl.coord.files import layout
from cronctl.coord.files.claims import _claim_stamp
from cronctl.coord.port import ChainEnd
from cronctl.core.minutes import minute_floor
from cronctl.core.runs import FINISHED
from cronctl.edge.safefiles import ensure_private_dir, write_atomic

_DIR = "ends"
_SUFFIX = ".end"
_NAME = re.compile(r"(?P<stem>.+)@(?P<stamp>[0-9]{8}T[0-9]{4}(?:[0-9]{2})?Z)~[0-9a-f]{16}\.end")
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
_HOST_MAX = 1024


def _host_key(host: str) -> str:
    # Here: hashlib loads OpenSSL, which only chains need, and every `run` imports this module.
    import hashlib

    return hashlib.sha256(host.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def record_end(lock_dir: Path, end: ChainEnd) -> None:
    directory = ensure_private_dir(lock_dir / _DIR, within=lock_dir)
    stem = f"{layout.file_stem(end.task)}@{_claim_stamp(end.occurrence)}"
    name = f"{stem}~{_host_key(end.host)}{_SUFFIX}"
    record = asdict(end) | {
        "occurrence": layout.iso(end.occurrence),
        "ended": end.ended.isoformat(),
    }
    write_atomic(directory / name, layout.dumps(record), layout.file_mode(directory), durable=True)


def chain_ends(lock_dir: Path, tasks: AbstractSet[str], since: datetime) -> list[ChainEnd]:
    """The ends of ``tasks`` whose occurrence is at or after ``since``, oldest first."""
    floor = _minute_stamp(since)
    found: list[ChainEnd] = []
    for entry in layout.entries(lock_dir / _DIR):
        match = _NAME.fullmatch(entry.name)
        if match is None or match["stamp"][:13] < floor:
            continue
        task = layout.task_from_stem(match["stem"])
        if task is None or task not in tasks:
            continue
        end = _end_from(layout.read_record(entry.path), task)
        if end is not None and end.occurrence >= since:
            found.append(end)
    return sorted(found, key=lambda e: (e.occurrence, e.ended, e.task, e.host))


def _minute_stamp(moment: datetime) -> str:
    # A file name's stamp compares to it as text.
    return _claim_stamp(minute_floor(moment))[:13]


def _end_from(record: dict[str, object] | None, task: str) -> ChainEnd | None:
    if record is None or record.get("task") != task:
        return None
    occurrence = layout.parse_time(record.get("occurrence"))
    ended = layout.parse_time(record.get("ended"))
    outcome, run_id, host = record.get("outcome"), record.get("run_id"), record.get("host")
    if occurrence is None or ended is None:
        return None
    if outcome not in FINISHED or not isinstance(outcome, str):
        return None
    if not (isinstance(run_id, str) and _RUN_ID.fullmatch(run_id)):
        return None
    if not (isinstance(host, str) and 0 < len(host) <= _HOST_MAX):
        return None
    return ChainEnd(task, occurrence, outcome, run_id, host, ended)


def sweep_ends(lock_dir: Path, before: datetime) -> None:
    cutoff = _minute_stamp(before)
    for entry in layout.entries(lock_dir / _DIR):
        match = _NAME.fullmatch(entry.name)
        if match is not None and match["stamp"][:13] < cutoff:
            with suppress(OSError):
                Path(entry.path).unlink()
