"""Scenarios driven by a sequence of `run --now` times against a real state directory
(docs/guarantees.md)."""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.helpers import FILE_STATE, Cli, running_in, wait_for, write_schedule

DAY = datetime(2026, 8, 3, tzinfo=UTC)


def iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def hm(hour: int, minute: int = 0) -> str:
    return iso(DAY.replace(hour=hour, minute=minute))


def run(cli: Cli, now: str, *extra: str) -> list[dict[str, object]]:
    result = cli("run", "--now", now, "--json", *extra)
    assert result.returncode in (0, 1), result.stderr
    runs: list[dict[str, object]] = json.loads(result.stdout)["runs"]
    return runs


def outcomes(runs: list[dict[str, object]]) -> list[tuple[str, str]]:
    """(occurrence HH:MM, outcome), oldest first."""
    pairs = [(str(r["occurrence"])[11:16], str(r["outcome"])) for r in runs]
    return sorted(pairs)


def every_minute(tmp_path: Path, policy: str, extra: str = "") -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            f'name = "tick"\ncommand = "echo $CRONCTL_OCCURRENCE >> ledger"\nevery_minute = true\n'
            f'misfire = "{policy}"\n{extra}'
        ],
    )


def ledger(tmp_path: Path) -> list[str]:
    path = tmp_path / "ledger"
    return [line[11:16] for line in path.read_text().split()] if path.exists() else []


def test_coalesce_runs_the_latest_missed_occurrence_once(cli: Cli, tmp_path: Path) -> None:
    every_minute(tmp_path, "coalesce")
    assert outcomes(run(cli, hm(9))) == [("09:00", "ok")]
    later = outcomes(run(cli, hm(9, 10)))
    assert later == [(f"09:{m:02d}", "missed") for m in range(1, 10)] + [("09:10", "ok")]
    assert ledger(tmp_path) == ["09:00", "09:10"]
    status = json.loads(cli("status", "--json").stdout)["tasks"][0]
    assert status["missed"] == 9


def test_catch_up_runs_every_missed_occurrence_in_order(cli: Cli, tmp_path: Path) -> None:
    every_minute(tmp_path, "catch-up")
    run(cli, hm(9))
    later = outcomes(run(cli, hm(9, 10)))
    assert later == [(f"09:{m:02d}", "ok") for m in range(1, 11)]
    assert ledger(tmp_path) == [f"09:{m:02d}" for m in range(0, 11)]


def test_catch_up_runs_at_most_one_hundred(cli: Cli, tmp_path: Path) -> None:
    every_minute(tmp_path, "catch-up")
    run(cli, hm(9))
    later = run(cli, hm(11, 30))  # 150 occurrences
    kinds = Counter(str(r["outcome"]) for r in later)
    assert kinds == {"ok": 100, "missed": 50}
    assert min(str(r["occurrence"]) for r in later if r["outcome"] == "ok") == hm(9, 51)


def test_skip_runs_only_an_occurrence_due_this_minute(cli: Cli, tmp_path: Path) -> None:
    every_minute(tmp_path, "skip")
    run(cli, hm(9))
    later = outcomes(run(cli, hm(9, 10)))
    assert later == [(f"09:{m:02d}", "missed") for m in range(1, 10)] + [("09:10", "ok")]


@pytest.mark.parametrize(
    ("policy", "grace", "expected"),
    [
        ("coalesce", "", [("03:00", "ok")]),
        ("catch-up", "", [("03:00", "ok")]),
        ("skip", "", [("03:00", "missed")]),
        ("coalesce", 'misfire_grace = "1h"', [("03:00", "missed")]),
        ("catch-up", 'misfire_grace = "3h"', [("03:00", "ok")]),
    ],
)
def test_daily_task_with_the_machine_off_from_two_to_five(
    cli: Cli, tmp_path: Path, policy: str, grace: str, expected: list[tuple[str, str]]
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [f'name = "nightly"\ncommand = "true"\ndaily_at = "03:00"\nmisfire = "{policy}"\n{grace}'],
    )
    assert run(cli, hm(1, 59)) == []
    assert run(cli, hm(2)) == []
    assert outcomes(run(cli, hm(5))) == expected
    assert run(cli, hm(5, 1)) == []


def test_paused_task_records_skipped_and_resume_never_catches_up(cli: Cli, tmp_path: Path) -> None:
    every_minute(tmp_path, "catch-up")
    run(cli, hm(9))
    assert cli("pause", "tick", "--reason", "deploy").returncode == 0
    assert outcomes(run(cli, hm(9, 1))) == [("09:01", "skipped: paused")]
    status = json.loads(cli("status", "--json").stdout)["tasks"][0]
    assert status["paused"] is True and status["pause_reason"] == "deploy"
    assert outcomes(run(cli, hm(9, 2))) == [("09:02", "skipped: paused")]
    assert cli("resume", "tick").returncode == 0
    assert outcomes(run(cli, hm(9, 3))) == [("09:03", "ok")]
    assert ledger(tmp_path) == ["09:00", "09:03"]


def test_one_shot_runs_once_then_is_done_for_good(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [f'name = "launch"\ncommand = "echo x >> ledger"\nat = {hm(9, 30)}'],
    )
    run(cli, hm(9))
    assert outcomes(run(cli, hm(10))) == [("09:30", "ok")]  # missed while down: runs late
    assert run(cli, hm(10, 1)) == []
    assert run(cli, hm(12)) == []
    assert (tmp_path / "ledger").read_text() == "x\n"
    status = json.loads(cli("status", "--json").stdout)["tasks"][0]
    assert status["note"] == "one-shot: done"


def test_one_shot_passed_while_paused_stays_not_run(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [f'name = "launch"\ncommand = "echo x >> ledger"\nat = {hm(9, 30)}'],
    )
    run(cli, hm(9))
    cli("pause", "launch")
    assert outcomes(run(cli, hm(9, 30))) == [("09:30", "skipped: paused")]
    cli("resume", "launch")
    assert run(cli, hm(9, 31)) == []
    status = json.loads(cli("status", "--json").stdout)["tasks"][0]
    assert "will not run" in status["note"]
    assert not (tmp_path / "ledger").exists()


def test_edited_schedule_restarts_without_catching_up(cli: Cli, tmp_path: Path) -> None:
    every_minute(tmp_path, "catch-up")
    run(cli, hm(9))
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "tick"\ncommand = "echo $CRONCTL_OCCURRENCE >> ledger"\nevery_minutes = 5\n'
            'misfire = "catch-up"'
        ],
    )
    assert outcomes(run(cli, hm(9, 20))) == [("09:20", "ok")]
    assert ledger(tmp_path) == ["09:00", "09:20"]


def test_clock_set_back_never_repeats_an_occurrence(cli: Cli, tmp_path: Path) -> None:
    every_minute(tmp_path, "catch-up")
    run(cli, hm(10))
    result = cli("run", "--now", hm(9), "--json")
    assert json.loads(result.stdout)["runs"] == []
    assert "behind" in result.stderr
    assert run(cli, hm(9, 30)) == []
    assert outcomes(run(cli, hm(10, 1))) == [("10:01", "ok")]
    assert ledger(tmp_path) == ["10:00", "10:01"]


def test_machine_back_from_downtime_finds_the_occurrence_claimed(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "nightly"\ncommand = "echo $CRONCTL_HOST_TAG >> ledger"\ndaily_at = "03:00"\n'
            "on_one_server = true"
        ],
        header='[cronctl]\nlock_dir = "shared"\nlock_dir_shared = true\n',
    )

    def machine(name: str, now: str) -> list[tuple[str, str]]:
        env = {"CRONCTL_STATE_DIR": str(tmp_path / name), "CRONCTL_HOST_TAG": name}
        result = cli("run", "--now", now, "--json", env=env)
        return outcomes(json.loads(result.stdout)["runs"])

    assert machine("a", hm(2)) == machine("b", hm(2)) == []
    assert machine("a", hm(3)) == [("03:00", "ok")]
    assert machine("b", hm(5)) == [("03:00", "skipped: another server")]
    assert (tmp_path / "ledger").read_text() == "a\n"


def _wait_for_a_running_mark(db_path: Path) -> None:
    """Return once the state database holds a run marked "running" (its command started)."""

    def running() -> bool:
        if not db_path.exists():
            return False
        try:
            db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=1)
            try:
                return bool(db.execute("SELECT 1 FROM runs WHERE outcome = 'running'").fetchone())
            finally:
                db.close()
        except sqlite3.OperationalError:
            return False  # busy, or the table is not made yet

    wait_for(running, "a run marked running")


@pytest.mark.long
def test_kill_9_at_random_moments_loses_no_run_and_repeats_none(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            f'name = "t{i}"\nevery_minute = true\nmisfire = "catch-up"\n'
            'command = "sleep 0.1; '
            'echo $CRONCTL_OCCURRENCE $CRONCTL_RUN_ID >> ledger-$CRONCTL_TASK"'
            for i in range(3)
        ],
        header='[cronctl]\nstate_dir = "state"\n',
    )
    env = FILE_STATE
    rng = random.Random(20261130)
    start = DAY.replace(hour=9)
    for i in range(60):
        proc = cli.popen("run", "--now", iso(start + timedelta(minutes=i)), env=env)
        if i % 10 == 9:
            # Every tenth kill lands while a command runs, whatever the machine's load: the
            # random ones alone may all land before a start on a busy machine.
            _wait_for_a_running_mark(tmp_path / "state" / "state.db")
        else:
            time.sleep(rng.uniform(0.0, 0.35))  # what is tested: a kill at any moment
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    # Tasks orphaned by the last kill end first (their `sleep 0.1`), or they count as alive.
    wait_for(lambda: not running_in(tmp_path), "the orphaned tasks to end")
    recovery = cli("run", "--now", iso(start + timedelta(minutes=61)), env=env)
    # Runs interrupted by the last kill are reported (what cron mails), once; earlier ones
    # were already reported by the runs inside the loop.
    assert recovery.returncode == 0 or "cronctl died" in recovery.stderr
    final = cli("run", "--now", iso(start + timedelta(minutes=62)), env=env)
    assert final.returncode == 0, final.stderr
    wait_for(lambda: not running_in(tmp_path), "the orphaned tasks to finish their echo")
    db = sqlite3.connect(tmp_path / "state" / "state.db")
    try:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        recorded = {row[0] for row in db.execute("SELECT id FROM runs")}
        said_not_run = {
            row[0] for row in db.execute("SELECT id FROM runs WHERE message LIKE '%it did not run'")
        }
        unfinished = db.execute(
            "SELECT count(*) FROM runs WHERE outcome IN ('pending', 'running')"
        ).fetchone()[0]
        recovered = db.execute(
            "SELECT count(*) FROM runs WHERE message LIKE 'cronctl died%'"
        ).fetchone()[0]
    finally:
        db.close()
    assert unfinished == 0
    assert recovered > 0  # the kills did land mid-run, so recovery was exercised
    for i in range(3):
        path = tmp_path / f"ledger-t{i}"
        lines = path.read_text().splitlines() if path.exists() else []
        occurrences = Counter(line.split()[0] for line in lines)
        assert all(count == 1 for count in occurrences.values()), occurrences
        ran = {line.split()[1] for line in lines}
        assert ran <= recorded
        assert not ran & said_not_run  # history never claims a run that happened did not


def test_list_shows_this_machines_last_run_and_operator_pauses(cli: Cli, tmp_path: Path) -> None:
    every_minute(tmp_path, "coalesce")
    before = json.loads(cli("list", "--json", "--now", hm(9)).stdout)["tasks"][0]
    assert before["last_run"] is None and before["paused"] is False
    run(cli, hm(9))
    cli("pause", "tick")
    after = json.loads(cli("list", "--json", "--now", hm(9, 1)).stdout)["tasks"][0]
    assert after["paused"] is True
    assert after["last_run"]["occurrence"] == hm(9) and after["last_run"]["outcome"] == "ok"
    text = cli("list", "--now", hm(9, 1)).stdout.splitlines()[1]
    assert "paused" in text and f"{hm(9)} ok" in text
