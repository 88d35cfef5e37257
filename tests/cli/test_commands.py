"""check, list, next, due, init and the library API, as a user calls them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from cronctl import load
from tests.helpers import Cli, write_schedule

NOW = "2026-08-03T08:00:00Z"
TASKS = [
    'name = "digest"\ncommand = "true"\ndaily_at = "09:00"\nweekdays = true\n'
    'timezone = "Europe/Berlin"\ndescription = "morning digest"',
    'name = "sweep"\ncommand = ["true"]\ncron = "*/15 * * * *"\nwithout_overlapping = "5m"\n'
    'timeout = "10m"',
    'name = "launch"\ncommand = "true"\nat = 2030-01-15T09:00:00Z',
    'name = "off"\ncommand = "true"\nhourly = true\npaused = true',
]


def test_check_passes_a_good_file_and_says_so(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", TASKS)
    result = cli("check", "--now", NOW)
    assert result.returncode == 0, result.stdout
    assert result.stdout.strip() == "ok: 4 tasks in 1 file; 0 errors, 0 warnings"


def test_check_warns_day_or_day_and_strict_fails_on_it(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml", ['name = "odd"\ncommand = "true"\ncron = "0 0 13 * 5"']
    )
    relaxed = cli("check", "--now", NOW, "--format", "json")
    report = json.loads(relaxed.stdout)
    assert relaxed.returncode == 0 and report["ok"] is True
    assert [(p["code"], p["severity"], p["line"]) for p in report["problems"]] == [
        ("day-or-day", "warning", 3)
    ]
    strict = cli("check", "--now", NOW, "--strict")
    assert strict.returncode == 1
    assert "schedules.toml:3: task odd: warning: schedule '0 0 13 * 5'" in strict.stdout


def test_check_github_format_annotates_file_and_line(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml", ['name = "x"\ncommand = "true"\ncron = "0 25 * * *"']
    )
    result = cli("check", "--format", "github")
    assert result.returncode == 1
    assert result.stdout.startswith(
        "::error file=schedules.toml,line=5,title=cronctl cron-syntax::"
    )


def test_check_judges_the_lock_dir_only_where_it_exists(cli: Cli, tmp_path: Path) -> None:
    task = ['name = "once"\ncommand = "true"\nhourly = true\non_one_server = true']
    write_schedule(tmp_path / "absent.toml", task, header='[cronctl]\nlock_dir = "nowhere"\n')
    quiet = cli("check", "-f", "absent.toml", "--now", NOW, "--format", "json")
    assert json.loads(quiet.stdout)["problems"] == []
    (tmp_path / "here").mkdir()
    write_schedule(tmp_path / "present.toml", task, header='[cronctl]\nlock_dir = "here"\n')
    loud = cli("check", "-f", "present.toml", "--now", NOW, "--format", "json")
    codes = [p["code"] for p in json.loads(loud.stdout)["problems"]]
    assert codes == ["lock-dir-not-shared"]


def test_check_on_a_missing_file_exits_2_with_a_hint(cli: Cli) -> None:
    result = cli("check")
    assert result.returncode == 2
    assert "schedules.toml: no such schedule file (create one with `cronctl init`)" in result.stderr


def test_list_json_has_the_spec_shape(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", TASKS)
    result = cli("list", "--json", "--now", NOW)
    assert result.returncode == 0
    data = json.loads(result.stdout)
    rows = {t["name"]: t for t in data["tasks"]}
    assert rows["digest"] | {"hosts": [], "other_hosts": False} == {
        "name": "digest", "schedule": "0 9 * * 1-5", "timezone": "Europe/Berlin",
        "next_run": "2026-08-04T07:00:00Z", "guards": [], "paused": False, "last_run": None,
        "schedule_words": "at 09:00, Monday through Friday (Europe/Berlin time)",
        "hosts": [], "other_hosts": False,  # keys may be added, never renamed
        "after": [], "after_outcome": None,
    }  # fmt: skip
    assert rows["sweep"]["guards"] == ["no-overlap(5m)", "timeout(10m)"]
    assert rows["launch"]["schedule"] == "@at 2030-01-15T09:00:00Z"
    assert rows["off"]["paused"] is True
    assert data["problems"] == []


def test_list_plain_text_when_piped(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", TASKS)
    lines = cli("list", "--now", NOW).stdout.splitlines()
    assert lines[0].split() == [
        "TASK",
        "SCHEDULE",
        "TIMEZONE",
        "NEXT",
        "RUN",
        "GUARDS",
        "LAST",
        "RUN",
        "WHEN",
    ]
    assert lines[1].split()[:4] == ["digest", "0", "9", "*"]
    assert "paused" in lines[4]


def test_list_shows_good_tasks_then_problems_and_exits_2(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml", [TASKS[0], 'name = "digest"\ncommand = "true"\nhourly = true']
    )
    result = cli("list", "--now", NOW)
    assert result.returncode == 2
    assert result.stdout.splitlines()[1].startswith("digest")
    assert "schedules.toml:11: task digest: task name 'digest' is already used" in result.stderr


def test_next_for_a_task_and_for_an_expression(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", TASKS)
    task = json.loads(cli("next", "digest", "-n", "2", "--after", NOW, "--json").stdout)
    # Keys may be added, never renamed: `details` says how many runs each instant gets.
    assert [d["runs"] for d in task.pop("details")] == [1, 1]
    assert task == {
        "task": "digest", "expression": "0 9 * * 1-5", "timezone": "Europe/Berlin",
        "occurrences": ["2026-08-04T07:00:00Z", "2026-08-05T07:00:00Z"],
        "after": [], "upstream_roots": [],
    }  # fmt: skip
    text = cli(
        "next",
        "--cron",
        "30 2 * * *",
        "--tz",
        "Europe/Berlin",
        "-n",
        "3",
        "--after",
        "2026-03-27T00:00:00Z",
    ).stdout.splitlines()
    assert [line.split()[0] for line in text] == [
        "2026-03-27T01:30:00Z",
        "2026-03-28T01:30:00Z",
        "2026-03-29T01:00:00Z",
    ]
    bad = cli("next", "--cron", "0 0 30 2 *")
    assert bad.returncode == 2 and "can never fire" in bad.stderr
    unknown = cli("next", "nope")
    assert unknown.returncode == 2 and "no task named 'nope'" in unknown.stderr


def test_due_names_the_tasks_of_this_minute(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", TASKS)
    assert json.loads(cli("due", "--now", "2026-08-03T09:15:00Z", "--json").stdout) == {
        "at": "2026-08-03T09:15:00Z", "due": ["sweep"],
    }  # fmt: skip
    # A paused task is still due: `due` reads the schedule alone; `run` skips it.
    assert cli("due", "--now", "2026-08-03T07:00:00Z").stdout == "digest\nsweep\noff\n"
    bad = cli("due", "--now", "yesterday")
    assert bad.returncode == 2 and "--now 'yesterday' is not ISO 8601" in bad.stderr


def test_init_writes_a_file_that_passes_and_never_overwrites(cli: Cli, tmp_path: Path) -> None:
    assert cli("init").returncode == 0
    assert cli("check").returncode == 0
    again = cli("init")
    assert again.returncode == 2 and "already exists" in again.stderr
    assert cli("init", "--force").returncode == 0


def test_version_and_help(cli: Cli) -> None:
    assert cli("--version").stdout.startswith("cronctl ")
    help_text = cli("--help").stdout
    for command in (
        "check",
        "list",
        "next",
        "due",
        "run",
        "work",
        "status",
        "history",
        "logs",
        "pause",
        "resume",
        "import",
        "init",
    ):
        assert command in help_text


def test_library_api_of_spec_section_7(tmp_path: Path) -> None:
    path = write_schedule(tmp_path / "schedules.toml", TASKS)
    schedule = load(path)
    assert not schedule.errors and not schedule.duplicate_names()
    due = [t.name for t in schedule.due(datetime(2026, 8, 3, 7, 0, tzinfo=UTC))]
    assert due == ["digest", "sweep", "off"]
    runs = schedule.task("sweep").next_runs(after=datetime(2026, 8, 3, 9, 0, tzinfo=UTC), count=3)
    assert [r.strftime("%H:%M") for r in runs] == ["09:15", "09:30", "09:45"]
