"""Commands that change files inside lock_dir never do it through a planted link
(docs/guarantees.md, Safety)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import Cli, write_schedule


def test_resume_refuses_a_symlinked_paused_directory_and_unlinks_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    write_schedule(
        cli.cwd / "schedules.toml", ['name = "beat"\ncommand = "true"\nevery_minute = true']
    )
    lock_dir = Path(cli.env["CRONCTL_STATE_DIR"]) / "locks"
    lock_dir.mkdir(parents=True, mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "beat.pause").write_text("{}")
    (lock_dir / "paused").symlink_to(elsewhere)

    result = cli("resume", "beat")

    assert result.returncode == 2, result
    assert f"{lock_dir / 'paused'} is a symbolic link" in result.stderr
    assert (elsewhere / "beat.pause").exists()
