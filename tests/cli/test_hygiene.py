"""Hostile or odd input at the edges: huge zone names, planted links on the way to files
cronctl writes (`metrics_file`, `init`), an unreadable old revision under `check --diff`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import Cli, git, write_schedule

ZONE = "/".join(["A"] * 400) + "/B"
T = "2026-08-03T09:00:00Z"


def test_a_huge_time_zone_name_is_a_located_error_everywhere(cli: Cli, tmp_path: Path) -> None:
    path = write_schedule(
        tmp_path / "s.toml", [f'name = "a"\ncommand = "true"\nhourly = true\ntimezone = "{ZONE}"']
    )
    check = cli("check", "-f", str(path))
    assert check.returncode == 1
    assert "s.toml:6: task a: time zone name 'A/A/A/" in check.stdout
    assert "too long" in check.stdout
    for args in (("list",), ("run", "--now", T)):
        result = cli(*args, "-f", str(path))
        assert result.returncode == 2 and "internal error" not in result.stderr
        assert "s.toml:6: task a: time zone name" in result.stderr
    nxt = cli("next", "--cron", "* * * * *", "--tz", ZONE)
    assert nxt.returncode == 2 and "internal error" not in nxt.stderr
    assert "too long" in nxt.stderr


def _metrics_schedule(tmp_path: Path, metrics: Path) -> Path:
    return write_schedule(
        tmp_path / "s.toml",
        ['name = "a"\ncommand = "true"\ncron = "* * * * *"'],
        header=f'[cronctl]\nmetrics_file = "{metrics}"\n',
    )


def test_metrics_file_is_not_written_through_a_link_planted_in_a_shared_directory(
    cli: Cli, tmp_path: Path
) -> None:
    public, chosen = tmp_path / "public", tmp_path / "chosen"
    public.mkdir()
    chosen.mkdir()
    public.chmod(0o1777)
    (public / "m").symlink_to(chosen)
    if os.geteuid() == 0:
        os.lchown(public / "m", 65534, 65534)  # another user's link
    path = _metrics_schedule(tmp_path, public / "m" / "metrics.prom")
    result = cli("run", "-f", str(path), "--now", T)
    assert result.returncode == 0, result.stderr
    assert not (chosen / "metrics.prom").exists()
    assert f"metrics_file not written: {public / 'm'} is a symbolic link in {public}" in (
        result.stderr
    )
    # The same file in a directory nobody else can write to is written.
    safe = tmp_path / "safe"
    safe.mkdir(0o755)
    path = _metrics_schedule(tmp_path, safe / "metrics.prom")
    assert cli("run", "-f", str(path), "--now", T).returncode == 0
    assert "cronctl_" in (safe / "metrics.prom").read_text()


def test_init_follows_no_planted_link(cli: Cli, tmp_path: Path) -> None:
    public = tmp_path / "public"
    public.mkdir()
    public.chmod(0o1777)
    (public / "schedules.toml").symlink_to(tmp_path / "created")
    refused = cli("init", str(public / "schedules.toml"))
    assert refused.returncode == 2 and "already exists" in refused.stderr
    assert not (tmp_path / "created").exists()
    owned = tmp_path / "owned"
    owned.write_text("keep me\n")
    (public / "two.toml").symlink_to(owned)
    forced = cli("init", "--force", str(public / "two.toml"))
    assert forced.returncode == 0, forced.stderr
    assert owned.read_text() == "keep me\n"
    assert not (public / "two.toml").is_symlink()
    assert "[[task]]" in (public / "two.toml").read_text()


@pytest.mark.parametrize("fmt", ["text", "json", "github"])
def test_check_diff_says_the_old_revision_could_not_be_read(
    cli: Cli, tmp_path: Path, fmt: str
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    file = repo / "schedules.toml"
    file.write_text('[[task]]\nname = "a"\ncommand = "true"\nhourly = tru\n')
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "broken")
    file.write_text('[[task]]\nname = "a"\ncommand = "true"\nhourly = true\n')
    result = cli("check", "-f", str(file), "--diff", "HEAD", "--format", fmt)
    assert result.returncode == 0, result.stdout + result.stderr  # the work tree is fine
    assert "task a" not in result.stdout and "+ a" not in result.stdout
    assert "no diff: the schedule at HEAD could not be read" in result.stdout
    assert "schedules.toml:4: TOML syntax" in result.stdout
