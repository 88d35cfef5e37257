"""What the export targets share: the per-task result and the limits every target has."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cronctl.core.analysis import task_warnings
from cronctl.core.envkeys import DEFAULT_MAX_OUTPUT
from cronctl.core.model import Task
from cronctl.core.values import control_char


@dataclass
class Exported:
    """One task's files for a target, and what the target could not express."""

    task: str
    files: dict[str, str] = field(default_factory=dict)  # file name -> text
    lost: list[str] = field(default_factory=list)  # "what: why", in words a reviewer acts on

    @property
    def skipped(self) -> bool:
        return not self.files


def whole_hour_zone(task: Task) -> str | None:
    """The zone as an IANA name both targets accept: UTC, a tz name, or Etc/GMT±N; else None."""
    if not task.zone.fixed or task.zone.name == "UTC":
        return task.zone.name
    offset = task.zone.tz.utcoffset(None)
    assert offset is not None
    if offset % timedelta(hours=1):
        return None
    hours = int(offset / timedelta(hours=1))
    # The Etc/ zones' signs are POSIX's, the inverse of ISO 8601's: +05:00 is Etc/GMT-5.
    return "UTC" if hours == 0 else f"Etc/GMT{-hours:+d}"


def common_limits(task: Task, now: datetime) -> list[str]:
    """What no export target has: hosts, pings, hooks, notify, secrets, caps, and the DST
    rule of the next 12 months. Secrets from files are never exported (an export must not
    carry a value): their paths are named."""
    keys = ("hosts", "ping_url", "on_failure", "on_success")
    lost = [
        f"{key}: not exported; the target has no such setting" for key in keys if getattr(task, key)
    ]
    if task.notify != "always":  # the default is every failure: no loss
        lost.append("notify: not exported; the target has no such setting")
    advice = "give the job these variables from the target's own secrets (a Kubernetes "
    advice += "Secret, a systemd credential)"
    if task.env_files:
        lost.append(f"env_files ({', '.join(task.env_files)}): not exported; {advice}")
    if task.env_from_file:
        lost.append(f"env_from_file ({', '.join(task.env_from_file)}): not exported; {advice}")
    if task.max_output not in (None, 0, DEFAULT_MAX_OUTPUT):
        lost.append("max_output: not exported; the target keeps output its own way (journald)")
    if caps := [k for k in ("memory_max", "cpu_max", "nice", "ionice") if getattr(task, k)]:
        lost.append(
            f"{', '.join(caps)}: not exported; set the target's own (systemd MemoryMax=, "
            "CPUQuota=, Nice=, IOSchedulingClass=; Kubernetes resources.limits)"
        )
    return lost + [
        f"DST rule ({w.code}): {w.message}; the target applies its own rule on that day"
        for w in task_warnings(task, now)
        if w.code in ("dst-gap", "dst-overlap")
    ]


def one_line(text: str) -> str:
    """`text` with every control character written as a visible escape (\\n, \\x1b, \\u2028):
    an exported file gains no line from it and a reader's terminal no escape."""
    if control_char(text) is None:
        return text
    return "".join(ascii(c)[1:-1] if control_char(c) else c for c in text)
