"""metrics_file: Prometheus text format, parsed by prometheus-client, matching history."""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.helpers import Cli, metric_samples, write_schedule

HEADER = '[cronctl]\nmetrics_file = "metrics/cronctl.prom"\n'


def _at(minute: int) -> str:
    return f"2026-08-03T09:{minute:02d}:00Z"


@pytest.fixture
def metrics_dir(tmp_path: Path) -> Path:
    (tmp_path / "metrics").mkdir()
    return tmp_path / "metrics"


def test_metrics_parse_and_match_history(cli: Cli, tmp_path: Path, metrics_dir: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "good"\ncommand = "true"\nevery_minute = true',
            'name = "bad"\ncommand = "exit 4"\nevery_minute = true',
            'name = "sometimes"\ncommand = "[ -e up ]"\nevery_minutes = 5',
        ],
        header=HEADER,
    )
    (tmp_path / "up").touch()
    for minute in (0, 1, 4, 5, 6):  # good and bad miss 2-3 here, 7-9 below (coalesce)
        cli("run", "--now", _at(minute))
    (tmp_path / "up").unlink()
    cli("run", "--now", _at(10))
    samples = metric_samples((metrics_dir / "cronctl.prom").read_text())
    history = json.loads(cli("history", "--json", "--limit", "100").stdout)["runs"]
    status = {
        t["name"]: t for t in json.loads(cli("status", "--json", "--now", _at(10)).stdout)["tasks"]
    }

    def value(name: str, task: str, **labels: str) -> float:
        return samples[(name, tuple(sorted({"task": task, **labels}.items())))]

    counts = Counter((r["task"], r["outcome"]) for r in history)
    for (task, outcome), count in counts.items():
        assert value("cronctl_runs_total", task, outcome=outcome) == count
    assert value("cronctl_missed_total", "good") == status["good"]["missed"] == 5  # 2-3, 7-9
    assert value("cronctl_consecutive_failures", "bad") == 6
    assert value("cronctl_consecutive_failures", "sometimes") == 1
    assert value("cronctl_last_exit_code", "bad") == 4
    assert value("cronctl_last_exit_code", "sometimes") == 1
    ran = [r for r in history if r["task"] == "good" and r["outcome"] == "ok"]
    last_good = max(ran, key=lambda r: r["started"])
    started = datetime.fromisoformat(last_good["started"]).timestamp()
    assert abs(value("cronctl_last_run_timestamp_seconds", "good") - started) < 1
    assert ("cronctl_last_success_timestamp_seconds", (("task", "bad"),)) not in samples
    ok_sometimes = [r for r in history if r["task"] == "sometimes" and r["outcome"] == "ok"]
    assert len(ok_sometimes) == 2
    expected_next = datetime(2026, 8, 3, 9, 15, tzinfo=UTC).timestamp()
    assert value("cronctl_next_run_timestamp_seconds", "sometimes") == expected_next
    assert value("cronctl_last_duration_seconds", "good") >= 0


def test_the_file_is_replaced_never_written_through_a_planted_link(
    cli: Cli, tmp_path: Path, metrics_dir: Path
) -> None:
    write_schedule(
        tmp_path / "schedules.toml", ['name = "a"\ncommand = "true"\nevery_minute = true'], HEADER
    )
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (metrics_dir / "cronctl.prom").symlink_to(victim)
    assert cli("run", "--now", _at(0)).returncode == 0
    target = metrics_dir / "cronctl.prom"
    assert not target.is_symlink() and "cronctl_runs_total" in target.read_text()
    assert victim.read_text() == "precious\n"
    umask = os.umask(0o022)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o644 & ~umask  # node_exporter must read it
    assert [p.name for p in metrics_dir.iterdir()] == ["cronctl.prom"]  # no temp file left


def test_an_unwritable_metrics_file_is_a_warning_once_not_a_failed_run(
    cli: Cli, tmp_path: Path
) -> None:
    write_schedule(
        tmp_path / "schedules.toml", ['name = "a"\ncommand = "true"\nevery_minute = true'], HEADER
    )
    first = cli("run", "--now", _at(0))  # metrics/ does not exist
    assert first.returncode == 0
    assert "cannot write metrics_file" in first.stderr
    second = cli("run", "--now", _at(1))
    assert second.returncode == 0 and second.stderr == ""


def test_metrics_file_is_read_against_the_schedule_files_directory(
    cli: Cli, tmp_path: Path
) -> None:
    sub = tmp_path / "conf"
    sub.mkdir()
    (sub / "metrics").mkdir()
    write_schedule(sub / "s.toml", ['name = "a"\ncommand = "true"\nevery_minute = true'], HEADER)
    assert cli("run", "-f", str(sub / "s.toml"), "--now", _at(0)).returncode == 0
    assert (sub / "metrics" / "cronctl.prom").is_file()
