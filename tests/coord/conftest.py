"""A real PostgreSQL for the coordination tests: one server per session, a database per test.

The server runs from a temporary directory on a Unix socket only (no TCP), as the
``postgres`` user when the tests run as root (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def _bindir() -> Path | None:
    found = shutil.which("pg_config")
    if found:
        out = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False)
        candidate = Path(out.stdout.strip())
        if (candidate / "initdb").exists():
            return candidate
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    return None


class PgServer:
    """A throw-away cluster: start, stop, restart, SQL as the superuser."""

    def __init__(self, bindir: Path, root: Path, durable: bool = False) -> None:
        self.bindir, self.root, self.durable = bindir, root, durable
        self.data, self.socket = root / "data", root
        self._as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _ctl(self, *args: str) -> None:
        subprocess.run(
            [*self._as_postgres, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-w",
             "-l", str(self.root / "server.log"), *args],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip

    def init(self) -> None:
        """initdb: trust on the socket, which only this test run can reach."""
        subprocess.run(
            [*self._as_postgres, str(self.bindir / "initdb"), "-D", str(self.data), "-U",
             "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip

    def start(self) -> None:
        """Start on the socket only. The tests run with fsync off, which keeps them fast
        (durability across a crash of the machine is PostgreSQL's business, not what they
        check; a server crash, which they do check, loses nothing committed either way);
        benchmarks pass ``durable=True``."""
        fsync = "on" if self.durable else "off"
        opts = f"-k {self.socket} -c listen_addresses='' -c fsync={fsync} -c max_connections=200"
        self._ctl("-o", opts, "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop (``immediate`` is a crash: no checkpoint, clients cut)."""
        self._ctl("-m", mode, "stop")

    def restart_immediate(self) -> None:
        """A crash and a restart: every session ends, committed rows survive."""
        self.stop("immediate")
        self.start()

    def url(self, database: str = "postgres", user: str = "postgres") -> str:
        """A libpq URL on the socket."""
        return f"postgresql://{user}@/{database}?host={self.socket}"

    def sql(self, statement: str, database: str = "postgres") -> list[tuple[object, ...]]:
        """Run one statement as the superuser (autocommit); its rows, if any."""
        import psycopg2

        conn = psycopg2.connect(self.url(database))
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute(statement)
                return list(cur.fetchall()) if cur.description else []
        finally:
            conn.close()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL for the whole session."""
    bindir = _bindir()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (initdb not found); .ci/run installs it")
    root = Path(tempfile.mkdtemp(prefix="cronctl-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    server = PgServer(bindir, root)
    server.init()
    server.start()
    try:
        yield server
    finally:
        try:
            server.stop("immediate")
        finally:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh database for one test; its URL."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    pg_server.sql(f"CREATE DATABASE {name}")
    yield pg_server.url(name)
    pg_server.sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
