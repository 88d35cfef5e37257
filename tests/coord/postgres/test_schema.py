"""The store's schema: the commands that only read create none of it, and a version in
cronctl.meta that no cronctl wrote is refused before anything is written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cronctl.coord.postgres.schema import SCHEMA_VERSION
from tests.coord.conftest import PgServer
from tests.coord.postgres.conftest import ROLE_PASSWORD
from tests.coord.postgres.kit import T1, T, database_of, older_store, serving
from tests.helpers import Cli, write_schedule

TABLES = "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
SCHEMAS = "SELECT count(*) FROM pg_namespace WHERE nspname = 'cronctl'"
READS = [("status",), ("status", "--fleet", "--json"), ("history", "--fleet", "--json"),
         ("list",), ("explain", "free", "--at", T)]  # fmt: skip
PAGES = ["/", "/fleet", "/tasks/free", "/api/runs", "/api/hosts", "/api/tasks"]


def _schedule(tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "free"\ncron = "* * * * *"\ncommand = "true"\non_one_server = true'],
    )


@pytest.mark.parametrize("schema_made", [False, True], ids=["bare-database", "readme-set-up"])
def test_reading_commands_create_nothing_in_a_database_cronctl_has_not_used(
    cli: Cli, pg_url: str, pg_server: PgServer, tmp_path: Path, schema_made: bool
) -> None:
    """As a role that may not create schemas: with none (it could not), or with the one the
    README's set-up gives it (it could create its tables, and must not)."""
    _schedule(tmp_path)
    database = database_of(pg_url)
    role = f"r_{database}"
    pg_server.sql(f"CREATE ROLE {role} LOGIN")
    pg_server.sql(f"REVOKE CREATE ON SCHEMA public FROM PUBLIC; REVOKE CREATE ON DATABASE "
                  f"{database} FROM PUBLIC", database)  # fmt: skip
    if schema_made:
        pg_server.sql(f"CREATE SCHEMA cronctl AUTHORIZATION {role}", database)
    url = pg_server.url(database, role)
    env = {"CRONCTL_COORDINATION": url, "CRONCTL_HOST": "a"}
    for args in READS:
        done = cli(*args, env=env)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    assert json.loads(cli(*READS[2], env=env).stdout) == {"runs": []}
    with serving(cli, tmp_path, url, "a") as server:
        for path in PAGES:
            status, body = server.get(path)
            assert status == 200, (path, body[-2000:])
    nothing = [(0,)]
    assert pg_server.sql(TABLES + " WHERE nspname = 'cronctl'", database) == nothing
    assert pg_server.sql(SCHEMAS, database) == [(int(schema_made),)]
    if schema_made:  # a run creates its tables as before
        assert cli("run", "--now", T, env=env).returncode == 0
        tables = pg_server.sql(TABLES + " WHERE nspname = 'cronctl'", database)
        assert tables[0][0] > 0  # type: ignore[operator]
        published = json.loads(cli(*READS[2], env=env).stdout)["runs"]
        assert [r["task"] for r in published] == ["free"]


@pytest.mark.parametrize("version", [-3, 0, 3])
def test_a_schema_version_no_cronctl_wrote_is_refused_and_nothing_is_written(
    cli: Cli,
    pg_url: str,
    pg_server: PgServer,
    password_url: Callable[[str], str],
    tmp_path: Path,
    version: int,
) -> None:
    """Below 1, or below what the tables already are (3: its `latest` exists): each command
    names the store without its password, the value, and what to do. (A reader cannot tell
    3 from a store an older cronctl left: it says the store is older, and writes nothing.)"""
    _schedule(tmp_path)
    database = database_of(pg_url)
    env = {"CRONCTL_COORDINATION": password_url(ROLE_PASSWORD), "CRONCTL_HOST": "a"}
    assert cli("run", "--now", T, env=env).returncode == 0
    pg_server.sql(f"UPDATE cronctl.meta SET version = {version}", database)  # noqa: S608

    def state() -> list[object]:
        return [
            pg_server.sql(TABLES + " WHERE nspname = 'cronctl'", database),
            pg_server.sql("SELECT count(*) FROM cronctl.runs", database),
            pg_server.sql("SELECT version FROM cronctl.meta", database),
        ]

    before = state()
    for args, code in ((("run", "--now", T1), 2), (("status", "--fleet"), 2),
                       (("history", "--fleet"), 2), (("doctor",), 1)):  # fmt: skip
        done = cli(*args, env=env)
        said = done.stdout + done.stderr
        assert done.returncode == code, (args, said)
        assert "cronctl_pw:***@" in said and ROLE_PASSWORD not in said, (args, said)
        assert "Traceback" not in said, (args, said)
        if version > 0 and "--fleet" in args:
            assert f"schema version {version}, older than this cronctl's" in said, (args, said)
            continue
        assert f"schema version {version} in cronctl.meta" in said, (args, said)
        assert "set it back to the version of the store's tables (this cronctl writes " in said
        assert f"{SCHEMA_VERSION})" in said, (args, said)
    assert state() == before


@pytest.mark.parametrize("version", [2, 7])
def test_a_store_on_an_older_schema_is_migrated_by_a_run_never_by_a_read(
    cli: Cli, pg_url: str, pg_server: PgServer, tmp_path: Path, version: int
) -> None:
    """A dashboard or `status` upgraded first must not migrate the store under a fleet whose
    older cronctl would then refuse it: they say so; the next `run` migrates it."""
    _schedule(tmp_path)
    with older_store(pg_url, version):
        pass
    database = database_of(pg_url)
    env = {"CRONCTL_COORDINATION": pg_url, "CRONCTL_HOST": "a"}
    for args in READS[1:]:
        done = cli(*args, env=env)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert f"older than this cronctl's {SCHEMA_VERSION}" in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
    with serving(cli, tmp_path, pg_url, "a") as server:
        status, body = server.get("/api/runs")
    assert status == 400 and b"older than this cronctl" in body
    assert pg_server.sql("SELECT version FROM cronctl.meta", database) == [(version,)]
    assert cli("run", "--now", T, env=env).returncode == 0
    assert pg_server.sql("SELECT version FROM cronctl.meta", database) == [(SCHEMA_VERSION,)]
    assert cli(*READS[2], env=env).returncode == 0
