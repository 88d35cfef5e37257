"""A state directory where nothing has run yet (docs/commands.md#cronctl-status-history-logs):
right after `cronctl init`, `status`, `history` and `logs` show the tasks as never ran, exit
0, name the directory in one line on stderr, and create nothing. Real processes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import Cli

NEW = "2026-12-03T08:03:00Z"


def _fresh(cli: Cli, tmp_path: Path) -> tuple[list[str], Path]:
    assert cli("init").returncode == 0
    state = tmp_path / "home" / "state" / "cronctl"  # the tests' CRONCTL_STATE_DIR
    assert not state.exists()
    return ["--state-dir", str(state)], state


def _said(stderr: str, state: Path) -> None:
    assert stderr.splitlines() == [f"cronctl: nothing has run with state dir {state} yet"]


def test_status_after_init_shows_every_task_as_never_ran(cli: Cli, tmp_path: Path) -> None:
    where, state = _fresh(cli, tmp_path)
    listed = json.loads(cli("list", "--json").stdout)["tasks"]
    shown = cli("status", "--json", "--now", NEW, *where)
    assert shown.returncode == 0, shown.stderr
    _said(shown.stderr, state)
    tasks = json.loads(shown.stdout)["tasks"]
    assert [t["name"] for t in tasks] == [t["name"] for t in listed]
    assert all(t["last_run"] is None and t["consecutive_failures"] == 0 for t in tasks)
    text = cli("status", "--now", NEW, *where)
    assert text.returncode == 0, text.stderr
    _said(text.stderr, state)
    rows = [line.split() for line in text.stdout.splitlines()[1:]]
    assert [r[0] for r in rows] == [t["name"] for t in listed]
    assert all(r[1:4] == ["-", "-", "-"] for r in rows)  # last run, outcome, duration
    assert not state.exists()


def test_status_check_fails_until_something_has_run(cli: Cli, tmp_path: Path) -> None:
    """A probe on a wrong --state-dir must not pass: nothing there is failing or overdue."""
    where, state = _fresh(cli, tmp_path)
    probe = cli("status", "--check", "--now", NEW, *where)
    assert probe.returncode == 1
    assert probe.stderr.splitlines() == [
        f"cronctl: nothing has run with state dir {state} yet: --check fails until something has"
    ]
    assert cli("run", "--now", NEW, *where).returncode == 0
    assert cli("status", "--check", "--now", NEW, *where).returncode == 0


def test_history_after_init_is_an_empty_list(cli: Cli, tmp_path: Path) -> None:
    where, state = _fresh(cli, tmp_path)
    shown = cli("history", "--json", *where)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == {"runs": []}
    _said(shown.stderr, state)
    text = cli("history", "heartbeat", "--failed", *where)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ID  TASK  OCCURRENCE"), text.stdout  # no runs
    _said(text.stderr, state)
    # A name neither in the schedule nor in history is still a mistake.
    wrong = cli("history", "heartbaet", *where)
    assert wrong.returncode == 2 and "no such task 'heartbaet'" in wrong.stderr
    assert not state.exists()


def test_logs_after_init_says_the_task_never_ran(cli: Cli, tmp_path: Path) -> None:
    where, state = _fresh(cli, tmp_path)
    for args in (["heartbeat"], ["heartbeat", "--tail", "5"], ["heartbeat", "-f"]):
        shown = cli("logs", *args, *where)
        assert shown.returncode == 0, (args, shown.stderr)
        assert shown.stdout == ""
        assert shown.stderr.splitlines() == [
            f"cronctl: heartbeat never ran: nothing has run with state dir {state} yet"
        ]
    wrong = cli("logs", "heartbaet", *where)
    assert wrong.returncode == 2 and "no such task 'heartbaet'" in wrong.stderr
    assert not state.exists()


def test_an_existing_empty_state_dir_stays_empty(cli: Cli, tmp_path: Path) -> None:
    where, state = _fresh(cli, tmp_path)
    state.mkdir(parents=True, mode=0o700)
    for args in (["status"], ["history"], ["logs", "heartbeat"]):
        shown = cli(*args, *where)
        assert shown.returncode == 0, (args, shown.stderr)
        assert f"nothing has run with state dir {state} yet" in shown.stderr
    assert cli("explain", "heartbeat", "--at", NEW, *where).returncode == 0
    assert list(state.iterdir()) == []


def test_once_something_ran_the_line_is_gone(cli: Cli, tmp_path: Path) -> None:
    where, state = _fresh(cli, tmp_path)
    assert cli("run", "--now", NEW, *where).returncode == 0
    for args in (["status"], ["history"]):
        shown = cli(*args, *where)
        assert shown.returncode == 0 and "nothing has run" not in shown.stderr, shown.stderr
    # A task that has not run on a machine where others have: said, not an error.
    shown = cli("logs", "weekly-backup", *where)
    assert shown.returncode == 0
    assert shown.stderr.splitlines() == [f"cronctl: weekly-backup never ran: none in {state}"]
