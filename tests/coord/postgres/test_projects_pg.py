"""`[cronctl] project` on a PostgreSQL coordination store: two projects with a task of the
same name share one database and never each other's claims, locks, pauses or fleet history
(docs/fleets-postgresql.md). Real `cronctl` processes, a real PostgreSQL."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.coord.postgres.kit import LONG, T1, T, end_all, outcomes
from tests.helpers import Cli, wait_for, write_schedule

Machine = Callable[..., "subprocess.CompletedProcess[str] | subprocess.Popen[str]"]


def _backup(command: str) -> str:
    return (
        f'name = "backup"\ncron = "* * * * *"\ncommand = "{command}"\n'
        "on_one_server = true\nwithout_overlapping = true"
    )


@pytest.fixture
def project(cli: Cli, pg_url: str, tmp_path: Path) -> Iterator[Callable[..., Machine]]:
    """``project(NAME, command)`` -> ``run(HOST, *args, background=False)``: cronctl as HOST
    (its own state dir) on project NAME's schedule in tmp_path/NAME (None: no project name),
    against the test's store. Background runs end when each project's ``release`` appears."""
    started: list[subprocess.Popen[str]] = []
    made: list[Path] = []

    def make(name: str | None, command: str = "true") -> Machine:
        where = tmp_path / (name or "unnamed")
        where.mkdir()
        made.append(where)
        header = f'[cronctl]\nproject = "{name}"\n' if name else ""
        path = write_schedule(where / "schedules.toml", [_backup(command)], header=header)

        def run(host: str, *args: str, background: bool = False) -> object:
            env = {"CRONCTL_HOST": host, "CRONCTL_COORDINATION": pg_url,
                   "CRONCTL_STATE_DIR": str(where / f"state-{host}")}  # fmt: skip
            argv = (args[0], "-f", str(path), *args[1:])
            if background:
                started.append(cli.popen(*argv, env=env))
                return started[-1]
            return cli(*argv, env=env)

        return run  # type: ignore[return-value]

    yield make
    for where in made:
        (where / "release").touch()
    end_all(started)


def test_two_projects_tasks_of_one_name_never_share_a_claim(
    project: Callable[..., Machine],
) -> None:
    alpha, beta = project("alpha"), project("beta")
    assert outcomes(alpha("a", "run", "--json", "--now", T)) == {"backup": "ok"}
    assert outcomes(beta("b", "run", "--json", "--now", T)) == {"backup": "ok"}
    # Within a project the claim still holds: alpha's second machine skips the occurrence.
    assert outcomes(alpha("b", "run", "--json", "--now", T)) == {
        "backup": "skipped: another server"
    }


def test_two_projects_tasks_of_one_name_never_share_a_lock(
    project: Callable[..., Machine], tmp_path: Path
) -> None:
    alpha, beta = project("alpha", LONG), project("beta", LONG)
    held = alpha("a", "run", "--json", "--now", T, background=True)
    wait_for(lambda: (tmp_path / "alpha" / "started").exists(), "alpha's backup to start")
    other = beta("b", "run", "--json", "--now", T1, background=True)
    wait_for(lambda: (tmp_path / "beta" / "started").exists(), "beta's backup to start")
    # alpha's own second machine is refused while alpha's backup holds alpha's lock.
    assert outcomes(alpha("c", "run", "--json", "--now", T1)) == {
        "backup": "skipped: still running"
    }
    for name, process in (("alpha", held), ("beta", other)):
        (tmp_path / name / "release").touch()
        out, err = process.communicate(timeout=60)  # type: ignore[union-attr]
        assert process.returncode == 0, err  # type: ignore[union-attr]
        assert json.loads(out)["runs"][0]["outcome"] == "ok"


def test_a_pause_and_the_fleet_history_stay_in_their_project(
    project: Callable[..., Machine],
) -> None:
    alpha, beta, unnamed = project("alpha"), project("beta"), project(None)
    paused = alpha("a", "pause", "backup", "--reason", "restore")
    assert paused.returncode == 0, paused.stderr  # type: ignore[union-attr]
    assert outcomes(alpha("a", "run", "--json", "--now", T)) == {"backup": "skipped: paused"}
    assert outcomes(beta("b", "run", "--json", "--now", T)) == {"backup": "ok"}
    assert outcomes(unnamed("u", "run", "--json", "--now", T)) == {"backup": "ok"}
    status = beta("b", "status", "--json", "--fleet")
    assert status.returncode == 0, status.stderr  # type: ignore[union-attr]
    shown = json.loads(status.stdout)  # type: ignore[union-attr]
    assert [(t["name"], t["host"], t["paused"]) for t in shown["tasks"]] == [("backup", "b", False)]
    for run, host, outcome in ((alpha, "a", "skipped: paused"), (beta, "b", "ok"),
                               (unnamed, "u", "ok")):  # fmt: skip
        listed = run(host, "history", "--fleet", "--json")
        assert listed.returncode == 0, listed.stderr  # type: ignore[union-attr]
        runs = json.loads(listed.stdout)["runs"]  # type: ignore[union-attr]
        assert [(r["task"], r["host"], r["outcome"]) for r in runs] == [("backup", host, outcome)]
    resumed = beta("b", "resume", "backup")
    assert "was not paused" in resumed.stderr  # type: ignore[union-attr]
    assert outcomes(alpha("a", "run", "--json", "--now", T1)) == {"backup": "skipped: paused"}


def test_check_no_longer_warns_that_a_project_shares_the_store(
    cli: Cli, tmp_path: Path, pg_url: str
) -> None:
    path = write_schedule(
        tmp_path / "s.toml", [_backup("true")], header='[cronctl]\nproject = "alpha"\n'
    )
    result = cli("check", "-f", str(path), "--format", "json", env={"CRONCTL_COORDINATION": pg_url})
    assert "project-store" not in result.stdout and result.returncode == 0, result.stdout
