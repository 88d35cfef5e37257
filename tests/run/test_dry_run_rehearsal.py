"""`run --dry-run --now T` and the rehearsal at the same T agree; long runs of `missed` make
one line with their count and the jump."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.helpers import Cli, write_schedule

TASKS = [
    'name = "hourly"\ncommand = "true"\nhourly = true',
    'name = "quarter"\ncommand = "true"\ncron = "*/15 * * * *"',
    # At half past: never the whole hour ahead() picks, whatever the hour the suite runs at
    # (at "0 3" the first test failed from 03:00 to 03:59 UTC, when `daily` was due then).
    'name = "daily"\ncommand = "true"\ncron = "30 3 * * *"',
]


def ahead() -> str:
    """A whole hour a month ahead of the clock: --now there is a rehearsal."""
    when = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(days=30)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def outcomes(result: object) -> list[tuple[str, str, str]]:
    data = json.loads(result.stdout)  # type: ignore[attr-defined]
    return sorted((r["task"], r["occurrence"], r["outcome"]) for r in data["runs"])


def test_a_future_dry_run_says_what_the_rehearsal_then_runs(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", TASKS)
    # Real state: a past minute dealt with, a month before the rehearsal.
    assert cli("run", "--now", "2026-03-02T10:00:00Z").returncode == 0
    later = ahead()
    dry = cli("run", "--dry-run", "--json", "--now", later)
    assert dry.returncode == 0, dry.stderr
    rehearsal = cli("run", "--json", "--now", later)
    assert rehearsal.returncode == 0, rehearsal.stderr
    planned = [(t, o, "run") for t, o, out in outcomes(dry)]
    ran = [(t, o, "run") for t, o, out in outcomes(rehearsal)]
    assert planned == ran
    assert all(out == "would run" for _, _, out in outcomes(dry))
    assert {t for t, _, _ in ran} == {"hourly", "quarter"}
    assert "a rehearsal" in dry.stderr and "changes nothing" in dry.stderr


def test_missed_occurrences_make_one_line_with_their_count(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", TASKS)
    assert cli("run", "--now", "2026-03-02T10:00:00Z").returncode == 0
    dry = cli("run", "--dry-run", "--now", "2026-03-04T10:00:00Z")
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    quarter = [line for line in lines if "quarter" in line]
    assert quarter == [
        "2026-03-04T09:45:00Z  quarter  missed x191: the occurrences after "
        "2026-03-02T10:00:00Z up to this one (a jump of 2d since the last minute dealt with)",
        "2026-03-04T10:00:00Z  quarter  would run",
    ]
    assert len(lines) == 6  # three tasks: a missed line and a run line each


def test_a_past_now_says_how_far_behind_in_cronctl_durations(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", TASKS[:1])
    assert cli("run", "--now", "2026-03-03T10:00:00Z").returncode == 0
    earlier = cli("run", "--now", "2026-03-01T19:50:00Z")
    assert earlier.returncode == 0, earlier.stderr
    assert "the clock is 1d14h10m behind the last occurrence" in earlier.stderr
    assert "day," not in earlier.stderr
