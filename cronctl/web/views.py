"""The dashboard's data as plain values (no HTTP, no HTML): from this machine's state or,
when the coordination store keeps every machine's runs, from the store."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

from cronctl.commands.operate import nothing_ran, pause_reason, reading_store
from cronctl.commands.schedule import NextRuns
from cronctl.coord.history import NAMED_FAILING, HostLatest, RunQuery, TaskLatest, fleet_history_of
from cronctl.coord.outbox import OUTPUT_TAIL_BYTES
from cronctl.coord.port import Coordinator, PauseInfo
from cronctl.core.calendar import Timeline, build_timeline
from cronctl.core.chains import Chains
from cronctl.core.describe import describe, gap_note
from cronctl.core.model import Schedule, Task, format_utc, runs_on
from cronctl.core.opskeys import overdue_since
from cronctl.core.runs import LOG_RETENTION, NOT_OK, OUTCOMES, TRIGGERS, RunRow
from cronctl.edge.process.logfiles import log_chunks, log_file
from cronctl.edge.state.store import TaskFacts
from cronctl.errors import CronctlError, UsageError

#: How much of a run's log the run page shows: the end of it, where failures say why.
OUTPUT_BYTES = 64 * 1024
#: Records read from the fleet store for the views that filter in memory (running now, hosts).
FLEET_WINDOW = 5000
_LOG_GONE = f"the log is gone (kept {LOG_RETENTION.days} days); its tail"


class NotFound(UsageError):
    """The dashboard answers 404."""


@dataclass(frozen=True, slots=True)
class TaskSummary:
    task: Task
    words: str
    next_run: datetime | None
    paused: bool
    pause: PauseInfo | None
    pause_reason: str | None
    last: tuple[RunRow, ...]  # the latest finished run on each host, by host
    running: tuple[RunRow, ...]  # running now (since when, where)
    failures: int  # failures in a row (this machine), or hosts whose last run failed (fleet)
    overdue: datetime | None
    hosts: TaskLatest | None = None  # the fleet overview's hosts, counted (``last`` empty)

    @property
    def state(self) -> str:
        if self.failures:
            return "failing"
        if self.overdue is not None:
            return "overdue"
        if self.running:
            return "running"
        if self.paused:
            return "paused"
        ran = self.hosts is not None and (self.hosts.ok_hosts or self.hosts.not_ok_hosts)
        return "ok" if self.last or ran else "new"


STATES = ("failing", "overdue", "running", "paused", "ok", "new")


@dataclass(frozen=True, slots=True)
class Filters:
    host: str | None = None
    state: str | None = None
    name: str | None = None

    def keep(self, row: TaskSummary) -> bool:
        if self.name and self.name.lower() not in row.task.name.lower():
            return False
        if self.state and row.state != self.state:
            return False
        return not self.host or any(r.host == self.host for r in (*row.last, *row.running))


@dataclass(frozen=True, slots=True)
class Overview:
    tasks: list[TaskSummary]
    hosts: list[str]
    total: int
    nothing_ran: Path | None = None  # the state dir, when nothing has run with it yet


@dataclass(frozen=True, slots=True)
class Upcoming:
    at: datetime
    wall: datetime
    dst_note: str | None


@dataclass(frozen=True, slots=True)
class HistoryPage:
    runs: list[RunRow]  # newest first
    after: tuple[datetime, str] | None  # the cursor of the next (older) page


@dataclass(frozen=True, slots=True)
class TaskPage:
    summary: TaskSummary
    upcoming: list[Upcoming]
    timeline: Timeline
    history: HistoryPage
    durations: list[tuple[datetime, float]]  # oldest first
    chains: Chains | None = None  # the schedule's chains when the task is in one


@dataclass(frozen=True, slots=True)
class RunPage:
    run: RunRow
    output: str  # the end of the log (this machine) or the published tail (fleet)
    truncated: bool
    where: str  # where the output comes from, for the page to say


@dataclass(frozen=True, slots=True)
class HostRow(HostLatest):
    version: str | None = None  # its cronctl's, at its latest check-in with the store
    clock_skew_s: float | None = None  # its clock minus the store's then (None: no store)


@dataclass(frozen=True, slots=True)
class HistoryQuery(RunQuery):
    def __post_init__(self) -> None:
        if self.outcome is not None and self.outcome not in OUTCOMES:
            raise UsageError(f"unknown outcome {self.outcome!r}; one of {sorted(OUTCOMES)}")
        if self.trigger is not None and self.trigger not in TRIGGERS:
            raise UsageError(f"unknown trigger {self.trigger!r}; one of {', '.join(TRIGGERS)}")
        if not 1 <= self.limit <= 1000:
            raise UsageError(f"limit must be 1 to 1000, got {self.limit}")


class Dashboard:
    def __init__(self, schedule: Schedule, state_dir: Path, coord: Coordinator, host: str) -> None:
        self.schedule = schedule
        self.state_dir = state_dir
        self.coord = coord
        self.host = host
        self.fleet = coord.fleet is not None

    def overview(self, now: datetime, filters: Filters = Filters()) -> Overview:
        rows = self._rows(now, host=filters.host)
        hosts = {r.host for row in rows for r in (*row.last, *row.running)}
        hosts.update(h.host for row in rows if row.hosts is not None for h in row.hosts.not_ok)
        if self.fleet:  # most hosts are counted, not named: the check-ins name them
            hosts.update(h.host for h in fleet_history_of(self.coord).fleet_hosts())
        kept = sorted(
            filter(filters.keep, rows), key=lambda r: (STATES.index(r.state), r.task.name)
        )
        fresh = not self.fleet and nothing_ran(self.state_dir)
        return Overview(kept, sorted(hosts), len(rows), self.state_dir if fresh else None)

    def _rows(
        self, now: datetime, tasks: Sequence[Task] | None = None, host: str | None = None
    ) -> list[TaskSummary]:
        """Every task's row (of ``tasks``, else every one), in a few statements for all
        (docs/dashboard.md#speed); the fleet's whole overview counts hosts rather than read."""
        facts: dict[str, TaskFacts] = {}
        latest: dict[str, list[RunRow]] = {}
        counted: dict[str, TaskLatest] = {}
        if not self.fleet:
            with reading_store(self.state_dir) as store:
                facts = store.latest_facts([t.name for t in tasks or self.schedule.tasks])
                running = _running(store.unfinished_runs(None))
        else:
            fleet = fleet_history_of(self.coord)
            if tasks is not None and len(tasks) == 1:
                latest[tasks[0].name] = fleet.fleet_latest(task=tasks[0].name)
            elif host is not None:
                latest = _grouped(fleet.fleet_latest(host=host), "task")
            else:
                counted = {s.task: s for s in fleet.fleet_summary(sorted(NOT_OK))}
            running = _running(fleet.fleet_history(None, None, FLEET_WINDOW))
        pauses = self.coord.paused_tasks()
        nexts = NextRuns()
        rows = []
        for task in self.schedule.tasks if tasks is None else tasks:
            pause = pauses.get(task.name)
            paused = task.paused or pause is not None
            due = not paused and (self.fleet or runs_on(task, self.host))
            fact = facts.get(task.name)
            last = tuple(sorted(latest.get(task.name, []), key=lambda r: r.host))
            if fact is not None and fact.last_run:
                last = (fact.last_run,)
            failures = fact.consecutive_failures if fact else sum(r.outcome in NOT_OK for r in last)
            if (hosts := counted.get(task.name)) is not None:
                failures = hosts.failing_hosts
            overdue = None
            if due and fact is not None:
                overdue = overdue_since(task, fact.anchor, None, now, nexts.after)
            rows.append(TaskSummary(
                task=task, words=describe(task), paused=paused, pause=pause,
                pause_reason=pause_reason(task, pause), running=tuple(running.get(task.name, [])),
                next_run=nexts.after(task, now) if due else None, last=last,
                failures=failures, overdue=overdue, hosts=hosts,
            ))  # fmt: skip
        return rows

    def task_page(self, name: str, now: datetime, query: HistoryQuery) -> TaskPage:
        task = self._task(name)
        (summary,) = self._rows(now, [task])
        chained = task.chained or bool(self.schedule.followers(name))
        graph = Chains(self.schedule.tasks) if chained else None
        # A chained task's upcoming runs are its chain's root's occurrences (docs/chains.md).
        runs = graph.occurrences(name, now, 10) if graph else task.next_runs(now, 10)
        upcoming = [Upcoming(at, task.zone.wall(at), _dst_note(task, at)) for at in runs]
        page = self.history(replace(query, task=name))
        recent = self.history(HistoryQuery(task=name, limit=200)).runs
        durations = [
            (r.occurrence, r.duration_s) for r in reversed(recent) if r.duration_s is not None
        ]
        week = build_timeline([task], now, 7, task.zone, every_minute_counted=True, graph=graph)
        return TaskPage(summary, upcoming, week, page, durations, graph)

    def _task(self, name: str) -> Task:
        try:
            return self.schedule.task(name)
        except KeyError:
            raise NotFound(f"no task named {name!r} in the schedule") from None

    def history(self, query: HistoryQuery) -> HistoryPage:
        # One more than a page: whether there is a next one.
        asked = RunQuery(**asdict(query) | {"limit": query.limit + 1})
        if self.fleet:
            runs = fleet_history_of(self.coord).fleet_page(asked)
        else:
            with reading_store(self.state_dir) as store:
                runs = store.history_page(**asdict(asked))
        more = len(runs) > query.limit
        runs = runs[: query.limit]
        after = (runs[-1].occurrence, runs[-1].id) if more and runs else None
        return HistoryPage(runs, after)

    def run_page(self, run_id: str) -> RunPage:
        run = fleet_history_of(self.coord).fleet_run(run_id) if self.fleet else self._stored(run_id)
        if run is None:
            raise NotFound(f"no run {run_id!r}")
        if self.fleet and run.host == self.host:
            # The store keeps no log path: this machine's record names it, if one is usable.
            with contextlib.suppress(CronctlError):
                if (local := self._stored(run.id)) is not None:
                    run = replace(run, log_path=local.log_path)
        if run.host != self.host or run.log_path is None:
            return RunPage(run, run.tail, False, self._tail_source(run))
        path = log_file(self.state_dir, run.task, run.log_path)
        if path is None or not os.path.lexists(path):
            return RunPage(run, run.tail, False, _LOG_GONE)
        data, truncated = b"", False
        try:
            for chunk in log_chunks(path):
                data = (data + chunk)[-OUTPUT_BYTES:]
                truncated = truncated or len(data) == OUTPUT_BYTES
        except FileNotFoundError:
            return RunPage(run, run.tail, False, _LOG_GONE)
        return RunPage(run, data.decode("utf-8", "replace"), truncated, "this machine's log")

    def _tail_source(self, run: RunRow) -> str:
        if not self.fleet:
            return "the tail the run recorded" if run.tail else "nothing was recorded"
        if run.tail:
            return f"the last {OUTPUT_TAIL_BYTES // 1024} KB of its log, published to the store"
        if run.outcome in NOT_OK:
            return "no output was published"
        return "only runs that did not end well publish their output to the store"

    def _stored(self, run_id: str) -> RunRow | None:
        with reading_store(self.state_dir) as store:
            return store.get_run(run_id)

    def hosts(self) -> list[HostRow]:
        """Each host that ran a task (or, in a fleet, checked in), by its latest runs."""
        if self.fleet:
            fleet = fleet_history_of(self.coord)
            by_host = {h.host: h for h in fleet.fleet_host_summary(sorted(NOT_OK))}
            check_ins = {h.host: h for h in fleet.fleet_hosts()}
            rows = []
            for host in sorted(by_host.keys() | check_ins.keys()):
                ran = by_host.get(host) or HostLatest(host, check_ins[host].seen, 0, [], 0)
                row = HostRow(host, ran.last_seen, ran.tasks, ran.failing, ran.failing_total)
                if (ins := check_ins.get(host)) is not None:
                    last = max(ran.last_seen, ins.seen)
                    row = replace(row, last_seen=last, version=ins.version, clock_skew_s=ins.skew_s)
                rows.append(row)
            return rows
        with reading_store(self.state_dir) as store:
            facts = store.latest_facts([t.name for t in self.schedule.tasks])
        latest = [f.last_run for f in facts.values() if f.last_run is not None]
        rows = []
        for host, runs in sorted(_grouped(latest, "host").items()):
            seen = [r.ended or r.started or r.occurrence for r in runs]
            failing = sorted(r.task for r in runs if r.outcome in NOT_OK)
            rows.append(HostRow(host, max(seen), len(runs), failing[:NAMED_FAILING], len(failing)))
        return rows


def _grouped(runs: Iterable[RunRow], by: str) -> dict[str, list[RunRow]]:
    grouped: dict[str, list[RunRow]] = {}
    for run in runs:
        grouped.setdefault(getattr(run, by), []).append(run)
    return grouped


def _running(runs: Iterable[RunRow]) -> dict[str, list[RunRow]]:
    return _grouped((r for r in runs if r.outcome == "running"), "task")


def _dst_note(task: Task, at: datetime) -> str | None:
    walls = task.walls_at(at)
    own = task.zone.wall(at)
    skipped = [w for w in walls if w != own]
    if not skipped:
        return None
    mine = f"{own:%H:%M}" if len(walls) > len(skipped) else None
    return gap_note([f"{w:%H:%M}" for w in skipped], mine, task.misfire)


def cursor(after: tuple[datetime, str]) -> str:
    return f"{format_utc(after[0])}~{after[1]}"


def parse_cursor(text: str | None) -> tuple[datetime, str] | None:
    if not text:
        return None
    when, sep, run_id = text.partition("~")
    try:
        at = datetime.fromisoformat(when)
    except ValueError:
        at = None
    if not sep or not run_id or at is None or at.utcoffset() != timedelta(0):
        raise UsageError(f"bad cursor {text!r}: expected OCCURRENCE~RUN_ID from a page link")
    return at, run_id
