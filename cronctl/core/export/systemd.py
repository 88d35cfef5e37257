"""A task as a systemd `.service` and `.timer` pair; `OnCalendar=` is written from cronctl's
value sets, so systemd parses exactly what cronctl would run."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from cronctl.core.chains import Chains
from cronctl.core.cronexpr import CronExpr, ranges
from cronctl.core.export.common import Exported, common_limits, one_line, whole_hour_zone
from cronctl.core.model import KILL_GRACE_S, Task, format_duration
from cronctl.core.values import control_char

_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def calendar_field(values: frozenset[int], low: int, high: int) -> str:
    """A value set in systemd's calendar syntax: '*', 'A/S', 'A..B' and commas."""
    ordered = sorted(values)
    if ordered == list(range(low, high + 1)):
        return "*"
    if len(ordered) >= 3:
        step = ordered[1] - ordered[0]
        if step > 1 and ordered == list(range(ordered[0], high + 1, step)):
            return f"{ordered[0]:02d}/{step}"
    return ",".join(ranges(ordered, "{:02d}".format, ".."))


def weekday_field(weekdays: frozenset[int]) -> str:
    """Cron's 0-6 (Sunday 0) as systemd's names: 'Mon..Fri', 'Sat,Sun'."""
    monday_first = sorted((d - 1) % 7 for d in weekdays)
    return ",".join(ranges(monday_first, _WEEKDAYS.__getitem__, "..", 2))


def on_calendar(cron: CronExpr, zone: str) -> list[str]:
    """The OnCalendar= values for an expression (two when cron's day-or-day rule applies)."""
    time = f"{calendar_field(cron.hours, 0, 23)}:{calendar_field(cron.minutes, 0, 59)}:00"
    months = calendar_field(cron.months, 1, 12)
    days = calendar_field(cron.days, 1, 31)
    if cron.day_or_day:
        # Cron ORs two restricted day fields; systemd ANDs its parts: one line each.
        return [
            f"{weekday_field(cron.weekdays)} *-{months}-* {time} {zone}",
            f"*-{months}-{days} {time} {zone}",
        ]
    prefix = "" if len(cron.weekdays) == 7 else f"{weekday_field(cron.weekdays)} "
    return [f"{prefix}*-{months}-{days} {time} {zone}"]


def _quote(arg: str, dollars: bool = True) -> str:
    """One word for ExecStart=/Environment=: quoted, C-escaped, so no value adds a line."""
    text = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    # systemd's C escapes: \xNN is a byte, so a character past ASCII is written \uNNNN.
    escaped = (f"\\x{ord(c):02x}" if ord(c) < 0x80 else f"\\u{ord(c):04x}" for c in text)
    text = "".join(e if control_char(c) else c for c, e in zip(text, escaped, strict=True))
    return '"' + (text.replace("$", "$$") if dollars else text) + '"'


def _plain(text: str) -> str:
    """A value systemd does not unescape (Description=, a comment): one line, `%` doubled,
    no trailing backslash (it would continue the line into the next one)."""
    return one_line(text).rstrip("\\").replace("%", "%%")


# systemd looks a bare program name up in its own fixed list of directories, ignoring the
# unit's PATH, and refuses a relative path: a program that is not an absolute path runs
# through env(1), which searches PATH (the task's `env` may set it) as cronctl does.
ENV = "/usr/bin/env"


def _program(path: str) -> str:
    return _quote(path) if path.startswith("/") else f"{_quote(ENV)} {_quote(path)}"


def _command(task: Task, text: str | tuple[str, ...]) -> str:
    if isinstance(text, str):
        return f"{_program(task.shell)} -c {_quote(text)}"
    return " ".join([_program(text[0]), *(_quote(a) for a in text[1:])])


def _service(task: Task, unit: str, user: str, lost: list[str], starts: Sequence[str] = ()) -> str:
    lines = [
        f"# Exported by cronctl from {_plain(str(task.source))}:{task.line} (task {task.name}).",
        *(f"# Not expressed: {_plain(item)}" for item in lost),
        "[Unit]",
        f"Description={_plain(task.description or 'cronctl task ' + task.name)}",
        *starts,  # OnSuccess=/OnFailure=: the chained tasks this one starts
        "",
        "[Service]",
        "Type=oneshot",
        f"User={user}",  # a system unit without User= runs as root
    ]
    if task.when:
        lines.append(f"ExecCondition={_command(task, task.when)}")
    if task.skip:
        # ExecCondition= runs the unit on exit 0 and skips it on 1-254: `skip` inverted.
        inverted = "! { " + task.skip + "\n}"
        lines.append(f"ExecCondition={_program(task.shell)} -c {_quote(inverted)}")
    lines.append(f"ExecStart={_command(task, task.command)}")
    lines.append(f"WorkingDirectory={str(task.workdir).replace('%', '%%')}")  # see _unwritable
    env = {**task.env, "CRONCTL_TASK": task.name}
    lines += [f"Environment={_quote(f'{k}={v}', dollars=False)}" for k, v in env.items()]
    timeout = int(task.timeout.total_seconds()) if task.timeout else None
    lines.append(f"TimeoutStartSec={timeout if timeout else 'infinity'}")
    lines.append(f"TimeoutStopSec={KILL_GRACE_S}")  # as cronctl: SIGTERM, then SIGKILL
    return "\n".join(lines) + "\n"


def _limits(task: Task, now: datetime) -> list[str]:
    lost = common_limits(task, now)
    if task.on_one_server:
        lost.insert(
            0,
            "on_one_server: one run per occurrence across machines; enable the timer on one "
            "machine only",
        )
    if task.without_overlapping and task.overlap_lease:
        lost.append(
            f"without_overlapping lease ({format_duration(task.overlap_lease)}): systemd never "
            "starts a unit that is still running, however long it runs"
        )
    if task.misfire == "catch-up":
        lost.append("misfire catch-up: Persistent=true runs a missed timer once, not once each")
    if task.misfire_grace:
        lost.append(f"misfire_grace ({format_duration(task.misfire_grace)}): systemd has none")
    if task.paused:
        lost.append("paused: the units are written; do not enable the timer until you resume")
    if task.retries:
        lost.append("retries: not exported; systemd's Restart= does not apply to oneshot units")
    return lost


def _unwritable(task: Task) -> str | None:
    """Why the task's paths cannot be written as systemd values (never unescaped)."""
    for key, value in (("workdir", str(task.workdir)), ("shell", task.shell)):
        if control_char(value) or value.endswith("\\"):
            return f"{key} {one_line(value)}: systemd cannot express it; not exported"
    return None


_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}|[0-9]{1,10}")


def check_user(user: str) -> str | None:
    """Why `user` cannot be a `User=` value (a user name as systemd takes it, or a uid)."""
    if _USER.fullmatch(user) is None or (user.isdigit() and int(user) >= 2**32 - 1):
        return (
            "use a user name (letters, digits, '_', '.', '-'; 32 at most) or a numeric uid "
            "below 4294967295"
        )
    return None


#: The unit settings that start a chained task's service, by its after_outcome: systemd
#: starts OnFailure= units when the unit fails (an exit code, a timeout, a signal).
_STARTED_BY = {"ok": ("OnSuccess",), "failed": ("OnFailure",), "any": ("OnSuccess", "OnFailure")}


def export_schedule(tasks: Sequence[Task], now: datetime, user: str) -> list[Exported]:
    """Every task's units, run as `user`. A chained task with one upstream task is a service
    its upstream's OnSuccess=/OnFailure= starts (systemd 249 or later)."""
    graph = Chains(tasks)
    starts: dict[str, list[str]] = {}
    refused: dict[str, str] = {}
    exported: set[str] = set()
    for task in sorted(tasks, key=lambda t: graph.depth(t.name) or 0):
        why = _chain_refusal(task, exported) if task.chained else _refusal(task)
        if why is not None:
            refused[task.name] = why
            continue
        exported.add(task.name)
        for key in _STARTED_BY.get(task.after_outcome, ()) if task.chained else ():
            starts.setdefault(task.after[0], []).append(f"{key}={unit_name(task)}.service")
    return [export_task(t, now, user, starts.get(t.name, ()), refused.get(t.name)) for t in tasks]


def _chain_refusal(task: Task, exported: set[str]) -> str | None:
    if len(task.after) > 1:
        return (
            f"after {', '.join(task.after)}: systemd starts a unit when one unit ends, not "
            "when several have; not exported (start it from a wrapper around them)"
        )
    if task.after[0] not in exported:
        return f"after {task.after[0]}: that task is not exported, so nothing would start it"
    return _unwritable(task)


def _refusal(task: Task) -> str | None:
    """Why a task with times of its own cannot be exported."""
    if whole_hour_zone(task) is None:
        return (
            f"timezone {task.zone.name}: systemd names no zone with that offset; not exported "
            "(use an IANA zone name)"
        )
    if task.start_only:
        return "on_start only: a timer has no start-up run; not exported"
    return _unwritable(task)


def unit_name(task: Task) -> str:
    """`cronctl-NAME`: ':' is legal in a unit name, but systemd-analyze verify reads
    FILE:ALIAS, so it is replaced."""
    return f"cronctl-{task.name.replace(':', '-')}"


def export_task(
    task: Task, now: datetime, user: str, starts: Sequence[str] = (), refused: str | None = None
) -> Exported:
    """The unit files for one task, run as `user`, or why it cannot be exported (`refused`,
    from export_schedule). `starts`: the lines that start the chained tasks after it."""
    unit = unit_name(task)
    result = Exported(task.name)
    if ":" in task.name:
        result.lost.append(f"name: exported as {unit} (':' replaced)")
    if refused is None:
        refused = _unwritable(task) if task.chained else _refusal(task)
    if refused is not None:
        result.lost.append(refused)
        return result
    if task.chained:
        result.lost += _limits(task, now)
        result.lost.append(
            f"after {task.after[0]}: the service has no timer; {task.after[0]}'s unit starts it "
            "(OnSuccess=/OnFailure=, systemd 249 or later), also when that unit is started by hand"
        )
        if task.jitter:
            result.lost.append("jitter: a unit started by another starts at once")
        result.files[f"{unit}.service"] = _service(task, unit, user, result.lost, starts)
        return result
    if task.on_start:
        result.lost.append("on_start: a timer has no start-up run (the schedule is exported)")
    zone = whole_hour_zone(task)
    assert zone is not None  # else refused
    if task.cron is not None:
        calendars = on_calendar(task.cron, zone)
    else:
        assert task.at is not None
        calendars = [f"{task.at:%Y-%m-%d %H:%M:%S} UTC"]
    result.lost += _limits(task, now)
    result.files[f"{unit}.service"] = _service(task, unit, user, result.lost, starts)
    timer = [
        f"# Exported by cronctl from {_plain(str(task.source))}:{task.line} (task {task.name}).",
        "[Unit]",
        f"Description=Timer for cronctl task {task.name}",
        "",
        "[Timer]",
        *(f"OnCalendar={c}" for c in calendars),
        f"Persistent={'false' if task.misfire == 'skip' else 'true'}",
        "AccuracySec=1s",  # systemd's default of 1 min would start runs up to a minute late
    ]
    if task.jitter:  # a stable delay per machine and unit, like cronctl's
        timer += [f"RandomizedDelaySec={int(task.jitter.total_seconds())}", "FixedRandomDelay=true"]
    timer += [f"Unit={unit}.service", "", "[Install]", "WantedBy=timers.target"]
    result.files[f"{unit}.timer"] = "\n".join(timer) + "\n"
    return result
