"""`jitter`: a stable start delay in [0, jitter) from host and task name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cronctl.run.context import Tracker
from cronctl.run.occurrence import jitter_offset
from tests.helpers import Cli, write_schedule
from tests.run.conftest import Drive


def test_the_offset_is_stable_within_range_and_differs_between_hosts(drive: Drive) -> None:
    schedule = drive.schedule('name = "spread"\ncommand = "true"\nhourly = true\njitter = "10m"')
    task = schedule.task("spread")
    offsets = {host: jitter_offset(task, host) for host in (f"web-{i}" for i in range(50))}
    assert all(0 <= o < 600 for o in offsets.values())
    assert offsets == {host: jitter_offset(task, host) for host in offsets}  # stable
    assert len({round(o, 3) for o in offsets.values()}) > 40  # spread, not one value


def test_run_delays_the_start_by_the_offset_and_judges_grace_after_it(drive: Drive) -> None:
    schedule = drive.schedule(
        'name = "late"\ncommand = "true"\nevery_minute = true\njitter = "50s"',
        'name = "prompt"\ncommand = "true"\nevery_minute = true',
    )
    report = drive.run(schedule)
    expected = jitter_offset(schedule.task("late"), drive.host)
    assert drive.clock.slept == [expected]
    assert {r.task: r.outcome for r in report.runs} == {"late": "ok", "prompt": "ok"}


def test_misfire_grace_is_judged_after_the_jitter(drive: Drive) -> None:
    drive.host = "host-with-a-late-offset"
    schedule = drive.schedule(
        'name = "t"\ncommand = "true"\nhourly = true\njitter = "50m"\nmisfire_grace = "1m"'
    )
    offset = jitter_offset(schedule.task("t"), drive.host)
    assert offset > 60, "pick a host whose offset passes the grace"
    [row] = drive.run(schedule).runs
    assert row.outcome == "missed"


def test_a_worker_told_to_stop_during_the_jitter_does_not_start_the_task(drive: Drive) -> None:
    schedule = drive.schedule('name = "t"\ncommand = "touch ran"\nhourly = true\njitter = "30m"')
    tracker = Tracker()
    # The stop comes during the jitter's sleep.
    [row] = drive.run(schedule, tracker=tracker, sleep=lambda _s: tracker.stop(15)).runs
    assert row.outcome == "interrupted"
    assert not (drive.root / "ran").exists()


@pytest.mark.parametrize(
    ("schedule", "jitter", "ok"),
    [
        ("every_minute = true", '"59s"', True),
        ("every_minute = true", '"1m"', False),
        ("hourly = true", '"59m"', True),
        ("hourly = true", '"2h"', False),
        ('cron = "0,5 * * * *"', '"10m"', False),  # the shortest gap counts, not the average
        ("twice_daily = [1, 13]", '"11h"', True),
        ('weekly_on = [1, "09:00"]', '"1d"', True),
    ],
)
def test_check_rejects_a_jitter_not_shorter_than_the_shortest_period(
    cli: Cli, tmp_path: Path, schedule: str, jitter: str, ok: bool
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [f'name = "t"\ncommand = "true"\n{schedule}\njitter = {jitter}'],
    )
    result = cli("check", "--format", "json", "--now", "2026-08-03T09:00:00Z")
    problems = json.loads(result.stdout)["problems"]
    if ok:
        assert result.returncode == 0 and problems == []
    else:
        assert result.returncode == 1
        [problem] = problems
        assert (problem["code"], problem["task"]) == ("jitter-too-long", "t")


@pytest.mark.parametrize(
    ("keys", "code", "ok"),
    [
        ('at = 2026-08-04T09:00:00Z\njitter = "3650d"', "jitter-too-long", False),
        ('at = 2026-08-04T09:00:00Z\njitter = "1h"', "jitter-too-long", True),
        (
            'hourly = true\nretries = 2\nretry_delay = "1d"\nwithout_overlapping = true',
            "retry-delay-too-long",
            False,
        ),
        ('hourly = true\nretries = 1\nretry_delay = "1h"\nwithout_overlapping = true', "", True),
    ],
)
def test_check_bounds_one_shot_jitter_and_retry_delay(
    cli: Cli, tmp_path: Path, keys: str, code: str, ok: bool
) -> None:
    write_schedule(tmp_path / "schedules.toml", [f'name = "t"\ncommand = "true"\n{keys}'])
    result = cli("check", "--format", "json", "--now", "2026-08-03T09:00:00Z")
    problems = json.loads(result.stdout)["problems"]
    if ok:
        assert result.returncode == 0 and problems == []
    else:
        assert result.returncode == 1
        [problem] = problems
        assert (problem["code"], problem["task"]) == (code, "t")
        assert problem["line"] and "limit" in problem["message"]
