"""cronctl's own secrets are not handed to its tasks (docs/guarantees.md): a task that prints
its environment under `run`, `work` and `exec`, with the store's URL carrying a password a
real PostgreSQL checks."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.coord.postgres.conftest import ROLE_PASSWORD
from tests.coord.postgres.kit import T, outcomes
from tests.coord.postgres.test_secrets import recorded
from tests.helpers import Cli, wait_for, write_schedule
from tests.run.test_work import NEAR_BOUNDARY

# A task that prints its environment (the log and the output tail keep it) and saves it.
ENV_TASK = (
    'name = "{name}"\ncron = "* * * * *"\n'
    'command = "env; env > {name}.env"\nwithout_overlapping = true'
)


def _task_env(tmp_path: Path, name: str) -> dict[str, str]:
    lines = (tmp_path / f"{name}.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


@pytest.fixture
def secret_env(password_url: Callable[[str], str], tmp_path: Path) -> dict[str, str]:
    """cronctl's environment with its secrets: the store's URL with the right password,
    and a `serve` token."""
    return {
        "CRONCTL_COORDINATION": password_url(ROLE_PASSWORD),
        "CRONCTL_SERVE_TOKEN": "Tk4Zr8Vq3Mn6Bw1Xy5Lp",
        "CRONCTL_STATE_DIR": str(tmp_path / "state"),
        "CRONCTL_HOST": "a",
    }


def _assert_not_handed(tmp_path: Path, name: str, env: dict[str, str]) -> None:
    seen = _task_env(tmp_path, name)
    assert seen["CRONCTL_TASK"] == name  # cronctl's own variables for the task are there
    assert "CRONCTL_COORDINATION" not in seen and "CRONCTL_SERVE_TOKEN" not in seen
    everything = (tmp_path / f"{name}.env").read_text() + recorded(tmp_path / "state")
    assert ROLE_PASSWORD not in everything
    assert env["CRONCTL_SERVE_TOKEN"] not in everything


def test_run_does_not_hand_cronctl_secrets_to_tasks(
    cli: Cli, tmp_path: Path, secret_env: dict[str, str]
) -> None:
    write_schedule(tmp_path / "schedules.toml", [ENV_TASK.format(name="r")])
    ran = cli("run", "--json", "--now", T, env=secret_env)
    assert outcomes(ran) == {"r": "ok"}, ran.stderr  # took the fleet lock with the password
    _assert_not_handed(tmp_path, "r", secret_env)


def test_exec_does_not_hand_cronctl_secrets_to_tasks(
    cli: Cli, tmp_path: Path, secret_env: dict[str, str]
) -> None:
    write_schedule(tmp_path / "schedules.toml", [ENV_TASK.format(name="e")])
    executed = cli("exec", "e", env=secret_env)
    assert executed.returncode == 0, executed.stderr
    _assert_not_handed(tmp_path, "e", secret_env)


def test_work_does_not_hand_cronctl_secrets_to_tasks(
    cli: Cli, tmp_path: Path, secret_env: dict[str, str]
) -> None:
    write_schedule(tmp_path / "schedules.toml", [ENV_TASK.format(name="w")])
    worker = subprocess.Popen(
        [sys.executable, "-c", NEAR_BOUNDARY, "work", "--grace", "10"],
        cwd=tmp_path,
        env={**cli.env, **secret_env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: "CRONCTL_RUN_ID" in _text(tmp_path / "w.env"), "the task to run")
    finally:
        worker.terminate()
        _, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    _assert_not_handed(tmp_path, "w", secret_env)


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_a_task_may_still_be_given_the_url_on_purpose(cli: Cli, tmp_path: Path) -> None:
    # The schedule's own env table is the task's: written there, it is the operator's choice.
    task = 'name = "t"\ncron = "* * * * *"\ncommand = "env > t.env"\n'
    task += 'env = { CRONCTL_COORDINATION = "postgresql://reader@db/ops" }'
    write_schedule(tmp_path / "schedules.toml", [task])
    cli("run", "--now", T, env={"CRONCTL_COORDINATION": "postgresql://u:x@/nowhere"})
    assert _task_env(tmp_path, "t")["CRONCTL_COORDINATION"] == "postgresql://reader@db/ops"
