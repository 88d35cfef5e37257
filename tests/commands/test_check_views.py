"""`check`: herds and `--diff REF` against a real git repository (docs/commands.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import Cli, git, write_schedule

NOW = "2026-08-03T00:00:00Z"


def _jobs(count: int, when: str = '"03:00"') -> list[str]:
    return [f'name = "job{i:02d}"\ncommand = "echo {i}"\ndaily_at = {when}' for i in range(count)]


def _herds(cli: Cli, path: Path) -> list[dict[str, object]]:
    result = cli("check", "-f", str(path), "--now", NOW, "--format", "json")
    problems = json.loads(result.stdout)["problems"]
    return [p for p in problems if p["code"] == "herd"]


def test_more_than_twenty_tasks_in_one_minute_is_a_herd_naming_minute_and_tasks(
    cli: Cli, tmp_path: Path
) -> None:
    path = write_schedule(
        tmp_path / "s.toml", [*_jobs(21), 'name = "lone"\ncommand = "x"\nhourly_at = 7']
    )
    herds = _herds(cli, path)
    assert len(herds) == 1
    message = str(herds[0]["message"])
    assert "21 tasks start in the same minute, 2026-08-03T03:00:00Z" in message
    assert "(and 6 more minutes in the next 7 days)" in message
    assert (
        "job00, job01" in message
        and "job20" in message
        and "lone" not in message
        and "jitter" in message
    )
    assert herds[0]["severity"] == "warning" and herds[0]["line"] == 3


def test_twenty_tasks_are_no_herd_but_herd_limit_lowers_the_bar(cli: Cli, tmp_path: Path) -> None:
    path = write_schedule(tmp_path / "s.toml", _jobs(20))
    assert _herds(cli, path) == []
    limited = write_schedule(tmp_path / "l.toml", _jobs(3), header="[cronctl]\nherd_limit = 2\n")
    assert len(_herds(cli, limited)) == 1
    bad = write_schedule(tmp_path / "b.toml", _jobs(1), header="[cronctl]\nherd_limit = 0\n")
    result = cli("check", "-f", str(bad))
    assert result.returncode == 1 and "'herd_limit' must be at least 1" in result.stdout


BASE = [
    'name = "nightly-backup"\ncommand = "backup.sh"\ndaily_at = "02:00"',
    'name = "old-name"\ncommand = "report.sh"\nhourly = true',
    'name = "gone"\ncommand = "gone.sh"\nweekly = true',
    'name = "steady"\ncommand = "steady.sh"\ndaily = true',
]
HEAD = [
    'name = "nightly-backup"\ncommand = "backup.sh"\ndaily_at = "14:00"',
    'name = "new-name"\ncommand = "report.sh"\nhourly = true',
    'name = "steady"\ncommand = "steady.sh"\ndaily = true\ntimeout = "5m"',
    'name = "fresh"\ncommand = "fresh.sh"\ncron = "*/30 * * * *"',
]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "deploy").mkdir(parents=True)
    git(repo, "init", "-q")
    write_schedule(repo / "deploy" / "schedules.toml", BASE)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    write_schedule(repo / "deploy" / "schedules.toml", HEAD)
    return repo


def test_diff_reports_added_removed_renamed_and_moved_tasks(cli: Cli, repo: Path) -> None:
    args = ("check", "-f", "deploy/schedules.toml", "--diff", "HEAD", "--now", NOW)
    result = _in(cli, repo, *args)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "deploy/schedules.toml:19: task fresh: added, runs '*/30 * * * *' (UTC)" in out
    assert "deploy/schedules.toml: task gone: removed" in out
    assert "task new-name: renamed from old-name (same command)" in out
    assert "this change moves nightly-backup from 02:00 to 14:00 (UTC)" in out
    assert "next 14 days, UTC time: 14 runs gained, 14 lost" in out
    assert "task steady: changed: timeout" in out
    assert "since HEAD: 1 added, 1 removed, 1 renamed, 2 changed" in out


def _in(cli: Cli, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run in the repository, so --file paths (and annotations) are relative to its root."""
    return Cli(cwd, cli.env)(*args)


def test_diff_json_lists_the_first_ten_gained_and_lost_occurrences(cli: Cli, repo: Path) -> None:
    result = _in(cli, repo, "check", "-f", "deploy/schedules.toml", "--diff", "HEAD",
                 "--now", NOW, "--format", "json")  # fmt: skip
    diff = json.loads(result.stdout)["diff"]
    moved = next(c for c in diff["changed"] if c["name"] == "nightly-backup")
    assert moved["keys"] == ["schedule"] and moved["was"]["schedule"] == "0 2 * * *"
    assert moved["gained"][0] == "2026-08-03T14:00:00Z" and len(moved["gained"]) == 10
    assert moved["lost"][0] == "2026-08-03T02:00:00Z" and moved["lost_count"] == 14
    assert [t["name"] for t in diff["added"]] == ["fresh"]
    assert [t["name"] for t in diff["removed"]] == ["gone"]


def test_diff_github_annotates_the_changed_line(cli: Cli, repo: Path) -> None:
    result = _in(cli, repo, "check", "-f", "deploy/schedules.toml", "--diff", "HEAD",
                 "--now", NOW, "--format", "github")  # fmt: skip
    notices = [line for line in result.stdout.splitlines() if line.startswith("::notice")]
    moved = next(n for n in notices if "nightly-backup" in n)
    assert moved.startswith("::notice file=deploy/schedules.toml,line=3,title=cronctl schedule")
    assert "::this change moves nightly-backup from 02:00 to 14:00 (UTC)" in moved
    assert "%0A" in moved and "\n" not in moved


def test_diff_against_an_unknown_revision_or_outside_git_is_a_usage_error(
    cli: Cli, repo: Path, tmp_path: Path
) -> None:
    result = _in(cli, repo, "check", "-f", "deploy/schedules.toml", "--diff", "no-such-ref")
    assert result.returncode == 2 and "git knows no such revision" in result.stderr
    (tmp_path / "alone").mkdir()
    alone = write_schedule(tmp_path / "alone" / "s.toml", BASE[:1])
    result = cli("check", "-f", str(alone), "--diff", "HEAD")
    assert result.returncode == 2 and "not inside a git work tree" in result.stderr


def test_diff_with_a_file_new_since_the_revision_shows_every_task_added(
    cli: Cli, repo: Path
) -> None:
    write_schedule(repo / "deploy" / "extra.toml", ['name = "x"\ncommand = "x"\nhourly = true'])
    result = _in(cli, repo, "check", "-f", "deploy/", "--diff", "HEAD", "--now", NOW)
    assert "deploy/extra.toml:3: task x: added" in result.stdout
