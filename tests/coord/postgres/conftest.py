"""Machines of a fleet for the PostgreSQL tests: cronctl run as host NAME (its own state dir)
against the test's store."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.coord.conftest import PgServer
from tests.coord.postgres.kit import LONG, database_of, end_all
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
    end_all(started)


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


#: The role of :func:`password_url`, which must log in with ROLE_PASSWORD (scram on the socket).
PASSWORD_ROLE = "cronctl_pw"  # noqa: S105  (a role name)
ROLE_PASSWORD = "Rt5Kp2xLm"  # noqa: S105  (a throw-away server's role)


@pytest.fixture
def password_url(pg_server: PgServer, pg_url: str) -> Callable[[str], str]:
    """``password_url(PASSWORD)``: the test database's URL for a role that must give its
    password (``ROLE_PASSWORD``); the server checks it (scram-sha-256 on the socket)."""
    hba = pg_server.data / "pg_hba.conf"
    rule = f"local all {PASSWORD_ROLE} scram-sha-256\n"
    if rule not in hba.read_text():
        hba.write_text(rule + hba.read_text())
        pg_server.sql("SELECT pg_reload_conf()")
    pg_server.sql(
        f"DO $$ BEGIN CREATE ROLE {PASSWORD_ROLE} LOGIN PASSWORD '{ROLE_PASSWORD}'; "
        "EXCEPTION WHEN duplicate_object THEN NULL; END $$"
    )
    database = database_of(pg_url)
    pg_server.sql(f"GRANT ALL ON DATABASE {database} TO {PASSWORD_ROLE}")

    def url(password: str) -> str:
        return f"postgresql://{PASSWORD_ROLE}:{password}@/{database}?host={pg_server.socket}"

    return url
