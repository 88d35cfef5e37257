"""Who a process is, for good: the value the overlap locks record for a task's command.

A pid alone names a process only while it lives; ``(boot, pid, start time)`` names one for
good. Reading it from ``/proc`` is the edge's job (edge/process/procs.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ProcessId:
    """One process for good: its pid, its start time in ticks since boot, and the boot (with
    the pid namespace the pid is counted in, see :func:`cronctl.edge.process.procs.boot_id`)."""

    pid: int
    start_ticks: int
    boot: str
