"""Every warning's code, and `ignore_warnings`: the codes a task has read and accepted, left
out of `check`, `list` and `doctor` and counted instead (docs/schedule-file.md#warnings)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cronctl.core.model import Problem, Task
from cronctl.core.values import did_you_mean

#: The warnings about a task, which its `ignore_warnings` (or [defaults]') may acknowledge.
TASK_WARNINGS: Mapping[str, str] = {
    "day-or-day": "both day fields are restricted, so the task runs on days matching either",
    "cron-star-list": "a field is a list led by '*', which cron reads in its own way",
    "cron-uneven-step": "a minute or hour step does not divide its field: one gap differs",
    "cron-weekday-step": "a day-of-week step counts up to 7, which is Sunday again",
    "at-in-past": "a one-shot task's `at` has passed: it will not run again",
    "dst-gap": "a run falls in a spring-forward gap in the next 12 months",
    "dst-overlap": "a run falls in a fall-back hour in the next 12 months",
    "herd": "more than herd_limit tasks start in one minute",
    "on-start-every-server": "on_start runs on every machine, whatever on_one_server says",
    "retries-outlast-period": "retries may still run when the next occurrence is due",
    "secret-file": "a secret file is missing, unreadable, or readable by others",
}
#: The warnings about this machine, not a task: a task cannot accept them, and each has a
#: fix of its own (what to do, in the order the message gives it).
MACHINE_WARNINGS: Mapping[str, str] = {
    "lock-dir-not-shared": (
        "it is about this machine's lock_dir: set lock_dir_shared = true in [cronctl] if the "
        "directory is shared in a way cronctl cannot detect, or point lock_dir at a shared mount"
    ),
    "metrics-file-unsafe": (
        "it is about this machine's metrics_file, which `run` refuses to write: move it to a "
        "directory only root or this user can write to"
    ),
}


def ignore_problem(codes: list[str]) -> tuple[str, str] | None:
    for code in codes:
        if code in TASK_WARNINGS:
            continue
        if code in MACHINE_WARNINGS:
            why = MACHINE_WARNINGS[code]
            return f"ignore_warnings: {code!r} cannot be acknowledged: {why}", "bad-value"
        hint = did_you_mean(code.lower(), list(TASK_WARNINGS)) or (
            "; the codes are listed in docs/schedule-file.md#warnings"
        )
        return f"ignore_warnings: {code[:80]!r} is not a warning code{hint}", "bad-value"
    return None


def acknowledge(problems: Iterable[Problem], tasks: Iterable[Task]) -> tuple[list[Problem], int]:
    """The problems left once each task's acknowledged warnings are taken out, and how many
    were. A warning about several tasks (a herd) goes only when each of them accepts it."""
    accepted = {t.name: t.ignore_warnings for t in tasks if t.ignore_warnings}
    kept = list(problems)
    if not accepted:
        return kept, 0
    left = [p for p in kept if not _accepted(p, accepted)]
    return left, len(kept) - len(left)


def _accepted(problem: Problem, accepted: Mapping[str, tuple[str, ...]]) -> bool:
    if problem.severity != "warning":
        return False
    about = problem.about or ((problem.task,) if problem.task else ())
    return bool(about) and all(problem.code in accepted.get(name, ()) for name in about)


def acknowledged(count: int) -> str:
    return f"{count} warning{'s' * (count != 1)} acknowledged by ignore_warnings"
