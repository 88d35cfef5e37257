"""`on_start = true` in the schedule file: what `check`, `list`, `next` and `import` make of it."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from tests.helpers import Cli, write_schedule

START_ONLY = 'name = "warm"\non_start = true\ncommand = "./warm-cache"'
BOTH = 'name = "both"\non_start = true\ndaily_at = "03:00"\ncommand = "./sync"'


def _check(cli: Cli, *tasks: str, header: str = "") -> tuple[int, list[dict[str, object]]]:
    write_schedule(cli.cwd / "schedules.toml", list(tasks), header)
    checked = cli("check", "--format", "json")
    problems: list[dict[str, object]] = json.loads(checked.stdout)["problems"]
    return checked.returncode, problems


def test_a_task_with_on_start_and_no_schedule_is_valid(cli: Cli) -> None:
    code, problems = _check(cli, START_ONLY, BOTH)
    assert (code, problems) == (0, [])


def test_on_start_false_is_no_schedule(cli: Cli) -> None:
    code, problems = _check(cli, 'name = "x"\non_start = false\ncommand = "true"')
    assert code == 1
    (problem,) = problems
    assert problem["code"] == "missing-key"
    assert "on_start = true" in str(problem["message"])


def test_day_keys_need_a_schedule_besides_on_start(cli: Cli) -> None:
    code, problems = _check(cli, START_ONLY + "\nweekdays = true")
    assert code == 1
    (problem,) = problems
    assert (problem["code"], problem["line"]) == ("schedule-conflict", 6)
    assert "weekdays" in str(problem["message"])


def test_on_start_is_a_task_key_not_a_default(cli: Cli) -> None:
    code, problems = _check(cli, START_ONLY, header="[defaults]\non_start = true\n")
    assert code == 1
    assert [p["code"] for p in problems] == ["unknown-key"]
    assert "belongs in each [[task]]" in str(problems[0]["message"])


def test_on_start_wants_a_bool(cli: Cli) -> None:
    code, problems = _check(cli, 'name = "x"\non_start = "yes"\ncommand = "true"\nhourly = true')
    assert code == 1
    assert [(p["code"], p["line"]) for p in problems] == [("bad-type", 4)]


def test_check_warns_that_on_start_runs_on_every_server(cli: Cli) -> None:
    header = '[cronctl]\nlock_dir_shared = true\nlock_dir = "locks"\n'
    code, problems = _check(cli, BOTH + "\non_one_server = true", header=header)
    assert code == 0
    (problem,) = problems
    assert (problem["severity"], problem["code"]) == ("warning", "on-start-every-server")


def test_a_cron_reboot_macro_says_to_use_on_start(cli: Cli) -> None:
    code, problems = _check(cli, 'name = "x"\ncron = "@reboot"\ncommand = "true"')
    assert code == 1
    assert "on_start = true" in str(problems[0]["message"])


def test_list_and_next_show_a_start_only_task(cli: Cli) -> None:
    write_schedule(cli.cwd / "schedules.toml", [START_ONLY, BOTH])
    listed = cli("list")
    assert listed.returncode == 0, listed.stderr
    warm = next(line for line in listed.stdout.splitlines() if line.startswith("warm"))
    assert "@start" in warm and "at work start" in warm
    cli("run")  # makes the state `status` reads; runs no start-up task
    status = cli("status").stdout.splitlines()
    assert "at work start" in next(line for line in status if line.startswith("warm"))
    both = next(line for line in listed.stdout.splitlines() if line.startswith("both"))
    assert "on-start" in both
    as_json = {t["name"]: t for t in json.loads(cli("list", "--json").stdout)["tasks"]}
    assert (as_json["warm"]["schedule"], as_json["warm"]["next_run"]) == ("@start", None)
    nxt = cli("next", "warm")
    assert (nxt.returncode, nxt.stdout) == (0, "")
    assert "runs once each time cronctl work starts" in nxt.stderr
    assert json.loads(cli("next", "warm", "--json").stdout)["occurrences"] == []
    assert "runs only when cronctl work starts" in cli("explain", "warm").stdout


def test_import_maps_reboot_lines_to_on_start(cli: Cli, tmp_path: Path) -> None:
    crontab = tmp_path / "crontab"
    crontab.write_text("@reboot /srv/app/bin/warm-cache\n0 3 * * * /srv/app/bin/backup\n")
    imported = cli("import", str(crontab), "-o", str(tmp_path / "out.toml"))
    assert imported.returncode == 0, imported.stderr  # nothing left out
    assert "crontab:1: note: @reboot became on_start = true" in imported.stderr
    tasks = tomllib.loads((tmp_path / "out.toml").read_text())["task"]
    assert tasks[0]["command"] == "/srv/app/bin/warm-cache"
    assert tasks[0]["on_start"] is True
    assert not {"cron", "daily", "hourly"} & set(tasks[0])
    checked = cli("check", "-f", str(tmp_path / "out.toml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
