"""Machines of a fleet for the PostgreSQL tests: cronctl run as host NAME (its own state dir)
against the test's store."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.coord.postgres.kit import LONG
from tests.helpers import Cli, write_schedule


@pytest.fixture
def machine(cli: Cli, pg_url: str, tmp_path: Path) -> Iterator[Callable[..., object]]:
    """``machine(HOST, *args, background=False)``: cronctl as HOST on the schedule in
    tmp_path; background runs are ended (``release`` touched) when the test ends."""
    started: list[subprocess.Popen[str]] = []

    def env(host: str) -> dict[str, str]:
        return {"CRONCTL_HOST": host, "CRONCTL_COORDINATION": pg_url,
                "CRONCTL_STATE_DIR": str(tmp_path / host)}  # fmt: skip

    def run(host: str, *args: str, background: bool = False) -> object:
        if background:
            started.append(cli.popen(*args, env=env(host)))
            return started[-1]
        return cli(*args, env=env(host))

    yield run
    (tmp_path / "release").touch()
    # A test that failed half-way leaves its background run: end it here, not in a later
    # test's garbage collection (an unraisable ResourceWarning there fails that test).
    for process in started:
        try:
            process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


@pytest.fixture
def fleet(machine: Callable[..., object], tmp_path: Path) -> Callable[..., object]:
    """``machine`` on a schedule of a guarded ``long`` task and an unguarded ``free`` one."""
    write_schedule(
        tmp_path / "schedules.toml",
        [
            f'name = "long"\ncron = "* * * * *"\ncommand = "{LONG}"\n'
            "on_one_server = true\nwithout_overlapping = true",
            'name = "free"\ncron = "* * * * *"\ncommand = "echo $CRONCTL_OCCURRENCE >> free.log"',
        ],
    )
    return machine
