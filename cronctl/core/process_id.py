"""Who a process is, for good, as the overlap locks record it: a pid names a process only
while it lives; ``(boot, pid, start time)`` names one for good (read by edge/process/procs.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ProcessId:
    """`boot` holds the pid namespace the pid is counted in too (procs.boot_id)."""

    pid: int
    start_ticks: int
    boot: str
