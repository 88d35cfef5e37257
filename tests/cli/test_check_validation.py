"""`check` validation as an operator meets it: counts, uneven steps, stray letters."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import Cli, write_schedule

NOW = "2026-08-03T08:00:00Z"


def test_check_counts_every_task_table_even_when_all_are_broken(cli: Cli, tmp_path: Path) -> None:
    broken = [f'name = "t{i}"\ncommand = "true"\nschedule = "every minute"' for i in range(5)]
    write_schedule(tmp_path / "schedules.toml", broken)
    result = cli("check", "--now", NOW)
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == "failed: 5 tasks in 1 file; 10 errors, 0 warnings"
    # Each broken task still says both: no schedule at its name, the unknown key at its line.
    assert "schedules.toml:3: task t0: task has no schedule" in result.stdout
    assert "schedules.toml:5: task t0: unknown key 'schedule'" in result.stdout
