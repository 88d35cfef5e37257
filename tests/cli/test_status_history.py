"""What `status` and `history` say in text, and `history`'s filters (the
loaded schedule's tasks unless --all, docs/commands.md). Real processes, a real state directory."""

from __future__ import annotations

import json
import os
import pwd
import re
from pathlib import Path

from tests.helpers import Cli, write_schedule

T = "2026-08-03T09:00:00Z"
BEAT = 'name = "beat"\ncommand = "true"\nevery_minute = true'
GOOD = 'name = "good"\ncommand = "true"\nevery_minute = true'


def at(minute: int) -> str:
    return f"2026-08-03T09:{minute:02d}:00Z"


def _table(out: str) -> dict[str, dict[str, str]]:
    """A piped table by its first column, each row's cells by header (split at the header's
    column starts: cells may hold single spaces)."""
    lines = out.splitlines()
    header = lines[0]
    names = re.split(r" {2,}", header)
    starts = [header.index(n) for n in names]  # the headers are distinct
    rows = {}
    for line in lines[1:]:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        rows.setdefault(cells[0], dict(zip(names, cells, strict=True)))
    return rows


def test_status_text_says_who_paused_since_when_and_why_with_escapes_made_visible(
    cli: Cli, tmp_path: Path
) -> None:
    path = write_schedule(tmp_path / "s.toml", [BEAT])
    assert cli("run", "-f", str(path), "--now", T).returncode == 0
    reason = "db\x1b[31m move\nforged row"
    paused = cli("pause", "beat", "-f", str(path), "--reason", reason, env={"USER": "alice"})
    assert paused.returncode == 0, paused.stderr
    out = cli("status", "-f", str(path), "--now", at(1), env={"CRONCTL_HOST": "web-1"}).stdout
    assert "\x1b" not in out and len(out.splitlines()) == 2, out  # one row: no forged line
    note = out.splitlines()[1]
    assert "paused by alice on " in note and " since 20" in note, out
    assert note.endswith(": db^[[31m move^Jforged row"), out
    shown = json.loads(cli("status", "-f", str(path), "--json").stdout)["tasks"][0]
    assert shown["pause"]["reason"] == reason and shown["pause"]["user"] == "alice"


def test_a_pause_without_user_or_logname_is_by_the_account_name_not_its_uid(
    cli: Cli, tmp_path: Path
) -> None:
    # Under cron, `sudo -i` or in a container neither variable may be set: the pause is by
    # the uid's account, as `id -un` says, not by the bare number.
    path = write_schedule(tmp_path / "s.toml", [BEAT])
    assert cli("run", "-f", str(path), "--now", T).returncode == 0
    paused = cli("pause", "beat", "-f", str(path), env={"USER": None, "LOGNAME": None})
    assert paused.returncode == 0, paused.stderr
    shown = json.loads(cli("status", "-f", str(path), "--json").stdout)["tasks"][0]
    assert shown["pause"]["user"] == pwd.getpwuid(os.getuid()).pw_name


def test_status_and_history_tell_manual_runs_and_retries_from_scheduled_ones(
    cli: Cli, tmp_path: Path
) -> None:
    path = write_schedule(
        tmp_path / "s.toml",
        [
            'name = "flaky"\ncommand = "exit 3"\nevery_minute = true\nretries = 1\n'
            'retry_delay = "1s"',
            'name = "beat"\ncommand = "true"\nevery_minute = true',
        ],
    )
    assert cli("run", "-f", str(path), "--now", T).returncode == 1
    assert cli("exec", "beat", "-f", str(path)).returncode == 0
    status = _table(cli("status", "-f", str(path), "--now", at(1)).stdout)
    assert status["flaky"]["OUTCOME"] == "failed (attempt 2)"
    assert status["beat"]["OUTCOME"] == "ok (manual)"
    history = _table(cli("history", "-f", str(path)).stdout).values()
    kinds = sorted((r["TASK"], r["OUTCOME"], r["TRIGGER"]) for r in history)
    assert kinds == [
        ("beat", "ok", "manual"), ("beat", "ok", "schedule"),
        ("flaky", "failed", "schedule"), ("flaky", "failed", "schedule, attempt 2"),
    ]  # fmt: skip


def test_missed_stops_growing_while_a_task_is_paused(cli: Cli, tmp_path: Path) -> None:
    path = write_schedule(tmp_path / "s.toml", [BEAT])
    assert cli("run", "-f", str(path), "--now", T).returncode == 0
    assert cli("pause", "beat", "-f", str(path)).returncode == 0
    # Nothing ran for four minutes while it was paused: those occurrences were skipped.
    assert cli("run", "-f", str(path), "--now", at(5)).returncode == 0
    shown = json.loads(cli("status", "-f", str(path), "--json", "--now", at(5)).stdout)
    assert shown["tasks"][0]["missed"] == 0
    assert _table(cli("status", "-f", str(path), "--now", at(5)).stdout)["beat"]["MISSED"] == "0"
    runs = json.loads(cli("history", "-f", str(path), "--json").stdout)["runs"]
    assert [r["outcome"] for r in runs] == ["skipped: paused"] * 5 + ["ok"]
    # Once resumed, a gap with nothing running counts again.
    assert cli("resume", "beat", "-f", str(path)).returncode == 0
    assert cli("run", "-f", str(path), "--now", at(9)).returncode == 0
    shown = json.loads(cli("status", "-f", str(path), "--json", "--now", at(9)).stdout)
    assert shown["tasks"][0]["missed"] == 3


def test_a_dry_run_of_a_paused_task_says_skipped_not_missed(cli: Cli, tmp_path: Path) -> None:
    # `run --dry-run` plans as `run` does but records nothing: the count stays as it was.
    path = write_schedule(tmp_path / "s.toml", [BEAT])
    assert cli("run", "-f", str(path), "--now", T).returncode == 0
    assert cli("pause", "beat", "-f", str(path)).returncode == 0
    dry = json.loads(cli("run", "-f", str(path), "--now", at(3), "--dry-run", "--json").stdout)
    assert {r["outcome"] for r in dry["runs"]} == {"skipped: paused"}


def _shown_runs(cli: Cli, path: Path, *args: str) -> list[tuple[str, str, str, str]]:
    result = cli("history", "-f", str(path), "--json", "-n", "100", *args)
    assert result.returncode == 0, result.stderr
    return [(r["task"], r["host"], r["occurrence"][11:16], r["outcome"])
            for r in json.loads(result.stdout)["runs"]]  # fmt: skip


def test_history_filters_combine_and_work_in_text_and_json(cli: Cli, tmp_path: Path) -> None:
    path = write_schedule(
        tmp_path / "s.toml",
        [
            'name = "bad"\ncommand = "exit 1"\nevery_minute = true',
            GOOD,
        ],
    )
    for minute, host in ((0, "web-1"), (1, "web-2"), (2, "web-1")):
        cli("run", "-f", str(path), "--now", at(minute), env={"CRONCTL_HOST": host})
    assert len(_shown_runs(cli, path)) == 6
    assert _shown_runs(cli, path, "--failed") == [
        ("bad", "web-1", "09:02", "failed"), ("bad", "web-2", "09:01", "failed"),
        ("bad", "web-1", "09:00", "failed"),
    ]  # fmt: skip
    assert _shown_runs(cli, path, "--since", at(1)) == _shown_runs(cli, path)[:4]
    assert sorted(_shown_runs(cli, path, "--host", "web-2")) == [
        ("bad", "web-2", "09:01", "failed"), ("good", "web-2", "09:01", "ok")
    ]  # fmt: skip
    assert _shown_runs(cli, path, "--task", "good", "--since", "2026-08-03T11:01:00+02:00") == [
        ("good", "web-1", "09:02", "ok"), ("good", "web-2", "09:01", "ok")
    ]  # fmt: skip
    assert _shown_runs(cli, path, "good", "--task", "good", "--host", "web-1", "--failed") == []
    assert _shown_runs(cli, path, "bad", "--host", "web-1", "--failed", "--since", at(1)) == [
        ("bad", "web-1", "09:02", "failed")
    ]
    text = cli("history", "-f", str(path), "--failed", "--host", "web-2").stdout.splitlines()
    assert len(text) == 2 and " bad " in text[1] and "failed" in text[1]


def test_history_refuses_a_bad_since_or_two_different_tasks(cli: Cli, tmp_path: Path) -> None:
    path = write_schedule(tmp_path / "s.toml", [GOOD])
    assert cli("run", "-f", str(path), "--now", T).returncode == 0
    for bad, said in (("yesterday", "is not ISO 8601"), ("2026-08-03T09:00", "has no offset")):
        result = cli("history", "-f", str(path), "--since", bad)
        assert result.returncode == 2, result.stderr
        assert f"--since {bad!r} {said}" in result.stderr
    two = cli("history", "good", "--task", "other", "-f", str(path))
    assert two.returncode == 2 and "give one" in two.stderr
    unknown = cli("history", "--task", "nope", "-f", str(path))
    assert unknown.returncode == 2 and "no such task 'nope'" in unknown.stderr


def test_status_shows_only_the_loaded_schedules_tasks_unless_all(cli: Cli, tmp_path: Path) -> None:
    old = write_schedule(tmp_path / "old.toml", [
        'name = "gone"\ncommand = "exit 2"\nevery_minute = true',
        'name = "kept"\ncommand = "true"\nevery_minute = true',
    ])  # fmt: skip
    assert cli("run", "-f", str(old), "--now", T).returncode == 1
    new = write_schedule(tmp_path / "new.toml", ['name = "kept"\ncommand = "true"\nhourly = true'])
    plain = _table(cli("status", "-f", str(new), "--now", at(1)).stdout)
    assert list(plain) == ["kept"]
    every = cli("status", "-f", str(new), "--now", at(1), "--all")
    assert every.returncode == 0, every.stderr
    table = _table(every.stdout)
    assert list(table) == ["kept", "gone"]
    assert table["gone"]["OUTCOME"] == "failed" and table["gone"]["FAILS"] == "1"
    assert table["gone"]["NEXT RUN"] == "not in schedule"
    tasks = json.loads(cli("status", "-f", str(new), "--all", "--json").stdout)["tasks"]
    assert [(t["name"], t["in_schedule"]) for t in tasks] == [("kept", True), ("gone", False)]
    # --check judges the loaded schedule's tasks: a removed task's failure is history.
    assert cli("status", "-f", str(new), "--all", "--check", "--now", at(1)).returncode == 0
