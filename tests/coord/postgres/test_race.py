"""8 machines x 30 occurrences against one PostgreSQL: each on_one_server occurrence runs
exactly once, and no two runs of a without_overlapping task ever overlap.

Each machine is its own state dir, host name and store connection; the 8 runs of a minute
start together in threads; the commands are real processes, and the overlap check is theirs:
a task that finds another one's marker directory records an overlap and fails.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cronctl import load
from cronctl.coord.postgres.adapter import PostgresCoordinator
from cronctl.run.context import RunContext, World
from cronctl.run.once import run_once
from tests.helpers import changed, write_schedule

MACHINES = 8
OCCURRENCES = 30
T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)

GUARD = (
    'mkdir "$D/{name}.running" 2>/dev/null || {{ echo "$CRONCTL_OCCURRENCE" >> "$D/overlap"; '
    'exit 3; }}; echo "$CRONCTL_OCCURRENCE" >> "$D/{name}.log"; sleep 0.02; '
    'rmdir "$D/{name}.running"'
)


@pytest.fixture(autouse=True)
def _umask_kept() -> Iterator[None]:
    """The process umask as it was before: Store.open swaps it while it creates a database
    (edge/state/dbfile.py), and eight machines doing so at once in threads can leave it at
    077, which the next test in this worker would then see (a holder file's group bits)."""
    umask = os.umask(0o022)
    os.umask(umask)
    yield
    os.umask(umask)


def _task(name: str, guards: str) -> str:
    command = GUARD.format(name=name).replace("\\", "\\\\").replace('"', '\\"')
    return f'name = "{name}"\ncron = "* * * * *"\ncommand = "{command}"\n{guards}'


def test_each_occurrence_runs_once_and_guarded_runs_never_overlap(
    tmp_path: Path, pg_url: str
) -> None:
    schedule = load(
        write_schedule(
            tmp_path / "s.toml",
            [
                _task("solo", "on_one_server = true"),
                _task("serial", "without_overlapping = true"),
                _task("both", "on_one_server = true\nwithout_overlapping = true"),
            ],
        )
    )
    assert not schedule.errors, schedule.errors
    contexts = [
        RunContext(
            state_dir=tmp_path / f"m{i}" / "state",
            lock_dir=tmp_path / f"m{i}" / "locks",
            host=f"m{i}",
            env={**os.environ, "D": str(tmp_path)},
            coord=PostgresCoordinator(pg_url, host=f"m{i}", pid=os.getpid()),
            world=World(clock=lambda: T0, warn=lambda message: None),
        )
        for i in range(MACHINES)
    ]
    reports: dict[tuple[int, int], list[str]] = {}

    def machine(i: int, minute: int, now: datetime) -> None:
        report = run_once(schedule, now, changed(contexts[i], clock=lambda: now))
        reports[(i, minute)] = [f"{r.task} {r.outcome}" for r in report.runs]

    for minute in range(OCCURRENCES):
        now = T0 + timedelta(minutes=minute)
        threads = [threading.Thread(target=machine, args=(i, minute, now)) for i in range(MACHINES)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    occurrences = sorted(
        f"{T0 + timedelta(minutes=m):%Y-%m-%dT%H:%M:%SZ}" for m in range(OCCURRENCES)
    )
    assert not (tmp_path / "overlap").exists(), (tmp_path / "overlap").read_text()
    for name in ("solo", "both"):
        assert sorted((tmp_path / f"{name}.log").read_text().split()) == occurrences, name
    assert set((tmp_path / "serial.log").read_text().split()) == set(occurrences)
    # Every machine dealt with every occurrence of every task, and said how.
    assert len(reports) == MACHINES * OCCURRENCES
    allowed = {"ok", "skipped: another server", "skipped: still running"}
    for outcomes in reports.values():
        assert len(outcomes) == 3
        assert {o.split(" ", 1)[1] for o in outcomes} <= allowed, outcomes
    # The fleet history holds each winner's record (published at the end of each run).
    fleet = PostgresCoordinator(pg_url, host="reader", pid=os.getpid())
    try:
        solo = fleet.fleet_history("solo", None, 1000)
    finally:
        fleet.close()
    assert (
        sorted(f"{r.occurrence:%Y-%m-%dT%H:%M:%SZ}" for r in solo if r.outcome == "ok")
        == occurrences
    )
