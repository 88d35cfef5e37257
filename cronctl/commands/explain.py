"""`cronctl explain NAME [--at T]` (and the dashboard's): whether a task was (or will be) due
at T, and why it ran or did not. A pure reading: nothing is written, no lock or claim taken."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from cronctl.commands.operate import reading_store
from cronctl.commands.schedule import find_task
from cronctl.coord.port import Coordinator, PauseInfo, StoreUnavailable
from cronctl.core.chains import Chains
from cronctl.core.due import CLAIM_REACH, MISSED_ROWS, identities
from cronctl.core.minutes import MINUTE, minute_floor
from cronctl.core.model import (
    DEFAULT_GROUP_WAIT,
    Schedule,
    Task,
    format_duration,
    format_utc,
    runs_on,
)
from cronctl.core.runs import FINISHED, UNFINISHED, RunRow
from cronctl.core.visible import visible
from cronctl.edge.state.store import Store

#: How far back the previous occurrence is looked for (a yearly task's is within this).
_LOOK_BACK = (timedelta(days=2), timedelta(days=40), timedelta(days=400), timedelta(days=3000))
_Rows = tuple[RunRow, ...]


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why task `task` did (or did not, or will not) run at `at`, as seen by `host`:
    `occurrence` is `at`'s minute when due, else the latest one before; `verdict` is "not-due"
    when `at` is no occurrence, else `fate`, what became of `occurrence` (docs/commands.md),
    which `reasons` back in the order they apply."""

    # In the order of its JSON (cli/explain_cmd.py, as_dict).
    task: str
    at: datetime
    host: str
    due: bool
    verdict: str
    fate: str
    occurrence: datetime | None
    previous: datetime | None
    next: datetime | None
    misfire: str
    dst: str | None = None
    paused_in_file: bool = False
    pause: PauseInfo | None = None
    runs: tuple[RunRow, ...] = ()
    instead: RunRow | None = None  # for a missed occurrence: the run its window ran
    reasons: tuple[str, ...] = ()


def explain_here(
    schedule: Schedule,
    state_dir: Path,
    coord: Coordinator,
    name: str,
    at: datetime,
    *,
    host: str,
    now: datetime,
) -> Explanation:
    """Task `name` at `at` (`now`: the real clock, to tell a time still ahead), from this
    machine's store, opened for reading only: none is created for the question."""
    with reading_store(state_dir) as store:
        task = find_task(schedule, name)
        minute = minute_floor(at)
        # A chained task's occurrences are its chain's root's (in a cycle: none but its own).
        timed = (Chains(schedule.tasks).timed(task.name) if task.chained else None) or task
        due = bool(identities(timed, minute))
        previous = _previous(timed, minute)
        upcoming = timed.next_run(minute)
        occurrence = minute if due else previous
        pause: PauseInfo | None = None
        with contextlib.suppress(StoreUnavailable):
            pause = coord.paused_tasks().get(task.name)
        lead = _due_line(task, at, due, previous, upcoming)
        rows: tuple[RunRow, ...] = ()
        instead = None
        why: tuple[str, ...]
        if not runs_on(task, host):
            said = f"hosts = [{', '.join(task.hosts)}] leaves this machine ({host}) out"
            fate, why = "host-not-matched", (f"{said}: it never runs here",)
        elif occurrence is None:
            fate, why = "not-due", ()
        else:
            rows = tuple(_rows(store, task.name, occurrence))
            if task.chained:
                fate, why = _chained(schedule, store, coord, task, occurrence, rows, pause, host)
            elif rows:
                fate, why, instead = _verdict(task, occurrence, rows, store, pause)
            else:
                fate, why = _unrecorded(task, occurrence, store, now, pause)
            if not due:
                why = (f"its previous occurrence, {format_utc(occurrence)}: {why[0]}", *why[1:])
        dst = None if occurrence is None else dst_rule(task, occurrence)
        verdict = fate if due or fate == "host-not-matched" else "not-due"
        return Explanation(
            task=task.name,
            at=at,
            host=host,
            due=due,
            occurrence=occurrence,
            previous=previous,
            next=upcoming,
            verdict=verdict,
            fate=fate,
            reasons=(lead, *why, *(() if dst is None else (dst,))),
            misfire=task.misfire,
            dst=dst,
            pause=pause,
            paused_in_file=task.paused,
            runs=rows,
            instead=instead,
        )


def _previous(task: Task, minute: datetime) -> datetime | None:
    """The latest occurrence strictly before `minute` (None: none within ~8 years)."""
    for span in _LOOK_BACK:
        cursor, last = minute - span, None
        while (nxt := task.next_run(cursor)) is not None and nxt < minute:
            last, cursor = nxt, nxt
        if last is not None:
            return last
    return None


def _chained(
    schedule: Schedule,
    store: Store,
    coord: Coordinator,
    task: Task,
    occurrence: datetime,
    rows: tuple[RunRow, ...],
    pause: PauseInfo | None,
    host: str,
) -> tuple[str, tuple[str, ...]]:
    """A chained task's fate at an upstream occurrence: how each upstream run ended, and after."""
    ends = _upstream_ends(store, coord, task, occurrence, host)
    said = []
    for name in task.after:
        end = ends.get(name)
        if end is None:
            said.append(f"{name} has not ended for {format_utc(occurrence)}")
            continue
        code = f" (exit {end.exit_code})" if end.exit_code is not None else ""
        where = "" if end.host == host else f" on {visible(end.host, one_line=True)}"
        said.append(f"{name} {end.outcome}{where} at {format_utc(occurrence)}{code}")
    followers = [t for t in schedule.followers(task.after[0]) if t.name != task.name]
    siblings = [f"{t.name} {_fate_word(_rows(store, t.name, occurrence))}" for t in followers]
    own = [r for r in rows if r.trigger == "after"]
    if own:
        fate, why = _row_verdict(task, max(own, key=_row_key), pause)
        runs = f"{task.name} {_fate_word(own)}"
    elif len(ends) < len(task.after):
        fate, why = "waiting", (f"it runs once {', '.join(task.after)} ended",)
        runs = f"{task.name} waits"
    else:
        fate = "upstream"
        why = (f"it runs only after {' and '.join(task.after)} ended {task.after_outcome}",)
        runs = f"{task.name} did not run"
    lead = f"{'; '.join(said)}: {'; '.join([runs, *siblings])}"
    return fate, (lead, *why)


def _upstream_ends(
    store: Store, coord: Coordinator, task: Task, occurrence: datetime, host: str
) -> dict[str, RunRow]:
    """Each upstream task's run ended for ``occurrence``: this machine's, else another's."""
    found: dict[str, RunRow] = {}
    for name in task.after:
        ended = [r for r in _rows(store, name, occurrence) if r.outcome in FINISHED]
        if ended:
            found[name] = max(ended, key=_row_key)
    missing = set(task.after) - set(found)
    if missing:
        try:
            others = coord.chain_ends(missing, occurrence)
        except (StoreUnavailable, OSError):
            others = []
        for end in others:
            outcome = next((o for o in FINISHED if o == end.outcome), None)
            mine = task.on_one_server or end.host == host
            if outcome is not None and end.occurrence == occurrence and mine:
                found[end.task] = RunRow(
                    end.run_id, end.task, end.occurrence, outcome, end.host, ended=end.ended
                )
    return found


def _fate_word(rows: list[RunRow] | tuple[RunRow, ...]) -> str:
    chained = [r for r in rows if r.trigger == "after"]
    if not chained:
        return "did not run"
    last = max(chained, key=_row_key)
    return "ran" if last.outcome in FINISHED else last.outcome


def _due_line(
    task: Task, at: datetime, due: bool, previous: datetime | None, upcoming: datetime | None
) -> str:
    when = format_utc(minute_floor(at))
    if task.chained:
        state = "an occurrence" if due else "no occurrence"
        return f"{when} is {state} of its upstream tasks: it runs after {', '.join(task.after)}"
    if task.start_only:
        return (
            f"not due at {when}: a start-up task (on_start = true, no schedule) runs only "
            "when cronctl work starts"
        )
    prev = format_utc(previous) if previous else "none"
    nxt = format_utc(upcoming) if upcoming else "none"
    if due:
        return f"due at {when} ({task.schedule}); previous {prev}, next {nxt}"
    return f"not due at {when} ({task.schedule}): previous occurrence {prev}, next {nxt}"


def _rows(store: Store, task: str, occurrence: datetime) -> list[RunRow]:
    """The rows of the occurrence's minute (several after a DST gap), oldest attempt first."""
    start = minute_floor(occurrence)
    return sorted(store.runs_between(task, start, start + MINUTE), key=_row_key)


def _row_key(row: RunRow) -> tuple[datetime, int]:
    return (row.occurrence, row.attempt)


def _verdict(
    task: Task, occurrence: datetime, rows: _Rows, store: Store, pause: PauseInfo | None
) -> tuple[str, tuple[str, ...], RunRow | None]:
    # A manual run (`cronctl exec`) in the same minute is not the scheduled occurrence's.
    scheduled = [r for r in rows if r.trigger == "schedule"] or list(rows)
    settled = [r for r in scheduled if r.outcome != "missed"]
    if not settled:  # the run that dealt with the same window: the first settled one after
        reach = (occurrence + timedelta(seconds=1), occurrence + CLAIM_REACH)
        later = [r for r in store.runs_between(task.name, *reach) if r.outcome != "missed"]
        instead = min(later, key=_row_key, default=None)
        return "missed", (_missed_line(task, occurrence, instead),), instead
    last = max(settled, key=_row_key)
    return (*_row_verdict(task, last, pause), None)


def _row_verdict(task: Task, row: RunRow, pause: PauseInfo | None) -> tuple[str, tuple[str, ...]]:
    if row.outcome in UNFINISHED:
        return "running", (f"{row.outcome} on {row.host} since {_when(row.started)}",)
    if not row.outcome.startswith("skipped: "):
        return "ran", (_ran_line(row),)
    conds = [f"when = {task.when!r} (must exit 0)"] if task.when else []
    conds += [f"skip = {task.skip!r} (must not exit 0)"] if task.skip else []
    holder = f" ({row.message})" if row.message else ""
    wait = format_duration(DEFAULT_GROUP_WAIT)
    fate, why = {
        "skipped: paused": ("paused", "the task was paused"),
        "skipped: condition": ("condition", f"a condition was false: {'; '.join(conds)}"),
        "skipped: another server": (
            "another-server",
            "another machine claimed this occurrence first (on_one_server = true: one machine "
            "of those sharing the lock directory or coordination store runs it)",
        ),
        "skipped: still running": (
            "still-running",
            f"the previous run still held the overlap lock{holder} (without_overlapping = true)",
        ),
        "skipped: group full": (
            "group-full",
            f"group full: {row.message or f'group {task.group} was full'}; a task of a full "
            f"group waits for a slot until its misfire_grace ({wait} without one) after the "
            "occurrence",
        ),
    }[row.outcome]
    paused = (_pause_line(task, pause),) if fate == "paused" else ()
    return fate, (f"skipped on {row.host}: {why}", *paused)


def _ran_line(row: RunRow) -> str:
    code = "" if row.exit_code is None else f", exit code {row.exit_code}"
    took = "" if row.duration_s is None else f", took {row.duration_s:.2f}s"
    attempt = f", attempt {row.attempt}" if row.attempt > 1 else ""
    manual = " (manual, cronctl exec)" if row.trigger == "manual" else ""
    log = (
        f"; log {row.log_path} (`cronctl logs {row.task} --run {row.id}`)"
        if row.log_path
        else "; it printed nothing (no log kept)"
    )
    msg = f"; {row.message}" if row.message else ""
    return (
        f"ran on {row.host}{manual} at {_when(row.started)}: {row.outcome}{code}{took}{attempt}"
        f"{msg}{log}"
    )


def _when(value: datetime | None) -> str:
    return format_utc(value) if value is not None else "an unknown time"


def _pause_line(task: Task, pause: PauseInfo | None) -> str:
    if task.paused:
        return f"paused = true in {task.source}"
    if pause is None:
        return "no pause is set now (it was resumed since)"
    who = [
        f"by {visible(pause.user, one_line=True)}" if pause.user else "",
        f"on {visible(pause.host, one_line=True)}" if pause.host else "",
        f"since {format_utc(pause.since)}" if pause.since else "",
    ]
    why = f": {visible(pause.reason, one_line=True)}" if pause.reason else " (no reason given)"
    said = " ".join(filter(None, who))
    return f"paused {said}{why}; `cronctl resume {task.name}` undoes it".replace("  ", " ")


def _unrecorded(
    task: Task, occurrence: datetime, store: Store, now: datetime, pause: PauseInfo | None
) -> tuple[str, tuple[str, ...]]:
    """No row for the occurrence: still ahead, not yet dealt with, or dealt with silently."""
    state = store.states().get(task.name)
    if occurrence > now:
        ahead = f"{format_utc(occurrence)} is still ahead"
        if task.paused or pause is not None:
            return "paused", (ahead, "it would be skipped: " + _pause_line(task, pause))
        return "not-yet", (ahead,)
    if state is None or state.last_occurrence < occurrence:
        dealt = format_utc(state.last_occurrence) if state else "never"
        why = (
            f"no `cronctl run` on this machine has dealt with it yet (last minute dealt with: "
            f"{dealt}): is the crontab line or `cronctl work` running here, with this state "
            "directory?"
        )
        return "not-dealt-with", (why,)
    first = store.first_occurrence(task.name)
    if first is None or first > occurrence:
        why = (
            "nothing was recorded for it: this machine first dealt with the task after it "
            "(occurrences before a task is first seen, or before its schedule last changed, "
            "never count)"
        )
        return "before-first-seen", (why,)
    beyond = ""
    if state.missed_total:
        beyond = (
            f", or it was one of a long window's missed ones beyond the {MISSED_ROWS} "
            f"recorded one by one ({state.missed_total} missed in all)"
        )
    why = (
        "nothing was recorded for it: the task's schedule changed after it (earlier "
        f"occurrences never count){beyond}"
    )
    return "not-counted", (why,)


def _missed_line(task: Task, occurrence: datetime, instead: RunRow | None) -> str:
    policy = {
        "coalesce": "misfire = coalesce (the default): a late run runs the latest occurrence "
        "of its window once and records the earlier ones as missed",
        "skip": "misfire = skip: only an occurrence in the very minute of the run runs; one "
        "found late is recorded as missed",
        "catch-up": "misfire = catch-up: runs each occurrence of the window (up to 100); "
        "this one was beyond that or beyond its grace",
    }[task.misfire]
    grace = ""
    if task.misfire_grace is not None:
        grace = f"; misfire_grace = {format_duration(task.misfire_grace)} drops any older"
    then = ""
    if instead is not None:
        then = f"; the window ran {format_utc(instead.occurrence)} instead ({instead.outcome})"
    return (
        f"missed: no `cronctl run` dealt with it in its minute (the machine was off, or "
        f"cron did not start cronctl); {policy}{grace}{then}"
    )


def dst_rule(task: Task, occurrence: datetime) -> str | None:
    """The daylight-saving rule that applied to the occurrence, in words (None: none did;
    the rules: docs/dst-debian-cron.md)."""
    if task.cron is None or task.zone.fixed:
        return None
    minute = minute_floor(occurrence)
    walls = task.walls_at(minute)
    seg = task.zone.segment_at(minute)
    gap = seg.gap
    if gap is not None and any(gap[0] <= w < gap[1] for w in walls):
        swallowed = ", ".join(w.strftime("%H:%M") for w in walls if gap[0] <= w < gap[1])
        counted = len(walls) if task.misfire == "catch-up" else 1
        runs = "one run" if counted == 1 else f"{counted} runs"
        return (
            f"daylight saving: {gap[0]:%Y-%m-%d %H:%M}-{gap[1]:%H:%M} never happened in "
            f"{task.zone.name}; its time {swallowed} runs at the first minute after the gap "
            f"({seg.wall(minute):%H:%M} local): {runs} under misfire = {task.misfire}"
        )
    wall = seg.wall(minute)
    repeats = seg.repeats_until
    if repeats is not None and wall < repeats:
        return (
            f"daylight saving: {wall:%H:%M} happened twice in {task.zone.name} on "
            f"{wall:%Y-%m-%d}; this is the second pass (a wildcard schedule runs in both, a "
            "fixed-time one at the first pass only)"
        )
    if seg.end is not None:
        after = task.zone.segment_at(seg.end)
        again = after.repeats_until
        if again is not None and after.wall(seg.end) <= wall < again:
            return (
                f"daylight saving: {wall:%H:%M} happens twice in {task.zone.name} on "
                f"{wall:%Y-%m-%d}; this is the first pass (a fixed-time schedule runs at the "
                "first pass only, a wildcard one in both)"
            )
    return None
