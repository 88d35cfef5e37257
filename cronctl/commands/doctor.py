"""`cronctl doctor`: check this machine's set-up and say what to do about each finding
(docs/commands.md). Each verdict `check` also gives (the schedule, lock_dir's sharing,
metrics_file) is `check`'s own, so the two never disagree."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

from cronctl.commands.schedule import check as check_schedule
from cronctl.coord import open_coordinator
from cronctl.coord.port import StoreUnavailable
from cronctl.core.model import Problem, Schedule
from cronctl.core.warncodes import TASK_WARNINGS, acknowledged
from cronctl.edge.callers import find_callers
from cronctl.edge.dirwarnings import metrics_file_problems
from cronctl.edge.safefiles import open_dir
from cronctl.edge.schedcache import cache_dir
from cronctl.errors import CronctlError

SKEW_WARN_S = 2.0
MIN_FREE_BYTES = 100 * 1024 * 1024
MIN_FREE_RATIO = 0.05


@dataclass(frozen=True)
class Finding:
    """One check: ``ok``, ``note`` (worth knowing, not a fault: exit 0), ``warning`` or
    ``problem``, what was found, and what to do."""

    level: Literal["ok", "note", "warning", "problem"]
    subject: str
    message: str
    advice: str = ""


@dataclass(frozen=True)
class DoctorResult:
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(f.level in ("ok", "note") for f in self.findings)


def doctor(
    schedule: Schedule,
    dirs: tuple[Path, Path],
    lock_problems: list[Problem],
    url: str | None,
    now: datetime,
) -> DoctorResult:
    """Run every check, never raising for what it finds (`lock_problems`: `check`'s)."""
    state_dir, lock_dir = dirs
    findings = _schedule(schedule, now)
    findings += [*_directory("state_dir", state_dir), *_directory("lock_dir", lock_dir)]
    findings.append(_sharing(lock_problems, url))
    findings += _metrics(schedule)
    findings.append(_cache(os.environ))
    if url:
        findings.extend(_store(url, lock_dir))
    findings.append(_callers(os.environ))
    return DoctorResult(findings)


def _schedule(schedule: Schedule, now: datetime) -> list[Finding]:
    """`check`'s verdict (without the lock_dir warning, judged on its own below)."""
    files = ", ".join(str(f) for f in schedule.files) or "no schedule file"
    subject = "schedule"
    checked = check_schedule(schedule, now, [], strict=False)
    advice = {
        "error": "fix it (`cronctl check` lists every problem); `run` refuses a schedule with "
        "errors",
        "accept": "see `cronctl check`; once read and accepted, add its code to the task's "
        "ignore_warnings (docs/schedule-file.md#warnings)",
        "warning": "see `cronctl check`",
    }
    findings = []
    for p in checked.problems:
        level: Literal["problem", "warning"] = "problem" if p.severity == "error" else "warning"
        said = "accept" if level == "warning" and p.code in TASK_WARNINGS else p.severity
        findings.append(Finding(level, subject, p.describe(), advice[said]))
    # Acknowledged warnings are only said, as `check` says them: a probe must be able to pass.
    if checked.acknowledged:
        findings.append(Finding("note", subject, acknowledged(checked.acknowledged)))
    if not any(f.level != "note" for f in findings):
        count = len(schedule.tasks)
        tasks = f"{count} task{'s' * (count != 1)}"
        findings.insert(0, Finding("ok", subject, f"{files}: {tasks}, no problems"))
    return findings


def _metrics(schedule: Schedule) -> list[Finding]:
    """Whether `metrics_file` is safe to write, judged as `run` (and `check`) judge it."""
    path = schedule.settings.metrics_file
    if path is None:
        return []
    found = metrics_file_problems(schedule)
    if not found:
        said = f"{path}: its path passes the check `run` makes before each write"
        return [Finding("ok", "metrics_file", said)]
    advice = "move it to a directory only root or this user can write to (docs/operating.md)"
    return [Finding("warning", "metrics_file", p.message, advice) for p in found]


def _callers(env: Mapping[str, str]) -> Finding:
    """Whether anything starts cronctl; a note only when nothing is found: a CI runner has no
    caller, and places this user cannot read may hold one."""
    found = find_callers(env)
    if not found:
        return Finding("note", "callers", "no crontab line or systemd unit found that runs "
                       "`cronctl run` or `cronctl work` (places this user cannot read are "
                       "not searched)", "add `* * * * * cd REPO && cronctl run` to a crontab, "
                       "or install a unit running `cronctl work` (docs/first-hour.md)")  # fmt: skip
    where = "; ".join(f"{c.where}: {c.line}" for c in found)
    return Finding("ok", "callers", f"{len(found)} found: {where}")


def _cache(env: Mapping[str, str]) -> Finding:
    """`run`'s schedule cache: a directory it cannot use costs every run a parse, silently."""
    subject = "schedule cache"
    try:
        where = cache_dir(env, os.geteuid() == 0)
    except CronctlError as exc:
        return Finding("problem", subject, str(exc), "fix or unset CRONCTL_CACHE_DIR")
    if where is None:
        why = "off (CRONCTL_CACHE_DIR=off)" if env.get("CRONCTL_CACHE_DIR") else "no home"
        return Finding("ok", subject, f"{why}: every run parses the schedule files")
    subject = f"{subject} {where}"
    if not os.path.lexists(where):
        return Finding("ok", subject, "does not exist yet; the first run creates it (0700)")
    try:
        fd, _ = open_dir(where)
    except (OSError, CronctlError) as exc:
        message = str(exc) if isinstance(exc, CronctlError) else exc.strerror or str(exc)
        return Finding("warning", subject, f"run cannot use it, so every run parses the "
                       f"schedule files: {message}", "fix it as the message says, point "
                       "CRONCTL_CACHE_DIR elsewhere, or set CRONCTL_CACHE_DIR=off")  # fmt: skip
    try:
        entries = sum(n.startswith("schedule-") for n in os.listdir(fd))  # noqa: PTH208 (an fd)
    finally:
        os.close(fd)
    return Finding("ok", subject, f"usable, {entries} entr{'y' if entries == 1 else 'ies'}")


def _directory(name: str, path: Path) -> list[Finding]:
    subject = f"{name} {path}"
    try:
        info = path.lstat()
    except FileNotFoundError:
        return [Finding("ok", subject, "does not exist yet; the first run creates it (0700)")]
    except OSError as exc:
        return [Finding("problem", subject, f"cannot be read: {exc.strerror}", "fix its parent")]
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return [Finding("problem", subject, "is not a directory (or is a symbolic link)",
                        f"point {name} at a real directory")]  # fmt: skip
    findings: list[Finding] = []
    me = os.geteuid()
    if info.st_uid not in (me, 0):
        findings.append(Finding("problem", subject, f"is owned by uid {info.st_uid}, not by "
                                f"uid {me} who runs cronctl", f"chown {me} {path}"))  # fmt: skip
    if info.st_mode & stat.S_IWOTH:
        mode = f"{stat.S_IMODE(info.st_mode):04o}"
        findings.append(
            Finding("problem", subject, f"is writable by others ({mode})", f"chmod o-w {path}")
        )
    vfs = os.statvfs(path)
    free, total = vfs.f_bavail * vfs.f_frsize, vfs.f_blocks * vfs.f_frsize or 1
    text = f"{free / 2**20:.0f} MiB free ({100 * free / total:.0f}%)"
    if free < MIN_FREE_BYTES or free / total < MIN_FREE_RATIO:
        advice = "free some space: a full disk stops history and logs"
        return [*findings, Finding("problem", subject, f"only {text}", advice)]
    return [*findings, Finding("ok", subject, f"owner and mode fine, {text}")]


def _sharing(lock_problems: list[Problem], url: str | None) -> Finding:
    if url:
        return Finding("ok", "lock_dir sharing", "claims, locks and pauses are in the "
                       "coordination store; lock_dir need not be shared")  # fmt: skip
    if not lock_problems:
        return Finding("ok", "lock_dir sharing", "shared, or no task needs it to be")
    return Finding("problem", "lock_dir sharing", lock_problems[0].message,
                   "mount a shared lock_dir, or set coordination to a PostgreSQL URL")  # fmt: skip


def _store(url: str, lock_dir: Path) -> list[Finding]:
    # Opened to be measured only: it claims, locks and pauses nothing, so the host is moot.
    store = open_coordinator(url, lock_dir, host=os.uname().nodename, pid=os.getpid())
    subject = f"coordination {store.describe()}"
    try:
        check = store.check()
    except StoreUnavailable as exc:
        return [Finding("problem", subject, str(exc), "check the URL, the network, "
                        "pg_hba.conf and the password (PGPASSFILE, PGPASSWORD)")]  # fmt: skip
    except CronctlError as exc:
        return [Finding("problem", subject, str(exc), "do what the message says")]
    finally:
        store.close()
    if check is None:
        return []
    connect, round_trip = check.connect_s * 1000, check.round_trip_s * 1000
    timing = f"connect {connect:.0f} ms, round trip {round_trip:.1f} ms"
    schema = f"schema version {check.version} of {check.latest}"
    reachable = Finding("ok", subject, f"reachable ({timing}), {schema}")
    skew = (check.local_now - check.server_now).total_seconds()
    if abs(skew) <= SKEW_WARN_S:
        return [reachable, Finding("ok", "clock", f"{skew:+.3f} s off the store's now()")]
    advice = "run an NTP client (chrony, systemd-timesyncd): leases are judged by the clock"
    message = f"this machine's clock is {skew:+.1f} s off the store's now()"
    return [reachable, Finding("warning", "clock", message, advice)]
