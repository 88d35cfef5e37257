"""`check` validation as an operator meets it: counts, uneven steps, stray letters."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import Cli, write_schedule

NOW = "2026-08-03T08:00:00Z"


def test_check_counts_every_task_table_even_when_all_are_broken(cli: Cli, tmp_path: Path) -> None:
    broken = [f'name = "t{i}"\ncommand = "true"\nrun_every = "1m"' for i in range(5)]
    write_schedule(tmp_path / "schedules.toml", broken)
    result = cli("check", "--now", NOW)
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == "failed: 5 tasks in 1 file; 10 errors, 0 warnings"
    # Each broken task still says both: no schedule at its name, the unknown key at its line.
    assert "schedules.toml:3: task t0: task has no schedule" in result.stdout
    assert "schedules.toml:5: task t0: unknown key 'run_every'\n" in result.stdout


def test_a_key_named_as_other_schedulers_name_it_is_one_error_with_ours(
    cli: Cli, tmp_path: Path
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "k"\ncommand = "true"\nschedule = "*/5 * * * *"\ntz = "UTC"'],
    )
    result = cli("check", "--now", NOW)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "schedules.toml:5: task k: unknown key 'schedule' (did you mean \"cron\"?)",
        "schedules.toml:6: task k: unknown key 'tz' (did you mean \"timezone\"?)",
        "failed: 1 task in 1 file; 2 errors, 0 warnings",
    ]


def test_check_warns_a_minute_step_that_does_not_divide_the_hour(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml", ['name = "s"\ncommand = "true"\ncron = "*/7 * * * *"']
    )
    result = cli("check", "--now", NOW)
    assert result.returncode == 0, result.stdout  # a warning: cron allows it
    assert "task s: warning: */7 in minutes runs at :56 then :00 \u2014 a 4-minute gap" in (
        result.stdout
    )
    assert result.stdout.splitlines()[-1] == "ok: 1 task in 1 file; 0 errors, 1 warning"
    assert cli("check", "--now", NOW, "--strict").returncode == 1


def test_check_warns_an_hour_step_and_not_an_even_one(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "h"\ncommand = "true"\ncron = "0 */5 * * *"',
            'name = "even"\ncommand = "true"\ncron = "*/15 */6 * * *"',
        ],
    )
    result = cli("check", "--now", NOW)
    assert result.returncode == 0, result.stdout
    assert "task h: warning: */5 in hours runs at hour 20 then hour 0 \u2014 a 4-hour gap" in (
        result.stdout
    )
    assert "task even" not in result.stdout


def test_check_names_a_stray_l_rather_than_a_seconds_field(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml", ['name = "l"\ncommand = "true"\ncron = "0 0 * * 1-5 L"']
    )
    result = cli("check", "--now", NOW)
    assert result.returncode == 1
    assert "stray 'L' as field 6" in result.stdout
    assert "seconds" not in result.stdout
