"""The operating keys (hosts, retries, jitter, pings, hooks, notify, ignore_warnings): their
checks, their values on a Task, and the calendar checks `check` adds for them."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from cronctl.core.chains import Chains
from cronctl.core.cronwalk import shortest_wall_gap
from cronctl.core.minutes import MINUTE
from cronctl.core.model import NOTIFY_MODES, Problem, Schedule, Task, format_duration
from cronctl.core.values import Check, check_text, parse_duration
from cronctl.core.warncodes import ignore_problem
from cronctl.core.zones import occurrences_after, transitions
from cronctl.errors import DurationError

MAX_RETRIES = 10
# Host name characters plus the glob's own: a pattern with anything else can never match.
# (Compiled on first use: `run` imports this module every minute.)
_HOST_PATTERN = r"^[A-Za-z0-9._*?\[\]!-]+$"
OPS_KEYS: dict[str, Check] = {
    "hosts": ("str_list", 'an array of host name patterns, e.g. ["web-*", "db1"]'),
    "retries": ("int", "an integer 0-10"),
    "retry_delay": ("str", 'a duration string such as "30s"'),
    "jitter": ("str", 'a duration string such as "5m"'),
    "ping_url": ("str", 'a URL string such as "https://hc-ping.com/UUID"'),
    "on_failure": ("str", "a shell command string"),
    "on_success": ("str", "a shell command string"),
    "notify": ("str", 'one of "always", "change"'),
    "ignore_warnings": ("str_list", 'an array of warning codes, e.g. ["dst-gap"]'),
}


def ops_value_problem(key: str, value: Any) -> tuple[str, str] | None:
    """Value checks of an operating key whose type is right: (message, code) or None."""
    if key in ("retry_delay", "jitter"):
        try:
            parse_duration(value)
        except DurationError as exc:
            return f"{key!r}: {exc}", "bad-duration"
    elif key == "retries" and not 0 <= value <= MAX_RETRIES:
        return f"'retries' must be 0-{MAX_RETRIES}, not {value}", "bad-value"
    elif key == "notify" and value not in NOTIFY_MODES:
        return f'notify {value!r} is not one of "always", "change"', "bad-value"
    elif key in ("on_failure", "on_success") and not value.strip():
        return f"{key!r} must not be empty", "bad-value"
    elif key in ("on_failure", "on_success") and (bad := check_text(key, value)):
        return bad, "bad-value"
    elif key == "ping_url" and (bad := _url_problem(value)):
        return bad, "bad-url"
    elif key == "hosts" and (bad := _hosts_problem(value)):
        return bad, "bad-hosts"
    elif key == "ignore_warnings":
        return ignore_problem(value)
    return None


#: A ping URL longer than this is refused: healthchecks.io's are under 100 characters, and a
#: server may refuse a long request line on every ping, which check would never see.
MAX_URL = 2048


def _url_problem(url: str) -> str | None:
    """Everything a ping would trip on later, found here: no URL reaches a run that the run
    cannot send."""
    example = 'e.g. "https://hc-ping.com/UUID"'
    if len(url) > MAX_URL:
        return f"'ping_url' is longer than {MAX_URL} characters"
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        return "'ping_url' must not hold spaces or control characters"
    if not url.isascii():
        return (
            "'ping_url' must be ASCII: percent-encode other characters in the path, and write "
            "an international host name in its xn-- form"
        )
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError as exc:  # "Invalid IPv6 URL", "Port out of range 0-65535", ...
        return f"'ping_url' is not a valid URL ({exc}); {example}"
    if parts.scheme not in ("http", "https") or not host:
        return f"'ping_url' must be an http:// or https:// URL with a host, {example}"
    if port == 0 or (port is None and parts.netloc.endswith(":")):
        return "'ping_url' has an empty or zero port: give 1-65535, or no port"
    if parts.username is not None or parts.password is not None:
        return "'ping_url' must not hold a user or password (user@host): pings send none"
    if parts.fragment or url.endswith("#"):
        return "'ping_url' must not have a #fragment: it is never sent"
    return None


def _hosts_problem(patterns: list[str]) -> str | None:
    if not patterns:
        return (
            "'hosts' is empty, so the task would run nowhere; list patterns such as "
            '["web-*"], or remove the key to run everywhere'
        )
    for pattern in patterns:
        if not re.fullmatch(_HOST_PATTERN, pattern):
            return (
                f"hosts pattern {pattern!r} can never match a host name: use letters, digits, "
                ". - _ and the globs * ? [...]"
            )
        if pattern.count("[") != pattern.count("]"):
            return f"hosts pattern {pattern!r} has an unclosed [...] set"
    return None


#: The Task field of each operating key from its validated value.
OPS_FIELDS: dict[str, Callable[[Any], Any]] = {
    **dict.fromkeys(("hosts", "ignore_warnings"), tuple),
    **dict.fromkeys(("retry_delay", "jitter"), parse_duration),
    **dict.fromkeys(("retries", "ping_url", "on_failure", "on_success", "notify"), lambda v: v),
}

# At most this many occurrences are walked to find a task's shortest period.
_PERIOD_SAMPLE = 1500

# A one-shot task has no period to bound its jitter, and a retry delay is slept inside one
# `run`: past these limits a mistyped unit ("3650d") would keep a process waiting for days.
MAX_ONE_SHOT_JITTER = timedelta(hours=1)
MAX_RETRY_DELAY = timedelta(hours=1)


#: A walk of one task's occurrences: each gap met that is shorter than all before it, in
#: order, and the walk that finds more. Tasks that fire at the same instants
#: (Task.firing_key) share one, walked only as far as the questions asked need.
_Walk = tuple[list[timedelta], Iterator[timedelta]]


def _new_lows(task: Task, now: datetime) -> Iterator[timedelta]:
    assert task.cron is not None
    occurrences = occurrences_after(task.cron, task.zone, now)
    previous = next(occurrences)
    horizon = now + timedelta(days=366)
    low: timedelta | None = None
    for _ in range(_PERIOD_SAMPLE):
        if previous > horizon:
            return
        current = next(occurrences)
        gap, previous = current - previous, current
        if low is None or gap < low:
            low = gap
            yield gap
            if gap <= MINUTE:  # no gap is shorter than a minute
                return


def _shortest(walk: _Walk, below: timedelta | None) -> timedelta | None:
    """The first gap met that is `below` or shorter, else the shortest of the sample."""
    lows, more = walk
    for low in lows:
        if _enough(low, below):
            return low
    for low in more:
        lows.append(low)
        if _enough(low, below):
            return low
    return lows[-1] if lows else None


def _enough(gap: timedelta, below: timedelta | None) -> bool:
    return (below is not None and gap <= below) or gap <= MINUTE


# The calendar days the bound below covers: from before `now`'s date in any zone to well
# past the walk's year and the occurrence that follows it.
_BOUND_FROM = timedelta(days=2)
_BOUND_DAYS = 400
# Its longest wall gap: an occurrence after the last day covered is further than this from
# any the walk starts a gap at.
_BOUND_LONGEST = 30 * 1440


def _apart_beyond(task: Task, now: datetime, below: timedelta, spread: timedelta) -> bool:
    """Whether every gap the walk could meet is longer than `below`, without walking: a
    fixed-time expression's shortest wall gap less the zone's offset spread is a floor."""
    cron = task.cron
    if cron is None or not cron.fixed_time:
        return False
    wall = shortest_wall_gap(cron, (now - _BOUND_FROM).date(), _BOUND_DAYS)
    return wall is not None and wall <= _BOUND_LONGEST and timedelta(minutes=wall) - spread > below


def ops_problems(schedule: Schedule, now: datetime) -> list[Problem]:
    """`check`'s problems with the operating keys that need the calendar: a jitter as long as
    the task's shortest period (an error: one run would be pushed past the next), and retries
    of an unguarded task that can outlast it (a warning)."""
    found: list[Problem] = []
    walks: dict[object, _Walk] = {}
    spreads: dict[str, timedelta] = {}

    def shortest(task: Task, below: timedelta) -> timedelta | None:
        """The shortest period, or None when there is none or it is surely over `below`."""
        if task.cron is None:
            return None
        spread = spreads.get(task.zone.name)
        if spread is None:
            # How far apart the zone's offsets lie: two instants are never nearer than
            # their wall times less this much.
            seams = transitions(task.zone, now, now + timedelta(days=_BOUND_DAYS))
            offsets = [task.zone.segment_at(now).offset, *(s.offset for s in seams)]
            spread = spreads[task.zone.name] = max(offsets) - min(offsets)
        if _apart_beyond(task, now, below, spread):
            return None
        walk = walks.get(task.firing_key)
        if walk is None:
            walk = walks[task.firing_key] = ([], _new_lows(task, now))
        return _shortest(walk, below)

    graph = Chains(schedule.tasks) if any(task.chained for task in schedule.tasks) else None
    for task in schedule.tasks:
        # A chained task is paced by its chain's root: its jitter and retries are bounded
        # by the root's period (in a cycle, which is refused, by none).
        paced = (graph.timed(task.name) if graph and task.chained else task) or task
        one_shot = paced.cron is None and paced.at is not None
        if task.jitter is not None and one_shot and task.jitter > MAX_ONE_SHOT_JITTER:
            message = (
                f"jitter {format_duration(task.jitter)} on a one-shot task is over the limit of "
                f"{format_duration(MAX_ONE_SHOT_JITTER)}: `run` would wait that long before "
                "starting it; make the jitter shorter"
            )
            found.append(_problem(task, "error", "jitter-too-long", message))
        elif task.jitter is not None:
            period = shortest(paced, task.jitter)
            if period is not None and task.jitter >= period:
                message = (
                    f"jitter {format_duration(task.jitter)} is not shorter than the task's "
                    f"shortest period ({format_duration(period)}): a delayed run could reach "
                    "the next one; make the jitter shorter"
                )
                found.append(_problem(task, "error", "jitter-too-long", message))
        if task.retries and task.retry_delay > MAX_RETRY_DELAY:
            message = (
                f"retry_delay {format_duration(task.retry_delay)} is over the limit of "
                f"{format_duration(MAX_RETRY_DELAY)}: one `run` would wait that long "
                "between attempts; make it shorter (it doubles each retry)"
            )
            found.append(_problem(task, "error", "retry-delay-too-long", message))
        if task.retries and not (task.without_overlapping or task.on_one_server):
            total = task.retry_delay * ((1 << task.retries) - 1)
            period = shortest(paced, total)
            if period is not None and total >= period:
                message = (
                    f"its retry delays add up to {format_duration(total)}, not less than its "
                    f"shortest period ({format_duration(period)}): the retries of one "
                    "occurrence may run beside the next; add without_overlapping (retries "
                    "then stop when the next occurrence is due) or shorten retry_delay"
                )
                found.append(_problem(task, "warning", "retries-outlast-period", message))
    return found


def _problem(task: Task, severity: str, code: str, message: str) -> Problem:
    return Problem(str(task.source), task.line, task.name, severity, code, message)


def overdue_since(
    task: Task,
    last_ok: datetime | None,
    first_seen: datetime | None,
    now: datetime,
    next_run: Callable[[Task, datetime], datetime | None] | None = None,
) -> datetime | None:
    """When the task became overdue (README, Overdue), or None: the second occurrence after
    its last `ok` run (else its first seen) plus its misfire grace; never for a one-shot."""
    anchor = last_ok or first_seen
    if task.cron is None or anchor is None:
        return None
    after = next_run or Task.next_run
    first = after(task, anchor)
    second = after(task, first) if first is not None else None
    if second is None:
        return None
    deadline = second + (task.misfire_grace or timedelta(0))
    return deadline if now > deadline else None
