"""What a run at time T must deal with: the occurrences in (last, T] and the misfire policy.

The occurrences one minute carries after a DST gap are the minute plus 0, 1, 2 ... seconds,
in wall-time order: distinct claims and history rows, the same on every machine."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cronctl.core.minutes import MINUTE, minute_floor
from cronctl.core.model import Task

SECOND = timedelta(seconds=1)
CATCH_UP_LIMIT = 100
COUNT_LIMIT = 1000
# Occurrences recorded one by one in history; beyond this only the count grows.
MISSED_ROWS = 100
#: on_one_server claims are swept once their occurrence is this old.
CLAIM_SWEEP_AGE = timedelta(days=7)
#: An on_one_server task never runs an occurrence older than this, whatever its misfire policy:
#: past the sweep, another machine may have run it and left no claim. The day of margin covers
#: the hourly sweep and clocks that differ between machines (each sweeps by its own clock).
CLAIM_REACH = CLAIM_SWEEP_AGE - timedelta(days=1)
# Up to this wide a window, minutes are tested one by one; a wider one is searched.
_SCAN_LIMIT = timedelta(hours=3)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Previous:
    """What this machine remembers of a task."""

    fingerprint: str
    last_occurrence: datetime
    done: bool = False


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Plan:
    task: Task
    run: list[datetime] = field(default_factory=list)
    missed: list[datetime] = field(default_factory=list)
    missed_count: int = 0
    last_occurrence: datetime | None = None
    done: bool = False
    restarted: bool = False
    clock_behind: timedelta | None = None
    # The start of the window scanned, (since, last_occurrence]: None when none was (the clock
    # behind, a one-shot done). A quiet minute's shortcut (run/quiet.py) builds on it.
    since: datetime | None = None


def plan(task: Task, previous: Previous | None, now: datetime) -> Plan:
    minute = minute_floor(now)
    restarted = previous is None or previous.fingerprint != task.fingerprint
    if restarted or previous is None:
        # First sight (or a changed schedule): this minute counts, earlier ones never do.
        last = minute - MINUTE
        if previous is not None:
            # ...unless this machine already dealt with it: an edit within a minute that ran,
            # or after the clock stepped back, must not run an occurrence again.
            last = max(last, previous.last_occurrence)
        done = False
    else:
        last, done = previous.last_occurrence, previous.done
    if minute <= last:
        # The clock went back: never deal with an occurrence twice; wait for it to catch up.
        behind = last - minute
        return Plan(task, last_occurrence=last, done=done, clock_behind=behind or None)
    if done:
        return Plan(task, last_occurrence=minute, done=True, restarted=restarted)
    found, count = occurrences(task, last, minute)
    if task.misfire == "skip":
        keep = [t for t in found if minute_floor(t) == minute][:1]
    elif task.misfire == "catch-up":
        keep = found[-CATCH_UP_LIMIT:]
    else:  # the latest instant, once: its first identity (the whole minute)
        keep = [t for t in found if minute_floor(t) == minute_floor(found[-1])][:1]
    if task.misfire_grace is not None:
        # Older than the grace when its run would start: that start is now.
        keep = [t for t in keep if now - t <= task.misfire_grace]
    if task.on_one_server:
        keep = [t for t in keep if now - t <= CLAIM_REACH]
    kept = set(keep)
    missed = [t for t in found if t not in kept]
    return Plan(
        task,
        run=keep,
        missed=missed[-MISSED_ROWS:],
        missed_count=count - len(keep),
        last_occurrence=minute,
        done=task.at is not None and task.at <= minute,
        restarted=restarted,
        since=last,
    )


def occurrences(task: Task, last: datetime, minute: datetime) -> tuple[list[datetime], int]:
    """Occurrences in (last, minute] and their count, exact up to COUNT_LIMIT; beyond, the
    count is estimated from the period, and the list holds the first and the newest ones."""
    if task.cron is None:
        if task.at is None:  # start-only: `work` runs it when it starts, never on a minute
            return [], 0
        return ([task.at], 1) if last < task.at <= minute else ([], 0)
    if minute - last <= _SCAN_LIMIT:
        probes = (last + n * MINUTE for n in range(1, (minute - last) // MINUTE + 1))
        found = [instant for probe in probes for instant in identities(task, probe)]
        return found, len(found)
    first = _forward(task, last, minute, COUNT_LIMIT + 1)
    if len(first) <= COUNT_LIMIT:
        return first, len(first)
    period = (first[-1] - first[0]) / (len(first) - 1)
    newest = _newest(task, max(last, first[-1]), minute)
    estimate = len(first) + round((minute - first[-1]) / period)
    return first[:MISSED_ROWS] + [t for t in newest if t > first[-1]], estimate


def _forward(task: Task, last: datetime, minute: datetime, limit: int) -> list[datetime]:
    found: list[datetime] = []
    cursor = last
    while len(found) < limit:
        nxt = task.next_run(cursor)
        if nxt is None or nxt > minute:
            break
        found.extend(identities(task, nxt) or [nxt])
        cursor = nxt
    return found


def identities(task: Task, minute: datetime) -> list[datetime]:
    """The occurrences at a UTC minute: the minute itself, plus a second per further one."""
    return [minute + i * SECOND for i in range(len(task.walls_at(minute)))]


def _newest(task: Task, floor: datetime, minute: datetime) -> list[datetime]:
    """The newest CATCH_UP_LIMIT occurrences in (floor, minute], searched back in widening steps."""
    for span in (timedelta(hours=6), timedelta(days=2), timedelta(days=60), timedelta(days=800)):
        start = max(floor, minute - span)
        found = _forward(task, start, minute, COUNT_LIMIT * 10)
        if len(found) >= CATCH_UP_LIMIT or start == floor:
            return found[-CATCH_UP_LIMIT:]
    return _forward(task, floor, minute, COUNT_LIMIT * 10)[-CATCH_UP_LIMIT:]
