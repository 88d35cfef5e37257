"""Occurrences counted hour by hour (timeline, herds, check --diff): a plain hour from the
expression's sets at once, only the hours around a DST seam minute by minute."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cronctl.core.chains import Chains
from cronctl.core.minutes import MINUTE, minute_ceil, minute_floor
from cronctl.core.model import Task, format_utc
from cronctl.core.zones import Zone, fires_at, firing_minutes, parse_zone

HOUR = timedelta(hours=1)
_Hour = tuple[datetime, datetime | None]  # a UTC hour, and its wall hour if it is whole


def hour_floor(when: datetime) -> datetime:
    return when.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def hour_minutes(task: Task, hour: datetime) -> list[int]:
    """The minutes (0-59) of the UTC hour starting at `hour` at which `task` fires."""
    if task.cron is None:
        if task.at is None:  # start-only: no occurrences
            return []
        return [task.at.minute] if hour <= task.at < hour + HOUR else []
    cron = task.cron
    seg = task.zone.segment_at(hour)
    plain = (
        (seg.start is None or minute_ceil(seg.start) < hour)
        and (seg.end is None or seg.end >= hour + HOUR)
        and (seg.repeats_until is None or seg.wall(hour) >= seg.repeats_until)
        and seg.offset % HOUR == timedelta(0)
    )
    if plain:
        wall = seg.wall(hour)
        named = (
            wall.hour in cron.hours and wall.month in cron.months and cron.matches_day(wall.date())
        )
        return sorted(cron.minutes) if named else []
    # A seam or a half-hour offset: the exact rule, minute by minute (rare hours only).
    return [m for m in range(60) if fires_at(cron, task.zone, hour + m * MINUTE)]


def occurrences(task: Task, start: datetime, end: datetime) -> Iterator[datetime]:
    """Every occurrence of `task` in [start, end), in order, as aware UTC datetimes."""
    start = minute_ceil(start.astimezone(UTC))
    hour = hour_floor(start)
    while hour < end:
        for minute in hour_minutes(task, hour):
            when = hour + minute * MINUTE
            if start <= when < end:
                yield when
        hour += HOUR


@dataclass(frozen=True)
class TaskLane:
    """One task's runs per hour of the timeline's zone, day after day."""

    task: Task
    per_hour: tuple[int, ...]  # [day * 24 + hour], wall hours of the timeline's zone
    counted: bool = True  # in the heat map (every-minute tasks are not, unless asked for)

    @property
    def total(self) -> int:
        return sum(self.per_hour)

    def by_hour_of_day(self) -> list[int]:
        """The most runs the task has in each hour of the day, on any day of the window."""
        days = len(self.per_hour) // 24
        return [max(self.per_hour[d * 24 + h] for d in range(days)) for h in range(24)]


def every_minute(task: Task) -> bool:
    """Whether the task fires every minute of the hours it runs in: in a heat map of all
    tasks it would hide the rest."""
    return task.cron is not None and len(task.cron.minutes) == 60


@dataclass(frozen=True)
class Timeline:
    """Runs per wall hour of `zone` over `days` days from the local midnight `first`."""

    first: datetime  # the first day's midnight, naive, in `zone`
    days: int
    lanes: tuple[TaskLane, ...]
    zone: Zone

    @property
    def start(self) -> datetime:
        """The UTC instant the window starts (the first day's local midnight, or after it)."""
        return _instant(self.zone, self.first)

    def heat(self) -> list[list[int]]:
        """Runs of the counted tasks per [day][hour]."""
        counted = [lane.per_hour for lane in self.lanes if lane.counted]
        totals = [sum(hour) for hour in zip(*counted, strict=True)] or [0] * (self.days * 24)
        return [totals[day * 24 : day * 24 + 24] for day in range(self.days)]

    def day(self, index: int) -> datetime:
        """The local midnight (naive) that starts day `index`."""
        return self.first + timedelta(days=index)


def _instant(zone: Zone, wall: datetime) -> datetime:
    """The first UTC instant whose wall time in `zone` is at or after `wall`."""
    guess = wall.replace(tzinfo=UTC) - zone.segment_at(wall.replace(tzinfo=UTC)).offset
    for _ in range(3):  # one segment boundary between guess and answer at most, twice over
        guess = zone.segment_at(guess).instant(wall)
    while zone.wall(guess) < wall:  # inside a gap: the gap's end
        guess += MINUTE
    return guess


def build_timeline(
    tasks: Sequence[Task],
    start: datetime,
    days: int,
    zone: Zone | None = None,
    every_minute_counted: bool = False,
    graph: Chains | None = None,
) -> Timeline:
    """Each task's runs per wall hour of `zone` for `days` days from the local midnight of
    `start` (a fall back's repeated hour holds both passes); a chained task at its root's
    times. `graph`: the whole schedule's chains when `tasks` are some of them."""
    zone = zone or parse_zone("UTC")
    first = zone.wall(start).replace(hour=0, minute=0, second=0, microsecond=0)
    origin = _instant(zone, first)
    end = _instant(zone, first + timedelta(days=days))
    # Each UTC hour of the window, with its wall hour when it is one whole wall hour.
    hours: list[_Hour] = []
    hour = hour_floor(origin)
    while hour < end:
        seg = zone.segment_at(hour)
        whole = (
            seg.offset % HOUR == timedelta(0)
            and (seg.start is None or seg.start <= hour)
            and (seg.end is None or seg.end >= hour + HOUR)
        )
        hours.append((hour, seg.wall(hour) if whole else None))
        hour += HOUR
    lanes = []
    same: dict[object, tuple[int, ...]] = {}  # tasks with one schedule and zone count once
    if graph is None and any(task.chained for task in tasks):
        graph = Chains(tasks)
    for task in tasks:
        # A chained task counts at its root's times; in a cycle (refused) it is held.
        timed = (graph.timed(task.name) if graph and task.chained else task) or task
        held = graph.held(task.name) if graph else task.paused
        counts = (0,) * (days * 24) if held else same.get(timed.firing_key)
        if counts is None:
            counts = same[timed.firing_key] = _count(timed, zone, hours, first, days)
        counted = every_minute_counted or not every_minute(timed)
        lanes.append(TaskLane(task, counts, counted))
    return Timeline(first, days, tuple(lanes), zone)


def _count(
    task: Task, zone: Zone, hours: list[_Hour], first: datetime, days: int
) -> tuple[int, ...]:
    counts = [0] * (days * 24)
    for hour, wall in hours:
        minutes = hour_minutes(task, hour)
        if wall is not None and minutes:
            runs = [(wall, len(minutes))]
        else:  # a seam or a half-hour offset: minute by minute
            runs = [(zone.wall(hour + minute * MINUTE), 1) for minute in minutes]
        for at, count in runs:
            index = (at - first).days * 24 + at.hour
            if 0 <= index < len(counts):
                counts[index] += count
    return tuple(counts)


@dataclass(frozen=True)
class Herd:
    """Tasks that start in the same minute: the first such minute and how often it recurs."""

    first: datetime
    tasks: tuple[str, ...]
    minutes: int  # how many minutes in the window this same set of tasks shares


def find_herds(tasks: Sequence[Task], start: datetime, end: datetime, limit: int) -> list[Herd]:
    """Minutes in [start, end) where more than `limit` tasks fire, grouped by the set of tasks."""
    # `jitter` spreads a task's start over its window, so it joins no herd.
    counted = [t for t in tasks if not t.paused and not t.jitter]
    if len(counted) <= limit:
        return []
    # Tasks with the same schedule in the same zone fire together: walk each pair once.
    together: dict[object, list[Task]] = {}
    for task in counted:
        together.setdefault(task.firing_key, []).append(task)
    names = [[t.name for t in group] for group in together.values()]
    minutes = [_group_minutes(group[0], start, end) for group in together.values()]
    crowd: Counter[datetime] = Counter()
    for group_names, group_minutes in zip(names, minutes, strict=True):
        crowd.update(dict.fromkeys(group_minutes, len(group_names)))
    members: dict[datetime, list[int]] = {when: [] for when, n in crowd.items() if n > limit}
    for index, group_minutes in enumerate(minutes):
        for when in group_minutes:
            if when in members:
                members[when].append(index)
    return _herds(members, names)


def _group_minutes(task: Task, start: datetime, end: datetime) -> list[datetime]:
    if task.cron is None:
        if task.at is None:  # start-only: no occurrences
            return []
        when = minute_floor(task.at)
        return [when] if start <= when < end else []
    return firing_minutes(task.cron, task.zone, start, end)


def _herds(members: dict[datetime, list[int]], names: list[list[str]]) -> list[Herd]:
    """The crowded minutes, in order, grouped by the set of task names."""
    groups: dict[tuple[str, ...], Herd] = {}
    keys: dict[tuple[int, ...], tuple[str, ...]] = {}
    for when in sorted(members):
        ids = tuple(members[when])
        key = keys.get(ids)
        if key is None:
            key = keys[ids] = tuple(sorted(n for i in ids for n in names[i]))
        found = groups.get(key)
        groups[key] = (
            Herd(when, key, 1) if found is None else Herd(found.first, key, found.minutes + 1)
        )
    return sorted(groups.values(), key=lambda h: h.first)


HERD_WINDOW = timedelta(days=7)


def herd_warnings(
    tasks: Sequence[Task], now: datetime, limit: int
) -> list[tuple[Task, str, tuple[str, ...]]]:
    """For `check`: each herd in the next 7 days as (its first task, the message, its tasks)."""
    by_name = {t.name: t for t in tasks}
    found = []
    for herd in find_herds(tasks, now, now + HERD_WINDOW, limit):
        names = ", ".join(herd.tasks)
        more = herd.minutes - 1
        again = f" (and {more} more minute{'s' * (more != 1)} in the next 7 days)" if more else ""
        message = (
            f"{len(herd.tasks)} tasks start in the same minute, {format_utc(herd.first)}{again}, "
            f"more than herd_limit {limit}: {names}; give some of them a `jitter` "
            '(e.g. jitter = "5m") or move them to other minutes'
        )
        found.append((by_name[herd.tasks[0]], message, herd.tasks))
    return found
