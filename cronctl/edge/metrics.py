"""`[cronctl] metrics_file`: the Prometheus text format for node_exporter's textfile collector
(docs/operating.md), rewritten atomically after every `run` and `work` tick. By hand, not
with prometheus-client, whose import every `run` would pay (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TypeAlias

from cronctl.core.model import Schedule, Task
from cronctl.core.runs import HISTORY_RETENTION, UNFINISHED, RunRow
from cronctl.edge.dirwarnings import daily_notice
from cronctl.edge.safefiles import check_file_path, write_atomic
from cronctl.edge.state.store import Store
from cronctl.errors import UnsafeDirectoryError

HELP = {
    "cronctl_last_run_timestamp_seconds": ("gauge", "Start of the task's last run (Unix time)."),
    "cronctl_last_success_timestamp_seconds": ("gauge", "Start of the task's last ok run."),
    "cronctl_last_duration_seconds": ("gauge", "How long the task's last run took."),
    "cronctl_last_exit_code": (
        "gauge",
        "Exit code of the task's last run (-1: killed by a signal or could not start).",
    ),
    "cronctl_consecutive_failures": ("gauge", "Failed runs since the task's last ok run."),
    "cronctl_next_run_timestamp_seconds": ("gauge", "The task's next occurrence (Unix time)."),
    "cronctl_runs_total": (
        "counter",
        f"Runs in this machine's history ({HISTORY_RETENTION.days} days), by outcome.",
    ),
    "cronctl_missed_total": ("counter", "Occurrences dropped by the misfire policy."),
}
# (name: a key of HELP, labels, value); a plain tuple: `run` makes no class for it at import.
Sample: TypeAlias = tuple[str, tuple[tuple[str, str], ...], float]


def write_metrics(
    schedule: Schedule, store: Store, now: datetime, state_dir: Path, warn: Callable[[str], None]
) -> None:
    """Write the metrics file; a failure is a warning (once a day), never a failed run."""
    path = schedule.settings.metrics_file
    assert path is not None
    try:
        check_file_path(path)
        # 0644 (umask permitting): node_exporter runs as another user. Not fsynced: the file
        # is rewritten every minute, and a crash leaves the old one whole.
        write_atomic(path, render(schedule, store, now).encode(), 0o644, durable=False)
    except UnsafeDirectoryError as exc:
        # Every time, not once a day: someone may be steering the file right now.
        warn(f"cronctl: warning: metrics_file not written: {exc}")
    except OSError as exc:
        if daily_notice(state_dir, "metrics-file"):
            warn(
                f"cronctl: warning: cannot write metrics_file {path}: {exc.strerror or exc} "
                "(the directory must exist and be writable by this user; repeated once a day)"
            )


def samples(schedule: Schedule, store: Store, now: datetime) -> list[Sample]:
    found: list[Sample] = []
    counts = store.outcome_counts()
    states = store.states()
    for task in schedule.tasks:
        label = (("task", task.name),)
        found += [(n, label, v) for n, v in _task_values(task, store, now).items() if v is not None]
        for outcome, count in sorted(counts.get(task.name, {}).items()):
            if outcome not in UNFINISHED:
                found.append(("cronctl_runs_total", (*label, ("outcome", outcome)), count))
        state = states.get(task.name)
        found.append(("cronctl_missed_total", label, state.missed_total if state else 0))
    return found


def render(schedule: Schedule, store: Store, now: datetime) -> str:
    lines_of: dict[str, list[str]] = {name: [] for name in HELP}
    for name, labels, value in samples(schedule, store, now):
        text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
        lines_of[name].append(f"{name}{{{text}}} {_number(value)}")
    lines: list[str] = []
    for name, (kind, text) in HELP.items():
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}", *lines_of[name]]
    return "\n".join(lines) + "\n"


def _task_values(task: Task, store: Store, now: datetime) -> dict[str, float | None]:
    last = store.last_ended(task.name)
    ok = store.last_ok(task.name)
    following = task.next_run(now)
    exit_code = None if last is None else -1 if last.exit_code is None else last.exit_code
    return {
        "cronctl_last_run_timestamp_seconds": _started(last),
        "cronctl_last_success_timestamp_seconds": _started(ok),
        "cronctl_last_duration_seconds": last.duration_s if last else None,
        "cronctl_last_exit_code": exit_code,
        "cronctl_consecutive_failures": store.consecutive_failures(task.name),
        "cronctl_next_run_timestamp_seconds": following.timestamp() if following else None,
    }


def _started(row: RunRow | None) -> float | None:
    return None if row is None else (row.started or row.occurrence).timestamp()


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
