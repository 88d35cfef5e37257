"""Overdue (docs/operating.md) and `status --check`: the monitoring check for jobs that stopped."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cronctl.core.opskeys import overdue_since
from tests.helpers import Cli, write_schedule
from tests.run.conftest import Drive


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


@pytest.mark.parametrize(
    ("task", "last_ok", "now", "since"),
    [
        ("every_minutes = 5", "09:00", "09:10:00", None),
        ("every_minutes = 5", "09:00", "09:10:01", "09:10:00"),
        ('every_minutes = 5\nmisfire_grace = "2m"', "09:00", "09:12:00", None),
        ('every_minutes = 5\nmisfire_grace = "2m"', "09:00", "09:12:01", "09:12:00"),
        ("hourly = true", "09:00", "10:59:00", None),
        ("hourly = true", "09:00", "11:00:01", "11:00:00"),
    ],
)
def test_overdue_after_two_periods_plus_grace(
    drive: Drive, task: str, last_ok: str, now: str, since: str | None
) -> None:
    t = drive.schedule(f'name = "t"\ncommand = "true"\n{task}').task("t")
    day = "2026-08-03T"
    found = overdue_since(t, _utc(f"{day}{last_ok}:00Z"), None, _utc(f"{day}{now}Z"))
    assert found == (_utc(f"{day}{since}Z") if since else None)


def test_periods_are_counted_on_the_schedule_so_a_weekend_is_not_overdue(drive: Drive) -> None:
    t = drive.schedule('name = "t"\ncommand = "true"\ndaily_at = "09:00"\nweekdays = true').task(
        "t"
    )
    friday = _utc("2026-08-07T09:00:00Z")
    assert overdue_since(t, friday, None, _utc("2026-08-10T12:00:00Z")) is None  # Monday
    assert overdue_since(t, friday, None, _utc("2026-08-11T09:00:01Z")) is not None  # Tuesday


def test_with_no_ok_run_the_first_occurrence_seen_is_the_anchor(drive: Drive) -> None:
    t = drive.schedule('name = "t"\ncommand = "true"\nhourly = true').task("t")
    seen = _utc("2026-08-03T09:00:00Z")
    assert overdue_since(t, None, seen, _utc("2026-08-03T11:00:01Z")) is not None
    assert overdue_since(t, None, None, _utc("2026-08-03T11:00:01Z")) is None  # never seen


def _status(cli: Cli, now: str, *args: str) -> tuple[int, dict[str, dict[str, object]]]:
    result = cli("status", "--json", "--check", "--now", now, *args)
    return result.returncode, {t["name"]: t for t in json.loads(result.stdout)["tasks"]}


def test_status_check_exits_1_for_overdue_and_failing_tasks_only(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "fine"\ncommand = "true"\nevery_minutes = 5',
            'name = "stalled"\ncommand = "true"\nhourly = true\nwhen = "[ -e enabled ]"',
            'name = "held"\ncommand = "true"\nhourly = true\npaused = true',
        ],
    )
    (tmp_path / "enabled").touch()
    cli("run", "--now", "2026-08-03T09:00:00Z")
    code, rows = _status(cli, "2026-08-03T09:04:00Z")
    assert code == 0 and not any(r["overdue"] for r in rows.values())
    (tmp_path / "enabled").unlink()
    cli("run", "--now", "2026-08-03T11:05:00Z")  # `stalled` is skipped: no ok since 09:00
    code, rows = _status(cli, "2026-08-03T11:05:30Z")
    assert code == 1
    assert rows["stalled"]["overdue"] is True
    assert rows["stalled"]["overdue_since"] == "2026-08-03T11:00:00Z"
    assert rows["fine"]["overdue"] is False and rows["held"]["overdue"] is False
    text = cli("status", "--now", "2026-08-03T11:05:30Z")
    assert "overdue since 2026-08-03T11:00:00Z" in text.stdout
    assert text.returncode == 0  # without --check, status only reports


def test_status_check_exits_1_for_a_failing_task(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml", ['name = "bad"\ncommand = "exit 1"\nevery_minute = true']
    )
    cli("run", "--now", "2026-08-03T09:00:00Z")
    result = cli("status", "--check", "--now", "2026-08-03T09:00:30Z")
    assert result.returncode == 1 and "failing or overdue: bad" in result.stderr


def test_a_task_of_other_hosts_is_shown_as_such_and_never_overdue(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "db"\ncommand = "true"\nhourly = true\nhosts = ["db-*"]'],
    )
    cli("run", "--now", "2026-08-03T09:00:00Z", "--host", "db-1")
    code, rows = _status(cli, "2026-08-04T09:00:00Z", "--host", "web-1")
    assert code == 0
    assert rows["db"]["other_hosts"] is True and rows["db"]["overdue"] is False
    code, rows = _status(cli, "2026-08-04T09:00:00Z", "--host", "db-1")
    assert code == 1 and rows["db"]["overdue"] is True
