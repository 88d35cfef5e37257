"""Projects: two schedules on one machine, sharing the state and lock directories, each with
a `backup` task, never share a lock, a claim or a history once each has a project name."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import Cli, wait_for

NOW = "2026-08-03T09:00:00Z"


def _project(
    tmp_path: Path, base: Cli, name: str, project: str | None, task: str, **env: str
) -> Cli:
    where = tmp_path / name
    where.mkdir(parents=True)
    header = f'[cronctl]\nproject = "{project}"\n' if project else ""
    (where / "schedules.toml").write_text(f"{header}\n[[task]]\n{task}\n")
    return Cli(where, {**base.env, **env})


def _runs(cli: Cli, *args: str) -> list[tuple[str, str]]:
    result = cli("run", "--now", NOW, "--json", *args)
    assert result.returncode in (0, 1), result.stderr
    return [(r["task"], r["outcome"]) for r in json.loads(result.stdout)["runs"]]


CLAIMED = 'name = "backup"\ncommand = "true"\ncron = "0 9 * * *"\non_one_server = true'


def _fleet(cli: Cli, tmp_path: Path, names: tuple[str | None, str | None]) -> list[Cli]:
    """Two machines (own state dirs) sharing one lock_dir, each running its project."""
    shared = str(tmp_path / "shared-locks")
    return [
        _project(
            tmp_path,
            cli,
            f"p{i}",
            name,
            CLAIMED,
            CRONCTL_LOCK_DIR=shared,
            CRONCTL_STATE_DIR=str(tmp_path / f"state{i}"),
        )
        for i, name in enumerate(names)
    ]


def test_different_projects_do_not_share_claims(cli: Cli, tmp_path: Path) -> None:
    a, b = _fleet(cli, tmp_path, ("billing", "shop"))
    assert _runs(a, "--host", "h1") == [("backup", "ok")]
    assert _runs(b, "--host", "h2") == [("backup", "ok")], "the other project's claim held"


def test_without_a_project_claims_are_shared_as_before(cli: Cli, tmp_path: Path) -> None:
    a, b = _fleet(cli, tmp_path, (None, None))
    assert _runs(a, "--host", "h1") == [("backup", "ok")]
    assert _runs(b, "--host", "h2") == [("backup", "skipped: another server")]
    assert not (tmp_path / "shared-locks" / "projects").exists()


def test_different_projects_do_not_share_history(cli: Cli, tmp_path: Path) -> None:
    a = _project(tmp_path, cli, "a", "billing", CLAIMED)
    b = _project(tmp_path, cli, "b", "shop", CLAIMED)
    assert _runs(a) == [("backup", "ok")]
    assert _runs(b) == [("backup", "ok")], "the other project's record was taken for its own"
    for one in (a, b):
        assert len(json.loads(one("history", "--json", "--all").stdout)["runs"]) == 1
    state = Path(cli.env["CRONCTL_STATE_DIR"])
    assert (state / "projects" / "billing" / "state.db").is_file()
    assert not (state / "state.db").exists()


def test_without_a_project_the_shared_state_is_kept(cli: Cli, tmp_path: Path) -> None:
    a = _project(tmp_path, cli, "a", None, CLAIMED)
    b = _project(tmp_path, cli, "b", None, CLAIMED)
    assert _runs(a) == [("backup", "ok")]
    assert _runs(b) == [], "one shared state, as before projects"
    state = Path(cli.env["CRONCTL_STATE_DIR"])
    assert (state / "state.db").is_file() and not (state / "projects").exists()


def test_different_projects_do_not_share_a_lock(cli: Cli, tmp_path: Path) -> None:
    marker, release = tmp_path / "started", tmp_path / "release"
    slow = (
        f'name = "backup"\ncommand = "touch {marker}; while [ ! -e {release} ]; do sleep 0.05; '
        'done"\nevery_minute = true\nwithout_overlapping = true'
    )
    a = _project(tmp_path, cli, "a", "billing", slow)
    b = _project(
        tmp_path,
        cli,
        "b",
        "shop",
        'name = "backup"\ncommand = "true"\nevery_minute = true\nwithout_overlapping = true',
    )
    running = a.popen("run", "--now", NOW)
    try:
        wait_for(marker.exists, "billing's backup to start")
        assert _runs(b) == [("backup", "ok")], "the other project's lock held"
    finally:
        release.touch()
        running.communicate(timeout=30)


def test_history_shows_only_the_loaded_schedule_unless_all(cli: Cli, tmp_path: Path) -> None:
    a = _project(
        tmp_path, cli, "a", None, 'name = "heartbeat"\ncommand = "true"\nevery_minute = true'
    )
    b = _project(tmp_path, cli, "b", None, CLAIMED.replace("on_one_server = true", ""))
    assert _runs(a) == [("heartbeat", "ok")]
    assert _runs(b) == [("backup", "ok")]
    only = [r["task"] for r in json.loads(b("history", "--json").stdout)["runs"]]
    assert only == ["backup"]
    every = sorted(r["task"] for r in json.loads(b("history", "--json", "--all").stdout)["runs"])
    assert every == ["backup", "heartbeat"]
    assert "heartbeat" not in b("status").stdout


def test_a_bad_project_name_is_an_error_with_file_and_line(cli: Cli, tmp_path: Path) -> None:
    for bad in ("../etc", "Billing", "a" * 65, "", "x/y"):
        a = _project(
            tmp_path / bad.replace("/", "_").replace(".", "d")[:10] if bad else tmp_path / "empty",
            cli,
            "s",
            None,
            CLAIMED,
        )
        path = a.cwd / "schedules.toml"
        path.write_text(f'[cronctl]\nproject = "{bad}"\n\n[[task]]\n{CLAIMED}\n')
        check = a("check")
        assert check.returncode == 1
        assert "schedules.toml:2: 'project'" in check.stdout
        assert "is not a project name" in check.stdout
        assert a("run", "--now", NOW).returncode == 2


def test_check_hints_at_the_project_name(cli: Cli, tmp_path: Path) -> None:
    a = _project(tmp_path, cli, "a", None, CLAIMED)
    check = a("check")
    assert check.returncode == 0 and 'hint: no project name; add project = "NAME"' in check.stderr
    named = _project(tmp_path, cli, "b", "billing", CLAIMED)
    assert "hint:" not in named("check").stderr
    # Only `check` reviews the file: a listing or an import is not where it helps.
    (a.cwd / "crontab").write_text("0 3 * * * /bin/true\n")
    for args in (("list",), ("import", "crontab"), ("import", "crontab", "-o", "new.toml")):
        assert "hint:" not in a(*args).stderr, args


def test_a_quiet_minute_moves_the_projects_own_windows(cli: Cli, tmp_path: Path) -> None:
    hourly = 'name = "backup"\ncommand = "true"\ncron = "0 * * * *"'
    a = _project(tmp_path, cli, "a", "billing", hourly)
    for minute in ("09:00", "09:01", "09:02"):  # 09:01 plans and keeps a hint; 09:02 uses it
        assert a("run", "--now", f"2026-08-03T{minute}:00Z").returncode == 0
    state = Path(cli.env["CRONCTL_STATE_DIR"])
    assert not (state / "state.db").exists(), "a quiet minute wrote the shared state"
    status = json.loads(a("status", "--json", "--now", "2026-08-03T09:03:00Z").stdout)
    assert status["tasks"][0]["missed"] == 0, status


def test_check_no_longer_warns_that_a_coordination_store_is_shared(
    cli: Cli, tmp_path: Path
) -> None:
    # The store keeps projects apart now (tests/coord/postgres/test_projects_pg.py).
    a = _project(tmp_path, cli, "a", "billing", CLAIMED)
    check = a("check", env={"CRONCTL_COORDINATION": "postgresql://u@127.0.0.1:9/db"})
    assert "coordination store" not in check.stdout, check.stdout
