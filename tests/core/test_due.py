"""The pure window planner: (last, now], the misfire policies, the counting limits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cronctl.core.due import CATCH_UP_LIMIT, MISSED_ROWS, Previous, plan
from cronctl.core.model import Task
from cronctl.edge.schedfiles import load_paths

T = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)


def task(tmp_path: Path, body: str) -> Task:
    path = tmp_path / "s.toml"
    path.write_text(f'[[task]]\nname = "t"\ncommand = "true"\n{body}\n')
    schedule = load_paths([path])
    assert not schedule.errors, schedule.errors
    return schedule.tasks[0]


def seen(t: Task, last: datetime) -> Previous:
    return Previous(t.fingerprint, last)


def test_first_sight_counts_this_minute_only(tmp_path: Path) -> None:
    t = task(tmp_path, "every_minute = true")
    decided = plan(t, None, T + timedelta(seconds=30))
    assert decided.run == [T] and decided.missed == [] and decided.restarted


def test_changed_schedule_restarts_without_catching_up(tmp_path: Path) -> None:
    t = task(tmp_path, 'every_minute = true\nmisfire = "catch-up"')
    old = Previous("*/5 * * * *|UTC", T - timedelta(hours=5))
    decided = plan(t, old, T)
    assert decided.run == [T] and decided.missed_count == 0


@pytest.mark.parametrize(
    ("policy", "runs", "missed"),
    [("coalesce", 1, 9), ("catch-up", 10, 0), ("skip", 1, 9)],
)
def test_policies_over_a_ten_minute_gap(
    tmp_path: Path, policy: str, runs: int, missed: int
) -> None:
    t = task(tmp_path, f'every_minute = true\nmisfire = "{policy}"')
    decided = plan(t, seen(t, T), T + timedelta(minutes=10))
    assert (len(decided.run), decided.missed_count) == (runs, missed)
    assert decided.run[-1] == T + timedelta(minutes=10)


def test_skip_runs_nothing_when_this_minute_is_not_an_occurrence(tmp_path: Path) -> None:
    t = task(tmp_path, 'hourly = true\nmisfire = "skip"')
    decided = plan(t, seen(t, T), T + timedelta(minutes=70))
    assert decided.run == [] and decided.missed == [T + timedelta(hours=1)]


def test_grace_is_judged_at_the_moment_the_run_would_start(tmp_path: Path) -> None:
    t = task(tmp_path, 'hourly = true\nmisfire_grace = "10m"')
    inside = plan(t, seen(t, T), T + timedelta(hours=1, minutes=9, seconds=59))
    outside = plan(t, seen(t, T), T + timedelta(hours=1, minutes=10, seconds=1))
    assert inside.run == [T + timedelta(hours=1)]
    assert outside.run == [] and outside.missed_count == 1


def test_clock_behind_last_occurrence_deals_with_nothing(tmp_path: Path) -> None:
    t = task(tmp_path, "every_minute = true")
    decided = plan(t, seen(t, T), T - timedelta(hours=1))
    assert decided.run == [] and decided.last_occurrence == T
    assert decided.clock_behind == timedelta(hours=1)


def test_catch_up_runs_the_newest_hundred_of_a_long_gap(tmp_path: Path) -> None:
    t = task(tmp_path, 'every_minute = true\nmisfire = "catch-up"')
    now = T + timedelta(hours=5)  # 300 occurrences, scanned through croniter
    decided = plan(t, seen(t, T), now)
    assert len(decided.run) == CATCH_UP_LIMIT
    assert decided.run[0] == now - timedelta(minutes=CATCH_UP_LIMIT - 1)
    assert decided.missed_count == 200 and len(decided.missed) == MISSED_ROWS


def test_missed_count_beyond_a_thousand_is_estimated_from_the_period(tmp_path: Path) -> None:
    t = task(tmp_path, "every_minute = true")
    now = T + timedelta(days=3)  # 4,320 occurrences
    decided = plan(t, seen(t, T), now)
    assert decided.run == [now]
    assert decided.missed_count == pytest.approx(4319, abs=2)
    assert len(decided.missed) <= MISSED_ROWS


def test_one_shot_is_done_after_its_instant(tmp_path: Path) -> None:
    t = task(tmp_path, "at = 2026-08-03T09:30:00Z")
    late = plan(t, seen(t, T), T + timedelta(hours=2))
    assert late.run == [T + timedelta(minutes=30)] and late.done
    after = plan(
        t, Previous(t.fingerprint, T + timedelta(hours=2), done=True), T + timedelta(days=1)
    )
    assert after.run == [] and after.done
