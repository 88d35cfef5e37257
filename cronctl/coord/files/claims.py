"""Occurrence claims as ``O_EXCL`` files in ``LOCK_DIR/claims`` (layout.py), one per (task,
occurrence), and a leased claim's start mark beside it (docs/guarantees.md)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from contextlib import suppress
from datetime import datetime, timedelta
from pathlib import Path

from cronctl.coord.files import layout
from cronctl.core.due import CLAIM_SWEEP_AGE
from cronctl.core.process_id import ProcessId
from cronctl.edge.process import procs
from cronctl.edge.safefiles import ensure_private_dir, fsync_dir

_CLAIM_STAMP = "%Y%m%dT%H%MZ"
_CLAIM_STAMP_SECONDS = "%Y%m%dT%H%M%SZ"
# A claim's stamp: the occurrence's minute, with seconds for the 2nd, 3rd... after a DST gap.
_STAMP_SHAPE = r"[0-9]{8}T[0-9]{4}(?:[0-9]{2})?Z"


def _claim_stamp(occurrence: datetime) -> str:
    moment = layout.utc(occurrence)
    if moment.microsecond:
        raise ValueError(f"occurrence {moment.isoformat()} is not on a whole second")
    return moment.strftime(_CLAIM_STAMP_SECONDS if moment.second else _CLAIM_STAMP)


def claim_occurrence(
    lock_dir: Path,
    task: str,
    occurrence: datetime,
    *,
    host: str,
    pid: int,
    now: datetime,
    leased: bool = False,
) -> bool:
    """Claim one occurrence of ``task`` for this machine; False if someone already has.
    Keyed by the occurrence (not this machine's clock), created ``O_EXCL|O_NOFOLLOW`` so one
    contender wins (anything at the name, even a symlink, is taken), fsynced, never released
    (swept after a week). A ``leased`` claim names its cronctl (pid start time, boot) and is
    taken over when that cronctl is provably gone before :func:`mark_started`."""
    directory = ensure_private_dir(lock_dir / "claims", within=lock_dir)
    path = layout.task_path(directory, task, "@" + _claim_stamp(occurrence))
    record: dict[str, object] = {"host": host, "pid": pid, "claimed": layout.iso(now),
                                 "occurrence": layout.iso(occurrence)}  # fmt: skip
    if leased:
        me = procs.identify(pid)
        record.update(state="leased", boot=procs.boot_id(), pid_start=me and me.start_ticks)
    if not _write_new(path, record, layout.file_mode(directory)):
        return _take_over(path, host, pid)
    fsync_dir(directory)
    return True


def _write_new(path: Path, record: Mapping[str, object], mode: int) -> bool:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, mode)
    except FileExistsError:
        return False
    try:
        try:
            os.write(fd, layout.dumps(record))
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        # A claim we cannot record is given back so that another machine may still run it.
        with suppress(OSError):
            path.unlink()
        raise
    return True


#: The mark of a leased claim's run started (or taken over): ``claims/TASK@STAMP.start``.
_STARTED = ".start"


def _take_over(path: Path, host: str, pid: int) -> bool:
    """Whether the leased claim at ``path`` is now ours: its cronctl provably gone (only this
    host's, of this boot, can be) and its run never marked started; the start mark decides."""
    record = layout.read_record(path)
    if record is None or record.get("state") != "leased" or record.get("host") != host:
        return False
    holder_pid, start, boot = record.get("pid"), record.get("pid_start"), record.get("boot")
    if not (isinstance(holder_pid, int) and isinstance(start, int) and isinstance(boot, str)):
        return False
    if boot != procs.boot_id() or procs.same_process_alive(ProcessId(holder_pid, start, boot)):
        return False
    return _start_mark(path, host, pid)


def _start_mark(path: Path, host: str, pid: int) -> bool:
    """Make (O_EXCL) or find the start mark of the claim at ``path``: whether it names us."""
    mark = path.with_name(path.name + _STARTED)
    if _write_new(mark, {"host": host, "pid": pid}, layout.file_mode(path.parent)):
        fsync_dir(path.parent)
        return True
    record = layout.read_record(mark)
    return record is not None and record.get("host") == host and record.get("pid") == pid


def mark_started(lock_dir: Path, task: str, occurrence: datetime, *, host: str, pid: int) -> bool:
    """Mark a leased claim's run started, before it starts: False when another machine took
    the claim over (this cronctl was taken for gone), and the run must not start."""
    directory = ensure_private_dir(lock_dir / "claims", within=lock_dir)
    return _start_mark(layout.task_path(directory, task, "@" + _claim_stamp(occurrence)), host, pid)


def claim_exists(lock_dir: Path, task: str, occurrence: datetime) -> bool:
    path = layout.task_path(lock_dir / "claims", task, "@" + _claim_stamp(occurrence))
    return os.path.lexists(path)


def sweep_claims(lock_dir: Path, *, now: datetime, max_age: timedelta = CLAIM_SWEEP_AGE) -> int:
    """Delete claims whose occurrence (in the name: an mtime a copy or another clock could
    distort) is older than ``max_age``, which no catch-up reaches (``due.CLAIM_REACH``);
    return how many went. A claim that cannot be removed is left alone."""
    # Stamps are fixed-width digits, so text order is time order: an hourly sweep of a week
    # of every-minute claims (10,080 files) compares strings instead of parsing each date.
    cutoff = (layout.utc(now) - max_age).strftime(_CLAIM_STAMP)
    removed = 0
    for entry in layout.entries(lock_dir / "claims"):
        stem, at, stamp = entry.name.removesuffix(_STARTED).rpartition("@")
        # Compared by minute: 01:00:01 (a second occurrence after a DST gap) is as old as 01:00.
        if not at or f"{stamp[:13]}Z" >= cutoff or not re.fullmatch(_STAMP_SHAPE, stamp):
            continue
        if layout.task_from_stem(stem) is not None:
            with suppress(OSError):
                Path(entry.path).unlink()
                removed += 1
    return removed
