"""What the PostgreSQL fault tests share: times, the long task, polling, outcomes."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cronctl.coord.postgres import fleet, schema
from cronctl.coord.postgres.adapter import PostgresCoordinator
from tests.helpers import Cli, free_port, listening, wait_for
from tests.web.test_serve import Server

T = "2026-08-03T09:00:00Z"
T1 = "2026-08-03T09:01:00Z"
T2 = "2026-08-03T09:02:00Z"
# The task says it started (its pid), then waits for the test to let it finish.
LONG = "echo $$ > started; while [ ! -e release ]; do sleep 0.05; done; echo done >> finished"


def outcomes(result: object) -> dict[str, str]:
    """Task -> outcome of a `run --json`."""
    runs = json.loads(result.stdout)["runs"]  # type: ignore[attr-defined]
    return {r["task"]: r["outcome"] for r in runs}


def database_of(url: str) -> str:
    """The database name in a test URL (``postgresql://postgres@/NAME?host=...``)."""
    return url.split("@/", 1)[1].split("?")[0]


def end_all(processes: list[subprocess.Popen[str]]) -> None:
    """End the background runs a test left (one that failed half-way): here, not in a later
    test's garbage collection, where an unraisable ResourceWarning fails that test."""
    for process in processes:
        try:
            process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


@contextmanager
def older_store(url: str, version: int) -> Iterator[PostgresCoordinator]:
    """A coordinator of the cronctl that knew schema versions up to ``version`` only, on
    the store at ``url``, which it creates (or finds) at that version."""
    latest, startup = schema.MIGRATIONS, schema._STARTUP
    schema.MIGRATIONS, schema.SCHEMA_VERSION = latest[:version], version
    made = "".join(s for m in schema.MIGRATIONS for s in m)
    # That cronctl's start-up asked for no function its schema has not.
    orphans = "cronctl.orphans()" if "cronctl.orphans()" in made else "'[]'::json"
    settled = "cronctl.settle_gone()" if "settle_gone" in made else "NULL"
    schema._STARTUP = f"SELECT version, ({schema.PAUSES}), {orphans}, {settled} FROM cronctl.meta"  # noqa: S608
    extra = fleet.PUBLISHED_EXTRA
    if "upstream" not in made:
        fleet.PUBLISHED_EXTRA = ("output",)  # that cronctl's records named no upstream runs
    earlier = PostgresCoordinator(url, host="old", pid=1)
    try:
        assert earlier.check().version == version
        yield earlier
    finally:
        earlier.close()
        schema.MIGRATIONS, schema.SCHEMA_VERSION = latest, len(latest)
        schema._STARTUP = startup
        fleet.PUBLISHED_EXTRA = extra


@contextmanager
def serving(cli: Cli, tmp_path: Path, url: str, host: str) -> Iterator[Server]:
    """`cronctl serve` as HOST (its own state dir) on the test's store, until the block ends."""
    port = free_port()
    env = {"CRONCTL_HOST": host, "CRONCTL_COORDINATION": url,
           "CRONCTL_STATE_DIR": str(tmp_path / host)}  # fmt: skip
    proc = cli.popen("serve", "--listen", f"127.0.0.1:{port}", env=env)
    try:
        wait_for(lambda: listening(port, proc), "serve to listen")
        yield Server(proc, port)
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
