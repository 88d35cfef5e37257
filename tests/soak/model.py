"""An independent model of what cronctl must do over a sequence of ticks.

Written from docs/guarantees.md and docs/schedule-file.md alone, in the plainest way: a
brute-force matcher that
tests each UTC minute, a window per machine and task, the misfire policies, then the
guards in the documented order. It shares no code with cronctl.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

MINUTE = timedelta(minutes=1)
NAMES = {
    "SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6,
    "JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6,
    "JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12,
}  # fmt: skip
BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))


def _value(text: str) -> int:
    return NAMES[text.upper()] if text.upper() in NAMES else int(text)


def _field(text: str, low: int, high: int) -> set[int]:
    values: set[int] = set()
    for item in text.split(","):
        base, _, step = item.partition("/")
        if base == "*":
            first, last = low, high
        elif "-" in base:
            first, last = (_value(x) for x in base.split("-"))
        else:
            first = _value(base)
            last = high if step else first
        values.update(range(first, last + 1, int(step or 1)))
    return values


@dataclass(frozen=True)
class Matcher:
    """Does a UTC minute match a cron line read in a zone (no DST change in the soak)?"""

    fields: tuple[set[int], ...]
    day_and: bool
    zone: str

    @classmethod
    def parse(cls, cron: str, zone: str) -> Matcher:
        parts = cron.split()
        fields = tuple(_field(p, lo, hi) for p, (lo, hi) in zip(parts, BOUNDS, strict=True))
        dow = {d % 7 for d in fields[4]}
        return cls((*fields[:4], dow), parts[2].startswith("*") or parts[4].startswith("*"), zone)

    def wall(self, minute: datetime) -> datetime:
        if self.zone == "UTC":
            return minute
        if self.zone[0] in "+-":
            sign = 1 if self.zone[0] == "+" else -1
            hours, minutes = self.zone[1:].split(":")
            return minute + sign * timedelta(hours=int(hours), minutes=int(minutes))
        return minute.astimezone(ZoneInfo(self.zone))

    def __call__(self, minute: datetime) -> bool:
        wall = self.wall(minute)
        mins, hours, days, months, dows = self.fields
        if wall.minute not in mins or wall.hour not in hours or wall.month not in months:
            return False
        dom = wall.day in days
        dow = (wall.weekday() + 1) % 7 in dows
        return (dom and dow) if self.day_and else (dom or dow)


@dataclass(frozen=True)
class SoakTask:
    """One task as the model sees it, with the cron its friendly key stands for."""

    name: str
    toml: str
    cron: str | None
    zone: str = "UTC"
    at: datetime | None = None
    misfire: str = "coalesce"
    grace: timedelta | None = None
    on_one_server: bool = False
    overlap: bool = False
    lease: timedelta | None = None
    when: bool = False
    skip: bool = False
    paused: bool = False

    def matcher(self) -> Callable[[datetime], bool]:
        if self.cron is None:
            return lambda minute: minute == self.at
        return Matcher.parse(self.cron, self.zone)


@dataclass
class Model:
    """Expected outcomes per (machine, task, occurrence), and missed counts."""

    tasks: list[SoakTask]
    outcome_of: Callable[[str, datetime], str]
    condition: Callable[[str, datetime], bool]
    held: Callable[[str, datetime], datetime | None]
    marker_paused: Callable[[str, datetime], bool]
    last: dict[tuple[str, str], datetime] = field(default_factory=dict)
    done: set[tuple[str, str]] = field(default_factory=set)
    claimed: set[tuple[str, datetime]] = field(default_factory=set)
    outcomes: dict[tuple[str, str, datetime], str] = field(default_factory=dict)
    missed: dict[tuple[str, str], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._match = {t.name: t.matcher() for t in self.tasks}

    def tick(self, machine: str, now: datetime) -> None:
        minute = now.replace(second=0, microsecond=0)
        for task in self.tasks:
            key = (machine, task.name)
            last = self.last.get(key, minute - MINUTE)
            if minute <= last:
                self.last[key] = last
                continue
            self.last[key] = minute
            if key in self.done:
                continue
            found = []
            probe = last + MINUTE
            while probe <= minute:
                if self._match[task.name](probe):
                    found.append(probe)
                probe += MINUTE
            if task.at is not None and task.at <= minute:
                self.done.add(key)
            runs = self._policy(task, found, now)
            self.missed[key] = self.missed.get(key, 0) + len(found) - len(runs)
            for occurrence in runs:
                outcome = self._guards(task, occurrence, now)
                self.outcomes[(machine, task.name, occurrence)] = outcome

    @staticmethod
    def _policy(task: SoakTask, found: list[datetime], now: datetime) -> list[datetime]:
        if not found:
            return []
        minute = now.replace(second=0, microsecond=0)
        if task.misfire == "skip":
            runs = [found[-1]] if found[-1] == minute else []
        elif task.misfire == "catch-up":
            runs = found[-100:]
        else:
            runs = [found[-1]]
        if task.grace is not None:
            runs = [t for t in runs if now - t <= task.grace]
        return runs

    def _guards(self, task: SoakTask, occurrence: datetime, now: datetime) -> str:
        """The order of a due task (docs/schedule-file.md): paused, conditions, claim, overlap,
        run."""
        if task.paused or self.marker_paused(task.name, now):
            return "skipped: paused"
        if task.when and not self.condition("when", occurrence):
            return "skipped: condition"
        if task.skip and self.condition("skip", occurrence):
            return "skipped: condition"
        if task.on_one_server:
            if (task.name, occurrence) in self.claimed:
                return "skipped: another server"
            self.claimed.add((task.name, occurrence))
        since = self.held(task.name, now) if task.overlap else None
        if since is not None and (task.lease is None or now - since <= task.lease):
            return "skipped: still running"
        return self.outcome_of(task.name, occurrence)


def utc(text: str) -> datetime:
    """'2025-12-29T00:00' -> an aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)
