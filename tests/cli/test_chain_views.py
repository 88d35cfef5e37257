"""Seeing a chain (`after`): list, status, next, due, timeline, check, explain and export show
a chained task by what it follows, never a time of its own (docs/chains.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import clean_env, invoke, write_schedule

NOW = "2026-08-03T08:00:00Z"
ETL = [
    'name = "extract"\ncommand = "true"\ndaily_at = "02:00"\ntimezone = "Europe/Berlin"',
    'name = "transform"\ncommand = "true"\nafter = "extract"',
    'name = "load"\ncommand = "true"\nafter = ["transform"]',
    'name = "page-oncall"\ncommand = "true"\nafter = ["extract", "transform", "load"]\n'
    'after_outcome = "failed"',
    'name = "report"\ncommand = "true"\nafter = ["load"]\nafter_outcome = "any"',
]
HEADER = '[cronctl]\nstate_dir = "state"\nlock_dir = "locks"\n'


@pytest.fixture
def etl(tmp_path: Path) -> Path:
    return write_schedule(tmp_path / "schedules.toml", ETL, HEADER)


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return invoke(*args, cwd=tmp_path, env=clean_env(tmp_path))


def test_list_shows_after_in_place_of_a_schedule_and_a_next_run(etl: Path, tmp_path: Path) -> None:
    result = _run(tmp_path, "list", "--now", NOW)
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    assert rows["transform"].split(None, 6)[1:6] == [
        "after", "extract", "-", "after", "extract"
    ]  # fmt: skip
    assert rows["transform"].endswith("after extract succeeds")
    assert rows["page-oncall"].endswith("after extract, transform and load end, if one failed")
    assert rows["report"].endswith("after load ends")
    tasks = {
        t["name"]: t
        for t in json.loads(_run(tmp_path, "list", "--json", "--now", NOW).stdout)["tasks"]
    }
    assert tasks["load"]["schedule"] == "after transform"
    assert tasks["load"]["next_run"] is None
    assert (tasks["load"]["after"], tasks["load"]["after_outcome"]) == (["transform"], "ok")
    assert (tasks["extract"]["after"], tasks["extract"]["after_outcome"]) == ([], None)


def test_status_says_after_as_the_next_run(etl: Path, tmp_path: Path) -> None:
    result = _run(tmp_path, "status", "--now", NOW)
    assert result.returncode == 0, result.stderr
    load = next(line for line in result.stdout.splitlines() if line.startswith("load "))
    assert "after transform" in load
    rows = json.loads(_run(tmp_path, "status", "--json", "--now", NOW).stdout)["tasks"]
    assert {r["name"]: r["after"] for r in rows}["report"] == ["load"]


def test_next_lists_the_chain_roots_times_and_says_so(etl: Path, tmp_path: Path) -> None:
    result = _run(tmp_path, "next", "load", "-n", "2", "--after", NOW)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "2026-08-04T00:00:00Z", "Tue", "2026-08-04", "02:00", "Europe/Berlin",
        "2026-08-05T00:00:00Z", "Wed", "2026-08-05", "02:00", "Europe/Berlin",
    ]  # fmt: skip
    assert "task load runs after transform, not at times of its own" in result.stderr
    assert "the occurrences of extract" in result.stderr
    shown = json.loads(_run(tmp_path, "next", "load", "-n", "1", "--after", NOW, "--json").stdout)
    assert shown["occurrences"] == ["2026-08-04T00:00:00Z"]
    assert (shown["after"], shown["upstream_roots"]) == (["transform"], ["extract"])


def test_due_names_only_the_timed_task_at_its_minute(etl: Path, tmp_path: Path) -> None:
    result = _run(tmp_path, "due", "--now", "2026-08-04T00:00:00Z")
    assert result.stdout.split() == ["extract"]


def test_timeline_counts_chained_tasks_at_their_roots_times_and_not_when_held(
    tmp_path: Path,
) -> None:
    write_schedule(tmp_path / "schedules.toml", [*ETL[:3],
                   'name = "held"\ncommand = "true"\ndaily_at = "05:00"\npaused = true',
                   'name = "after-held"\ncommand = "true"\nafter = "held"'], HEADER)  # fmt: skip
    result = _run(tmp_path, "timeline", "--json", "--days", "2", "--now", NOW)
    assert result.returncode == 0, result.stderr
    lanes = {lane["name"]: lane for lane in json.loads(result.stdout)["tasks"]}
    assert lanes["load"]["runs"] == lanes["extract"]["runs"] == 2
    assert lanes["load"]["per_hour"] == lanes["extract"]["per_hour"]
    assert lanes["after-held"]["runs"] == 0
    # One task asked for: its root is still found in the whole schedule.
    alone = _run(tmp_path, "timeline", "--json", "--days", "2", "--task", "load", "--now", NOW)
    assert json.loads(alone.stdout)["tasks"][0]["runs"] == 2


def test_check_and_explain_take_chained_tasks_in_their_stride(etl: Path, tmp_path: Path) -> None:
    # herd_limit 1: the herd analysis meets the chained tasks (which start no minute).
    text = etl.read_text().replace("[cronctl]\n", "[cronctl]\nherd_limit = 1\n")
    etl.write_text(text + '\n[[task]]\nname = "x"\ncommand = "true"\ndaily_at = "02:00"\n'
                   'timezone = "Europe/Berlin"\n')  # fmt: skip
    checked = _run(tmp_path, "check", "--now", NOW)
    assert checked.returncode == 0, checked.stdout
    assert "2 tasks start in the same minute" in checked.stdout
    assert "transform" not in checked.stdout
    explained = _run(tmp_path, "explain", "load", "--at", "2026-08-04T00:00:00Z")
    assert explained.returncode == 0, explained.stderr
    assert "after transform" in explained.stdout


def test_export_systemd_starts_a_chain_from_its_upstream_units(etl: Path, tmp_path: Path) -> None:
    out = tmp_path / "units"
    result = _run(tmp_path, "export", "systemd", str(out), "--user", "app", "--now", NOW)
    assert result.returncode == 0, result.stderr  # page-oncall is said, not an error
    files = sorted(p.name for p in out.iterdir())
    assert files == [
        "cronctl-extract.service", "cronctl-extract.timer", "cronctl-load.service",
        "cronctl-report.service", "cronctl-transform.service",
    ]  # fmt: skip
    units = {name: (out / name).read_text() for name in files}
    assert "OnSuccess=cronctl-transform.service" in units["cronctl-extract.service"]
    assert "OnSuccess=cronctl-load.service" in units["cronctl-transform.service"]
    load = units["cronctl-load.service"]
    assert "OnSuccess=cronctl-report.service\nOnFailure=cronctl-report.service" in load
    unit_section = units["cronctl-report.service"].partition("[Service]")[0]
    assert "\nOnSuccess=" not in unit_section and "\nOnFailure=" not in unit_section
    assert (
        "task page-oncall: NOT EXPORTED: after extract, transform, load: systemd starts a unit "
        "when one unit ends, not when several have" in result.stderr
    )
    assert "task load: not expressed: after transform: the service has no timer" in result.stderr
    if shutil.which("systemd-analyze") is not None:
        verify = subprocess.run(["systemd-analyze", "verify", "--man=no", *files],
                                capture_output=True, text=True, check=False, cwd=out)  # fmt: skip
        assert verify.returncode == 0, verify.stderr


def test_export_systemd_failure_branch_is_on_failure(tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", [ETL[0],
                   'name = "page"\ncommand = "true"\nafter = "extract"\nafter_outcome = "failed"'],
                   HEADER)  # fmt: skip
    result = _run(tmp_path, "export", "systemd", "--user", "app", "--now", NOW)
    assert result.returncode == 0, result.stderr
    assert "OnFailure=cronctl-page.service" in result.stdout
    assert "\nOnSuccess=" not in result.stdout


def test_export_kubernetes_lists_chained_tasks_as_not_exported(etl: Path, tmp_path: Path) -> None:
    result = _run(tmp_path, "export", "kubernetes", "--image", "app:1", "--now", NOW)
    assert result.returncode == 0, result.stderr
    assert 'cronctl/task: "extract"' in result.stdout
    assert "transform" not in result.stdout
    assert (
        "task transform: NOT EXPORTED: after extract: Kubernetes starts no CronJob when another "
        "ends" in result.stderr
    )
