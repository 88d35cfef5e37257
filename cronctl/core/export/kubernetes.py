"""A task as a Kubernetes CronJob manifest, written by hand: every string a JSON string (the
same scalar to YAML 1.2, line breaks escaped), so no value can add a line or a document."""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta

from cronctl.core.cronwalk import shortest_wall_gap
from cronctl.core.export.common import Exported, common_limits, one_line, whole_hour_zone
from cronctl.core.model import Task, format_duration

_DNS = re.compile(r"[^a-z0-9-]+")


# JSON leaves these raw; YAML reads NEL and LS/PS as line breaks and refuses DEL, C1 and
# the noncharacters as unprintable.
_RAW = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")


def _s(text: str) -> str:
    quoted = json.dumps(text, ensure_ascii=False)
    return _RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted)


_EXPANDED = re.compile(r"\$(?=[$(])")


def _literal(text: str) -> str:
    """``text`` as Kubernetes must pass it on: it replaces ``$(VAR)`` in a container's
    command and env values with the variable and reads ``$$`` as ``$``, so each ``$`` that
    starts either is doubled (``$(date)`` in a shell command must reach the shell)."""
    return _EXPANDED.sub("$$", text)


def _limits(task: Task, now: datetime) -> list[str]:
    lost = common_limits(task, now)
    for key in ("when", "skip"):
        if getattr(task, key):
            lost.append(f"{key} condition: a CronJob has none; the job runs without it")
    if task.without_overlapping and task.overlap_lease:
        lease = format_duration(task.overlap_lease)
        lost.append(f"without_overlapping lease ({lease}): Forbid waits however long a job runs")
    if task.misfire == "catch-up":
        lost.append("misfire catch-up: a CronJob starts one missed run, not each")
    if task.jitter:
        lost.append("jitter: a CronJob has no start delay")
    if task.on_start:
        lost.append("on_start: a CronJob has no start-up run (the schedule is exported)")
    if _workdir(task) is not None:
        lost.append(f"workdir {task.workdir}: set as workingDir; it must exist in the image")
    else:
        lost.append(
            f"working directory: the default, the schedule's folder ({task.workdir}), is not "
            "in the image; the job starts in the image's WORKDIR (set workdir if the command "
            "needs it, as ./bin/… does)"
        )
    cron = task.cron
    days = cron.text.split()[2::2] if cron is not None else []  # day-of-month, day-of-week
    if any(d.startswith("*/") for d in days) and any(not d.startswith("*") for d in days):
        # Kubernetes (robfig/cron) reads a stepped '*/N' day field as restricted: OR, not AND.
        lost.append("day fields: Kubernetes ORs a '*/N' day field with the other; check the days")
    return lost


def _workdir(task: Task) -> str | None:
    # The file's own directory is the default: it means nothing inside a container.
    default = (task.source.parent, task.source.parent.resolve())
    return None if task.workdir in default else str(task.workdir)


# Kubernetes counts the starts a CronJob missed since its last one, within the deadline
# when there is one; past 100 it stops starting the job (older controllers) or warns and
# starts the latest. A deadline spanning fewer than 100 runs keeps every job clear of it.
MISSED_LIMIT = 100
_ANCHOR = date(2024, 1, 1)  # a fixed start: the same schedule exports the same deadline
_YEARS = 8  # two leap days, every weekday on every day of the month


def deadline(task: Task) -> tuple[int, str | None]:
    """startingDeadlineSeconds for the task, and what it loses (or None): 60 s for `skip`;
    else `misfire_grace` cut to (or without one) 90 intervals, where Kubernetes coalesces."""
    if task.misfire == "skip":
        return 60, None
    assert task.cron is not None
    gap = shortest_wall_gap(task.cron, _ANCHOR, _YEARS * 366)
    # 90, not 100: a DST change shortens one interval a year by up to an hour.
    limit = (MISSED_LIMIT - 10) * gap * 60 if gap else None
    if task.misfire_grace:
        grace = int(task.misfire_grace.total_seconds())
        if limit is not None and grace > limit:
            window = format_duration(timedelta(seconds=limit))
            return limit, (
                f"misfire_grace ({format_duration(task.misfire_grace)}): cut to {window} "
                f"({MISSED_LIMIT - 10} runs) as startingDeadlineSeconds; Kubernetes stops "
                f"starting a CronJob that missed more than {MISSED_LIMIT}"
            )
        return grace, None
    return (limit if limit is not None else 60), None


def manifest(
    task: Task, name: str, zone: str, image: str, lost: list[str], starting_deadline: int
) -> str:
    assert task.cron is not None
    argv = [task.shell, "-c", task.command] if isinstance(task.command, str) else task.command
    out = [
        f"# Exported by cronctl from {one_line(str(task.source))}:{task.line} (task {task.name}).",
        *(f"# Not expressed: {one_line(item)}" for item in lost),
        "apiVersion: batch/v1",
        "kind: CronJob",
        "metadata:",
        f"  name: {_s(name)}",
        "  labels:",
        '    app.kubernetes.io/managed-by: "cronctl"',
        "  annotations:",
        f"    cronctl/task: {_s(task.name)}",
        "spec:",
        f"  schedule: {_s(task.cron.text)}",
        f"  timeZone: {_s(zone)}",
        f"  concurrencyPolicy: {'Forbid' if task.without_overlapping else 'Allow'}",
        f"  suspend: {'true' if task.paused else 'false'}",
        f"  startingDeadlineSeconds: {starting_deadline}",
        "  jobTemplate:",
        "    spec:",
        f"      backoffLimit: {task.retries}",
    ]
    if task.timeout:
        out.append(f"      activeDeadlineSeconds: {int(task.timeout.total_seconds())}")
    out += [
        "      template:",
        "        spec:",
        "          restartPolicy: Never",
        "          containers:",
        "            - name: task",
        f"              image: {_s(image)}",
        f"              command: [{', '.join(_s(_literal(a)) for a in argv)}]",
    ]
    if (workdir := _workdir(task)) is not None:
        out.append(f"              workingDir: {_s(workdir)}")
    out.append("              env:")
    for k, v in {**task.env, "CRONCTL_TASK": task.name}.items():
        out.append(f"                - {{name: {_s(k)}, value: {_s(_literal(v))}}}")
    return "\n".join(out) + "\n"


def export_task(task: Task, now: datetime, image: str) -> Exported:
    """The CronJob for one task, or the reason it cannot be exported."""
    result = Exported(task.name)
    zone = whole_hour_zone(task)
    if task.start_only:
        refused = "on_start only: a CronJob has no start-up run; not exported"
    elif task.chained:
        refused = (
            f"after {', '.join(task.after)}: Kubernetes starts no CronJob when another ends; "
            "not exported (run the chain as one Job's commands, or use a workflow engine)"
        )
    elif task.cron is None:
        refused = "one-shot `at` task: a CronJob repeats; not exported (use a Job)"
    elif zone is None:
        refused = f"timezone {task.zone.name}: no IANA zone has that fixed offset; not exported"
    else:
        refused = ""
    if refused or zone is None:
        result.lost.append(refused)
        return result
    # Lower case, '-' for other characters, at most 52: Kubernetes appends an 11-character
    # suffix to name each Job.
    name = _DNS.sub("-", task.name.lower()).strip("-")[:52].rstrip("-") or "task"
    result.lost += _limits(task, now)
    starting_deadline, cut = deadline(task)
    if cut is not None:
        result.lost.append(cut)
    if name != task.name:
        result.lost.append(f"name: Kubernetes names must be DNS labels; exported as {name}")
    result.files[f"{name}.yaml"] = manifest(task, name, zone, image, result.lost, starting_deadline)
    return result
