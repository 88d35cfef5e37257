"""`cronctl explain`: every reason, against histories made by real `cronctl run --now`.

Times are in 2026-03, before this machine's clock: a --now in the past is a real run
(one ahead of the clock would be a rehearsal, recorded apart)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers import Cli, wait_for, write_schedule

HEADER = '[cronctl]\nlock_dir = "locks"\nlock_dir_shared = true\n'


def setup(tmp_path: Path, *tasks: str) -> None:
    write_schedule(tmp_path / "schedules.toml", list(tasks), header=HEADER)


def run(cli: Cli, now: str, *extra: str) -> None:
    result = cli("run", "--now", now, *extra)
    assert result.returncode in (0, 1), result.stderr


def explain(cli: Cli, name: str, at: str, *extra: str) -> dict[str, Any]:
    result = cli("explain", name, "--at", at, "--format", "json", *extra)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_a_run_says_its_outcome_exit_code_and_log(cli: Cli, tmp_path: Path) -> None:
    setup(tmp_path, 'name = "report"\ncommand = "echo out; exit 3"\nhourly = true')
    run(cli, "2026-03-02T10:00:00Z")
    got = explain(cli, "report", "2026-03-02T10:00:00Z")
    assert (got["due"], got["verdict"]) == (True, "ran")
    [row] = got["runs"]
    assert (row["outcome"], row["exit_code"]) == ("failed", 3)
    assert Path(row["log_path"]).read_text() == "out\n"
    assert "exit code 3" in got["reasons"][1]
    text = cli("explain", "report", "--at", "2026-03-02T10:00:00Z").stdout
    assert text.startswith("report: ran\n")
    assert row["log_path"] in text


def test_not_due_names_the_previous_and_next_occurrences(cli: Cli, tmp_path: Path) -> None:
    setup(tmp_path, 'name = "report"\ncommand = "true"\ncron = "0 */6 * * *"')
    got = explain(cli, "report", "2026-03-02T08:17:00Z")  # nothing ever ran: no state yet
    assert (got["due"], got["verdict"]) == (False, "not-due")
    assert (got["previous"], got["next"]) == ("2026-03-02T06:00:00Z", "2026-03-02T12:00:00Z")
    assert got["fate"] == "not-dealt-with"
    assert not (tmp_path / "home" / "state" / "cronctl").exists()  # explain wrote nothing


def test_paused_says_by_whom_why_and_since(cli: Cli, tmp_path: Path) -> None:
    setup(tmp_path, 'name = "sync"\ncommand = "true"\nhourly = true')
    paused = cli("pause", "sync", "--reason", "disk swap", "--host", "ops-1", env={"USER": "ann"})
    assert paused.returncode == 0, paused.stderr
    run(cli, "2026-03-02T10:00:00Z")
    got = explain(cli, "sync", "2026-03-02T10:00:00Z")
    assert got["verdict"] == "paused"
    assert (got["pause"]["reason"], got["pause"]["user"]) == ("disk swap", "ann")
    assert got["pause"]["host"] == "ops-1" and got["pause"]["since"]
    assert "by ann on ops-1 since" in got["reasons"][2] and "disk swap" in got["reasons"][2]


def test_a_false_condition_is_named(cli: Cli, tmp_path: Path) -> None:
    setup(tmp_path, 'name = "gated"\ncommand = "true"\nhourly = true\nwhen = "test -e go"')
    run(cli, "2026-03-02T10:00:00Z")
    got = explain(cli, "gated", "2026-03-02T10:00:00Z")
    assert got["verdict"] == "condition"
    assert "when = 'test -e go'" in got["reasons"][1]


def test_claimed_by_another_host_sharing_the_lock_dir(cli: Cli, tmp_path: Path) -> None:
    setup(tmp_path, 'name = "once"\ncommand = "true"\nhourly = true\non_one_server = true')
    run(cli, "2026-03-02T10:00:00Z", "--host", "alpha", "--state-dir", "alpha")
    run(cli, "2026-03-02T10:00:00Z", "--host", "beta", "--state-dir", "beta")
    beta = explain(cli, "once", "2026-03-02T10:00:00Z", "--host", "beta", "--state-dir", "beta")
    assert beta["verdict"] == "another-server"
    assert "another machine claimed" in beta["reasons"][1]
    alpha = explain(cli, "once", "2026-03-02T10:00:00Z", "--host", "alpha", "--state-dir", "alpha")
    assert alpha["verdict"] == "ran" and alpha["runs"][0]["host"] == "alpha"


def test_skipped_while_still_running(cli: Cli, tmp_path: Path) -> None:
    setup(
        tmp_path,
        'name = "slow"\ncommand = "touch started; while [ ! -e release ]; do sleep 0.05; done"\n'
        "every_minute = true\nwithout_overlapping = true",
    )
    first = cli.popen("run", "--now", "2026-03-02T10:00:00Z")
    try:
        wait_for((tmp_path / "started").exists, "the first run's task to start")
        run(cli, "2026-03-02T10:01:00Z")
    finally:
        (tmp_path / "release").touch()
        first.communicate(timeout=60)
    got = explain(cli, "slow", "2026-03-02T10:01:00Z")
    assert got["verdict"] == "still-running"
    assert "overlap lock" in got["reasons"][1] and "pid" in got["reasons"][1]


def test_missed_says_what_the_misfire_policy_ran_instead(cli: Cli, tmp_path: Path) -> None:
    setup(tmp_path, 'name = "tick"\ncommand = "true"\nhourly = true')
    run(cli, "2026-03-02T10:00:00Z")
    run(cli, "2026-03-02T14:00:00Z")  # 11:00-13:00 nothing ran
    got = explain(cli, "tick", "2026-03-02T12:00:00Z")
    assert got["verdict"] == "missed"
    assert got["instead"]["occurrence"] == "2026-03-02T14:00:00Z"
    assert "misfire = coalesce" in got["reasons"][1]


def test_a_dst_gap_says_the_rule_that_applied(cli: Cli, tmp_path: Path) -> None:
    setup(
        tmp_path,
        'name = "nightly"\ncommand = "true"\ncron = "30 2 * * *"\ntimezone = "Europe/Berlin"',
    )
    run(cli, "2026-03-29T01:00:00Z")  # 02:30 never happened: it runs at 03:00 CEST
    got = explain(cli, "nightly", "2026-03-29T01:00:00Z")
    assert (got["due"], got["verdict"]) == (True, "ran")
    assert "never happened in Europe/Berlin" in got["dst"]
    assert "02:30" in got["dst"]


def test_a_dst_fold_says_which_pass(cli: Cli, tmp_path: Path) -> None:
    setup(
        tmp_path,
        'name = "often"\ncommand = "true"\ncron = "*/30 2 * * *"\ntimezone = "Europe/Berlin"',
    )
    first = explain(cli, "often", "2026-10-25T00:30:00Z")  # 02:30 CEST
    second = explain(cli, "often", "2026-10-25T01:30:00Z")  # 02:30 CET
    assert "first pass" in first["dst"] and "second pass" in second["dst"]


def test_hosts_not_matching_this_machine(cli: Cli, tmp_path: Path) -> None:
    setup(tmp_path, 'name = "web"\ncommand = "true"\nhourly = true\nhosts = ["web-*"]')
    got = explain(cli, "web", "2026-03-02T10:00:00Z", "--host", "db-1")
    assert got["verdict"] == "host-not-matched"
    assert "db-1" in got["reasons"][1]


def test_an_unknown_task_suggests_the_closest_name(cli: Cli, tmp_path: Path) -> None:
    setup(tmp_path, 'name = "backup"\ncommand = "true"\nhourly = true')
    result = cli("explain", "bakcup")
    assert result.returncode == 2
    assert "no task named 'bakcup'" in result.stderr and "did you mean 'backup'" in result.stderr


def test_a_bad_at_is_a_located_usage_error(cli: Cli, tmp_path: Path) -> None:
    setup(tmp_path, 'name = "backup"\ncommand = "true"\nhourly = true')
    for bad in ("yesterday", "2026-03-02T10:00:00"):
        result = cli("explain", "backup", "--at", bad)
        assert result.returncode == 2
        assert f"--at {bad!r}" in result.stderr
    result = cli("explain", "backup", "--format", "yaml")
    assert result.returncode == 2 and "--format 'yaml'" in result.stderr


def test_an_occurrence_before_the_task_was_first_seen(cli: Cli, tmp_path: Path) -> None:
    setup(tmp_path, 'name = "tick"\ncommand = "true"\nhourly = true')
    run(cli, "2026-03-02T10:30:00Z")  # first sight: 10:00 and earlier never count
    got = explain(cli, "tick", "2026-03-02T10:00:00Z")
    assert got["verdict"] == "before-first-seen"
    assert "first dealt with the task after it" in got["reasons"][1]
