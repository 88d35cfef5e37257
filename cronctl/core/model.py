"""The schedule as cronctl understands it: frozen values, no I/O, no clock."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase
from pathlib import Path

from cronctl.core.cronexpr import CronExpr
from cronctl.core.envkeys import DEFAULT_MAX_OUTPUT
from cronctl.core.minutes import minute_floor
from cronctl.core.values import LATEST
from cronctl.core.zones import Zone, next_occurrence, walls_at

MISFIRE_POLICIES = ("coalesce", "catch-up", "skip")
DEFAULT_MISFIRE = MISFIRE_POLICIES[0]
#: The schedule_key of a start-only task (`on_start = true`, no schedule key; run by `work`).
START_ONLY = "on_start"
#: The schedule_key of a chained task (`after = [...]`, docs/chains.md).
CHAINED = "after"
#: What a chained task waits for, the default first.
AFTER_OUTCOMES = ("ok", "failed", "any")
NOTIFY_MODES = ("always", "change")
#: A task's name keys locks, claims, logs, history: a safe file name (compiled on first use).
TASK_NAME = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,99}"
DEFAULT_SHELL = "/bin/sh"
MAX_PARALLEL = 8
#: A task past its timeout gets SIGTERM (its whole group), and SIGKILL this many seconds later.
KILL_GRACE_S = 10
#: A group name becomes part of a slot's file name and lock key: the task names' characters,
#: shorter, so that a slot's file name ("NAME.999.slot") always fits.
GROUP_NAME = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}"
#: How long a task of a full group waits for a slot when it has no misfire_grace.
DEFAULT_GROUP_WAIT = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class Problem:
    """One located mistake or warning in a schedule file."""

    file: str
    line: int | None
    task: str | None
    severity: str  # "error" or "warning"
    code: str
    message: str
    # The tasks a warning is about when it names several (a herd): it is acknowledged only
    # when every one of them accepts its code (core/warncodes.py).
    about: tuple[str, ...] = ()

    def describe(self) -> str:
        """`FILE:LINE: task NAME: message`, the form editors and CI logs link to; a warning
        ends with its code."""
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        task = f" task {self.task}:" if self.task else ""
        if self.severity == "error":
            return f"{where}:{task} {self.message}"
        return f"{where}:{task} {self.severity}: {self.message} [{self.code}]"


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Settings:
    """The [cronctl] table: where data lives, how much runs at once."""

    state_dir: Path | None = None
    lock_dir: Path | None = None
    lock_dir_shared: bool = False
    max_parallel: int = MAX_PARALLEL
    coordination: str | None = None  # a postgresql:// URL: the coordination store
    herd_limit: int = 20  # more tasks than this in one minute is a herd (check warns)
    metrics_file: Path | None = None
    # Namespaces state, history, locks and claims; None keeps the shared layout of old.
    project: str | None = None
    max_output: int = DEFAULT_MAX_OUTPUT  # bytes a run's log keeps; 0: no cap


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Task:
    """One scheduled task, with its defaults applied and its paths resolved."""

    name: str
    command: str | tuple[str, ...]
    schedule_key: str
    schedule_value: str
    cron: CronExpr | None
    at: datetime | None
    zone: Zone
    source: Path
    line: int | None
    description: str = ""
    when: str | None = None
    skip: str | None = None
    without_overlapping: bool = False
    overlap_lease: timedelta | None = None
    on_one_server: bool = False
    timeout: timedelta | None = None
    misfire: str = DEFAULT_MISFIRE
    misfire_grace: timedelta | None = None
    workdir: Path = field(default_factory=Path)
    shell: str = DEFAULT_SHELL
    env: Mapping[str, str] = field(default_factory=dict)
    paused: bool = False
    # The operating keys (cronctl/core/opskeys.py checks them).
    hosts: tuple[str, ...] = ()
    retries: int = 0
    retry_delay: timedelta = timedelta(seconds=30)
    jitter: timedelta | None = None
    ping_url: str | None = None
    on_failure: str | None = None
    on_success: str | None = None
    notify: str = "always"
    # Run once by `cronctl work` when it starts, besides the schedule (if any).
    on_start: bool = False
    # The warning codes acknowledged for this task, its own and [defaults]' (warncodes.py).
    ignore_warnings: tuple[str, ...] = ()
    # A chained task: the tasks it follows and the outcome it waits for (AFTER_OUTCOMES).
    after: tuple[str, ...] = ()
    after_outcome: str = AFTER_OUTCOMES[0]

    # Secrets read from files at each run (edge/secrets.py): the paths as written, never a
    # value. `max_output` in bytes (0: no cap); None until the [cronctl] default is applied.
    env_files: tuple[str, ...] = ()
    env_from_file: Mapping[str, str] = field(default_factory=dict)
    max_output: int | None = None
    # A [[group]]'s name, and its max_running (set when the schedule is assembled).
    group: str | None = None
    group_limit: int = 0
    # Resource caps of the command (core/capkeys.py): bytes, percent of one CPU, niceness,
    # the kernel's I/O priority; 0: none.
    memory_max: int = 0
    cpu_max: int = 0
    nice: int = 0
    ionice: int = 0

    @property
    def start_only(self) -> bool:
        return self.cron is None and self.at is None and not self.after

    @property
    def chained(self) -> bool:
        return bool(self.after)

    @property
    def has_secrets(self) -> bool:
        return bool(self.env_files or self.env_from_file)

    @property
    def reports_outside(self) -> bool:
        """Whether a run needs more than the command: retries, a ping, a hook."""
        return bool(self.retries or self.ping_url or self.on_failure or self.on_success)

    @property
    def schedule(self) -> str:
        """The schedule in cron form, or `@at INSTANT` for a one-shot task."""
        if self.cron is not None:
            return self.cron.text
        if self.after:
            return f"{CHAINED} {', '.join(self.after)}"
        if self.at is None:
            return "@start"
        return f"@at {format_utc(self.at)}"

    @property
    def fingerprint(self) -> str:
        """What identifies the schedule: a change of it restarts the task's window."""
        return f"{self.schedule}|{self.zone.name}"

    @property
    def firing_key(self) -> object:
        """Equal for tasks that fire at the same instants (parse_cron and parse_zone hand out
        one object per text: no hashing). Valid while the tasks live."""
        return (id(self.cron), id(self.zone)) if self.cron is not None else self.at

    @property
    def guards(self) -> list[str]:
        """Short labels for the guards and operating keys of a task, as `list` shows them."""
        lease = f"({format_duration(self.overlap_lease)})" if self.overlap_lease else ""
        labels = {
            f"no-overlap{lease}": self.without_overlapping,
            "one-server": self.on_one_server,
            "on-start": self.on_start and not self.start_only,
            "when": self.when,
            "skip": self.skip,
            f"timeout({format_duration(self.timeout or timedelta(0))})": self.timeout,
            f"retries({self.retries})": self.retries,
            f"jitter({format_duration(self.jitter or timedelta(0))})": self.jitter,
            "ping": self.ping_url,
            "hooks": self.on_failure or self.on_success,
            "secrets": self.has_secrets,
            f"group({self.group})": self.group,
            "caps": self.memory_max or self.cpu_max or self.nice or self.ionice,
        }
        return [label for label, on in labels.items() if on]

    def fires_at(self, minute: datetime) -> bool:
        """Whether the task has an occurrence at this UTC minute."""
        return bool(self.walls_at(minute))

    def walls_at(self, instant: datetime) -> tuple[datetime, ...]:
        """The naive wall times whose occurrence is this UTC minute (zones.walls_at)."""
        minute = minute_floor(instant)
        if self.cron is None:
            return (self.zone.wall(minute),) if self.at == minute else ()
        return walls_at(self.cron, self.zone, minute)

    def runs_at(self, instant: datetime) -> int:
        """How many runs this UTC minute gets: each carried wall time under `catch-up`, else 1."""
        carried = len(self.walls_at(instant))
        return carried if self.misfire == "catch-up" else min(carried, 1)

    def next_run(self, after: datetime) -> datetime | None:
        """The first occurrence strictly after `after` (None: a one-shot already past)."""
        if self.cron is None:
            return self.at if self.at is not None and self.at > after else None
        return next_occurrence(self.cron, self.zone, after)

    def next_runs(self, after: datetime, count: int = 1) -> list[datetime]:
        """The next `count` instants strictly after `after`, each once (`runs_at` says how
        many runs it gets)."""
        runs: list[datetime] = []
        cursor = after
        while len(runs) < count and cursor < LATEST:
            # Past LATEST the next occurrence could lie beyond year 9999: stop listing there.
            nxt = self.next_run(cursor)
            if nxt is None:
                break
            runs.append(nxt)
            cursor = nxt
        return runs


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Schedule:
    """Everything read from the schedule files: good tasks, problems, settings."""

    files: tuple[Path, ...]
    tasks: tuple[Task, ...]
    problems: tuple[Problem, ...]
    settings: Settings
    duplicates: tuple[str, ...] = ()
    tables: int = 0  # [[task]] tables in all files, valid or not (what `check` counts)
    # The tasks that chained tasks follow, also those left out here by `hosts`: a run of one
    # records its end for a follower that runs on another machine (docs/chains.md).
    followed_elsewhere: frozenset[str] = frozenset()

    @property
    def errors(self) -> list[Problem]:
        """A schedule with any must not run."""
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    def duplicate_names(self) -> list[str]:
        """Task names defined more than once (only the first definition is kept)."""
        return list(self.duplicates)

    def task(self, name: str) -> Task:
        """The task called `name`; KeyError if there is none."""
        for task in self.tasks:
            if task.name == name:
                return task
        raise KeyError(name)

    def followers(self, name: str) -> list[Task]:
        """The chained tasks that run after the task called `name`."""
        return [task for task in self.tasks if name in task.after]

    def due(self, at: datetime) -> list[Task]:
        """The tasks whose schedule names the UTC minute of `at`."""
        return [task for task in self.tasks if task.fires_at(at)]


def problem_order(problem: Problem) -> tuple[bool, str, int]:
    """The order problems are printed in by every command: errors first, then file, line."""
    return (problem.severity != "error", problem.file, problem.line or 0)


def format_utc(when: datetime) -> str:
    """`2026-08-03T09:00:00Z`: how every instant leaves cronctl."""
    if when.tzinfo is UTC and when.year >= 1000:
        # The same text at a tenth of strftime's cost (a dashboard formats 30,000 a page);
        # strftime writes a year before 1000 without its zeros, isoformat with them.
        return when.isoformat(timespec="seconds")[:19] + "Z"
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_duration(delta: timedelta) -> str:
    """timedelta(hours=1, minutes=30) -> '1h30m'."""
    seconds = int(delta.total_seconds())
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts) or "0s"


def runs_on(task: Task, host: str) -> bool:
    """Whether the task exists on the machine called `host` (no `hosts`: everywhere)."""
    if not task.hosts:
        return True
    return any(fnmatchcase(host, pattern) for pattern in task.hosts)
