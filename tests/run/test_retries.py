"""`retries` / `retry_delay`: failed attempts again within the same run, recorded one by one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cronctl.edge.state.store import Store
from tests.helpers import Cli, write_schedule
from tests.run.conftest import T0, Drive

# Fails until it has been started `n` times (a counter file in its workdir).
FLAKY = (
    'command = "n=$(($(cat count 2>/dev/null || echo 0)+1)); echo $n > count; '
    'echo attempt $CRONCTL_ATTEMPT; [ $n -ge {n} ]"'
)


def test_a_flaky_task_is_retried_with_doubling_delays_until_it_succeeds(drive: Drive) -> None:
    schedule = drive.schedule(
        f'name = "flaky"\n{FLAKY.format(n=3)}\nevery_minutes = 5\nretries = 4\nretry_delay = "10s"'
    )
    report = drive.run(schedule)
    assert drive.clock.slept == [10.0, 20.0]
    assert [(r.attempt, r.outcome) for r in report.runs] == [
        (1, "failed"),
        (2, "failed"),
        (3, "ok"),
    ]
    assert report.failed == []  # the occurrence's outcome is its last attempt's
    assert len({r.id for r in report.runs}) == 3
    assert {r.occurrence for r in report.runs} == {T0}
    with Store.open(drive.root / "state") as store:
        rows = sorted(store.history("flaky"), key=lambda r: r.attempt)
    assert [(r.attempt, r.outcome) for r in rows] == [(1, "failed"), (2, "failed"), (3, "ok")]
    last_log = Path(rows[-1].log_path or "").read_text()
    assert "attempt 3" in last_log


def test_retries_stop_after_n_more_attempts_and_the_last_failure_is_the_outcome(
    drive: Drive,
) -> None:
    schedule = drive.schedule('name = "broken"\ncommand = "exit 4"\nhourly = true\nretries = 2')
    report = drive.run(schedule)
    assert drive.clock.slept == [30.0, 60.0]  # the default delay, doubled
    assert [r.attempt for r in report.runs] == [1, 2, 3]
    [failure] = report.failed
    assert (failure.attempt, failure.exit_code) == (3, 4)
    with Store.open(drive.root / "state") as store:
        assert store.consecutive_failures("broken") == 1  # one occurrence failed, tried 3 times


def test_a_guarded_task_stops_retrying_when_the_next_occurrence_is_due(drive: Drive) -> None:
    schedule = drive.schedule(
        'name = "guarded"\ncommand = "exit 1"\nevery_minutes = 5\nwithout_overlapping = true\n'
        'retries = 5\nretry_delay = "2m"'
    )
    report = drive.run(schedule)
    # 09:00 fails, 09:02 fails; the next retry (09:06) would reach the 09:05 occurrence.
    assert drive.clock.slept == [120.0]
    assert [r.attempt for r in report.runs] == [1, 2]
    assert any("not retrying attempt 2" in w for w in drive.warnings)


def test_an_unguarded_task_keeps_its_retries_past_the_next_occurrence(drive: Drive) -> None:
    schedule = drive.schedule(
        'name = "free"\ncommand = "exit 1"\nevery_minutes = 5\nretries = 2\nretry_delay = "4m"'
    )
    report = drive.run(schedule)
    assert drive.clock.slept == [240.0, 480.0]
    assert [r.attempt for r in report.runs] == [1, 2, 3]


def test_a_timeout_is_retried_but_a_command_that_cannot_start_is_not(drive: Drive) -> None:
    schedule = drive.schedule(
        'name = "slow"\ncommand = "sleep 5"\nhourly = true\ntimeout = "1s"\nretries = 1\n'
        'retry_delay = "1s"',
        'name = "missing"\ncommand = ["/nonexistent/program"]\nhourly = true\nretries = 3',
    )
    report = drive.run(schedule)
    by_task = {(r.task, r.attempt): r.outcome for r in report.runs}
    assert by_task == {
        ("slow", 1): "timeout",
        ("slow", 2): "timeout",
        ("missing", 1): "error",
    }


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ("retries = 11", "bad-value"),
        ("retries = -1", "bad-value"),
        ('retries = "3"', "bad-type"),
        ('retry_delay = "soon"', "bad-duration"),
        ("retry_delay = 30", "bad-type"),
    ],
)
def test_check_rejects_bad_retry_values(cli: Cli, tmp_path: Path, line: str, code: str) -> None:
    write_schedule(
        tmp_path / "schedules.toml", [f'name = "t"\ncommand = "true"\nhourly = true\n{line}']
    )
    result = cli("check", "--format", "json")
    assert result.returncode == 1
    [problem] = json.loads(result.stdout)["problems"]
    assert (problem["code"], problem["task"], problem["line"]) == (code, "t", 6)


def test_run_json_reports_every_attempt_and_exits_by_the_last(cli: Cli, tmp_path: Path) -> None:
    # Through the CLI: the real sleep is 1 s, the shortest retry_delay there is.
    write_schedule(
        tmp_path / "schedules.toml",
        [
            f'name = "flaky"\n{FLAKY.format(n=2)}\nevery_minute = true\nretries = 1\n'
            'retry_delay = "1s"'
        ],
    )
    result = cli("run", "--now", "2026-08-03T09:00:00Z", "--json")
    assert result.returncode == 0, result.stderr
    runs = json.loads(result.stdout)["runs"]
    assert [(r["attempt"], r["outcome"]) for r in runs] == [(1, "failed"), (2, "ok")]
    assert result.stderr == ""


def test_list_shows_retries_jitter_ping_and_hooks_beside_the_guards(
    cli: Cli, tmp_path: Path
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "t"\ncommand = "true"\nhourly = true\nretries = 2\njitter = "5m"\n'
            'ping_url = "https://hc-ping.com/key"\non_failure = "true"\ntimeout = "1m"'
        ],
    )
    [task] = json.loads(cli("list", "--json").stdout)["tasks"]
    assert task["guards"] == ["timeout(1m)", "retries(2)", "jitter(5m)", "ping", "hooks"]


@pytest.mark.parametrize(
    ("keys", "warned"),
    [
        ('every_minutes = 5\nretries = 3\nretry_delay = "1m"', True),  # 1+2+4 = 7m >= 5m
        ('every_minutes = 10\nretries = 3\nretry_delay = "1m"', False),  # 7m < 10m
        ('every_minutes = 5\nretries = 3\nretry_delay = "1m"\nwithout_overlapping = true', False),
    ],
)
def test_check_warns_when_retries_of_an_unguarded_task_can_outlast_its_period(
    cli: Cli, tmp_path: Path, keys: str, warned: bool
) -> None:
    write_schedule(tmp_path / "schedules.toml", [f'name = "t"\ncommand = "true"\n{keys}'])
    result = cli("check", "--format", "json", "--now", "2026-08-03T09:00:00Z")
    codes = [p["code"] for p in json.loads(result.stdout)["problems"]]
    assert codes == (["retries-outlast-period"] if warned else [])
    assert result.returncode == 0  # a warning
