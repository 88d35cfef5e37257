"""The dashboard's overview asks the store a few grouped questions for every task at once;
it must say exactly what `cronctl status` says of each task, asked one task at a time.

A real state file with thousands of rows over many hosts: retries, running and pending
rows, missed and skipped ones, tasks never ok, tasks that never ran, pauses in the file and
in lock_dir, tasks of other hosts, one-shot and start-only tasks, zones with DST."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cronctl.commands.operate import reading_store, status
from cronctl.coord import open_coordinator
from cronctl.coord.port import Coordinator
from cronctl.core.describe import describe
from cronctl.core.model import Schedule
from cronctl.core.runs import OUTCOMES, RunRow
from cronctl.edge.schedfiles import load_paths
from cronctl.edge.state.store import Store
from cronctl.web.views import STATES, Dashboard, HistoryQuery, HostRow, TaskSummary

HOST = "h03"
NOW = datetime(2026, 3, 29, 1, 30, tzinfo=UTC)  # the night Europe/Berlin springs forward
EXPRESSIONS = ("*/5 * * * *", "0 * * * *", "30 2 * * *", "15 9 * * 1-5", "0 0 1 * *", "* * * * *")
ZONES = ("UTC", "Europe/Berlin", "+05:30", "America/New_York")


def _random_schedule(path: Path, rnd: random.Random) -> Schedule:
    blocks = []
    for i in range(120):
        lines = [f'name = "task-{i:03d}"', 'command = "true"']
        if i % 17 == 5:
            lines.append("at = 2026-03-28T10:00:00Z")
        elif i % 29 == 7:
            lines.append("on_start = true")
        else:
            lines += [f'cron = "{rnd.choice(EXPRESSIONS)}"', f'timezone = "{rnd.choice(ZONES)}"']
        if i % 11 == 3:
            lines.append("paused = true")
        if i % 13 == 4:
            lines.append('hosts = ["web-*"]')  # not this host: no next run, never overdue
        elif i % 13 == 6:
            lines.append('hosts = ["h0*"]')
        if i % 7 == 2:
            lines.append('misfire_grace = "2h"')
        blocks.append("[[task]]\n" + "\n".join(lines) + "\n")
    path.write_text("\n".join(blocks), encoding="utf-8")
    schedule = load_paths([path])
    assert not schedule.errors, schedule.errors
    return schedule


def _runs(schedule: Schedule, rnd: random.Random) -> list[RunRow]:
    outcomes = sorted(OUTCOMES)
    runs: list[RunRow] = []
    for task in schedule.tasks:
        if rnd.random() < 0.1:
            continue  # never ran here
        weights = [rnd.random() for _ in outcomes]
        for _ in range(rnd.randrange(1, 60)):
            minute = NOW - timedelta(minutes=rnd.randrange(1, 60 * 24 * 5))
            occurrence = minute.replace(second=0) if rnd.random() < 0.9 else NOW
            for attempt in range(1, rnd.choice((2, 2, 2, 3))):  # retries share the occurrence
                started = None if rnd.random() < 0.2 else occurrence + timedelta(seconds=attempt)
                runs.append(
                    RunRow(
                        f"run-{len(runs):06d}",
                        task.name,
                        occurrence,
                        rnd.choices(outcomes, weights)[0],
                        f"h{rnd.randrange(12):02d}",
                        pid=rnd.randrange(1, 1000),
                        started=started,
                        attempt=attempt,
                    )
                )
    return runs


def _reference_overview(
    schedule: Schedule, state: Path, coord: Coordinator, now: datetime
) -> list[TaskSummary]:
    """The overview as the dashboard made it before: `status` and its four questions per
    task, the running rows and the pauses."""
    result = status(schedule, state, coord, now, HOST)
    pauses = coord.paused_tasks()
    with reading_store(state) as store:
        running: dict[str, list[RunRow]] = {}
        for run in store.unfinished_runs(None):
            if run.outcome == "running":
                running.setdefault(run.task, []).append(run)
    rows = [
        TaskSummary(
            task=row.task,
            words=describe(row.task),
            next_run=row.next_run,
            paused=row.paused,
            pause=pauses.get(row.task.name),
            pause_reason=row.pause_reason,
            last=(row.last_run,) if row.last_run is not None else (),
            running=tuple(running.get(row.task.name, [])),
            failures=row.consecutive_failures,
            overdue=row.overdue,
        )
        for row in result.rows
    ]
    rank = {s: i for i, s in enumerate(STATES)}
    return sorted(rows, key=lambda r: (rank[r.state], r.task.name))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_overview_says_what_status_says_of_every_task(tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    schedule = _random_schedule(tmp_path / "schedules.toml", rnd)
    (tmp_path / "state").mkdir(mode=0o700)
    (tmp_path / "locks").mkdir(mode=0o700)
    runs = _runs(schedule, rnd)
    with Store.open(tmp_path / "state") as store, store.transaction() as txn:
        txn.add_runs(runs)
    coord = open_coordinator(None, tmp_path / "locks", host=HOST, pid=1)
    for i, task in enumerate(schedule.tasks[::9]):
        coord.set_pause(task.name, reason=None if i % 2 else f"why {i}", now=NOW, user="ops")
    coord.set_pause("task-003", reason=None, now=NOW, user="ops")  # paused in the file too
    board = Dashboard(schedule, tmp_path / "state", coord, HOST)
    states: set[str] = set()
    for now in (NOW, NOW + timedelta(days=3), NOW - timedelta(days=2)):
        expected = _reference_overview(schedule, tmp_path / "state", coord, now)
        states |= {r.state for r in expected}
        got = board.overview(now).tasks
        assert [r.task.name for r in got] == [r.task.name for r in expected]
        for mine, theirs in zip(got, expected, strict=True):
            assert mine == theirs, mine.task.name
    assert states >= {"failing", "overdue", "running", "paused", "ok", "new"}, states
    # The task page's summary is the overview's row of that task.
    for row in expected[::7]:
        page = board.task_page(row.task.name, NOW - timedelta(days=2), HistoryQuery(limit=5))
        assert page.summary == row
    coord.close()


def test_the_machine_page_counts_the_last_run_of_every_task(tmp_path: Path) -> None:
    rnd = random.Random(4)
    schedule = _random_schedule(tmp_path / "schedules.toml", rnd)
    (tmp_path / "state").mkdir(mode=0o700)
    runs = _runs(schedule, rnd)
    with Store.open(tmp_path / "state") as store:
        with store.transaction() as txn:
            txn.add_runs(runs)
        latest = [r for t in schedule.tasks if (r := store.last_run(t.name))]
    by_host: dict[str, list[RunRow]] = {}
    for run in latest:
        by_host.setdefault(run.host, []).append(run)
    failed = ("failed", "timeout", "error", "interrupted")
    expected = [
        HostRow(
            host,
            max(r.ended or r.started or r.occurrence for r in rows),
            len(rows),
            sorted(r.task for r in rows if r.outcome in failed),
            sum(r.outcome in failed for r in rows),
        )
        for host, rows in sorted(by_host.items())
    ]
    coord = open_coordinator(None, tmp_path / "locks", host=HOST, pid=1)
    assert Dashboard(schedule, tmp_path / "state", coord, HOST).hosts() == expected
    coord.close()
