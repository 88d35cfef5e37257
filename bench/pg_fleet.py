"""A fleet store for the dashboard benchmark (bench/serve_pages.py --postgres): a temporary
PostgreSQL, the tests' (tests/coord/conftest.py), filled in SQL with ``generate_series``."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "coord"))

from conftest import PgServer, _bindir  # noqa: E402  (the tests' server, reused)

from cronctl.coord.postgres import schema  # noqa: E402
from cronctl.coord.postgres.adapter import PostgresCoordinator  # noqa: E402

#: RUNS records, record i of task i % TASKS on host (i / TASKS) % HOSTS, one a second from
#: 2024-01-01, every ninth failed.
_FILL = """INSERT INTO cronctl.runs (id, task, occurrence, host, pid, outcome, exit_code,
    started, ended, duration_s)
SELECT 'r' || lpad(i::text, 8, '0'), 't' || lpad((i %% %(tasks)s)::text, 5, '0'),
    '2024-01-01Z'::timestamptz + i * interval '1 second',
    'h' || lpad(((i / %(tasks)s) %% %(hosts)s)::text, 2, '0'), 1,
    CASE WHEN i %% 9 = 0 THEN 'failed' ELSE 'ok' END, CASE WHEN i %% 9 = 0 THEN 1 ELSE 0 END,
    '2024-01-01Z'::timestamptz + i * interval '1 second',
    '2024-01-01Z'::timestamptz + i * interval '1 second' + interval '1 second', 1.0
FROM generate_series(0, %(runs)s - 1) AS i"""
_HOSTS = """INSERT INTO cronctl.hosts (project, host, version, clock)
SELECT '', 'h' || lpad(h::text, 2, '0'), 'bench', now() FROM generate_series(0, %(hosts)s - 1) h"""


@contextmanager
def fleet_store(root: Path, tasks: int, runs: int, hosts: int) -> Iterator[tuple[str, Path]]:
    """The store's URL and a schedule of its tasks, while the block runs."""
    bindir = _bindir()
    if bindir is None:
        sys.exit("bench: PostgreSQL is not installed (initdb not found)")
    data = Path(tempfile.mkdtemp(prefix="cronctl-pgfleet-"))  # the postgres user's to read
    if os.geteuid() == 0:
        shutil.chown(data, "postgres", "postgres")
    server = PgServer(bindir, data, durable=True)
    server.init()
    server.start()
    try:
        server.sql("CREATE DATABASE fleet")
        url = server.url("fleet")
        latest = schema.MIGRATIONS
        schema.MIGRATIONS, schema.SCHEMA_VERSION = latest[:3], 3
        try:
            PostgresCoordinator(url, host="bench", pid=1).check()
        finally:
            schema.MIGRATIONS, schema.SCHEMA_VERSION = latest, len(latest)
        import psycopg2

        conn = psycopg2.connect(url)
        conn.autocommit = True
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            cur.execute(_FILL, {"tasks": tasks, "hosts": hosts, "runs": runs})
            cur.execute(_HOSTS, {"hosts": hosts})
            cur.execute("VACUUM ANALYZE")
        print(f"filled {runs} records in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        version = PostgresCoordinator(url, host="bench", pid=1).check().version
        print(f"schema 3 to {version} in {time.perf_counter() - t0:.1f} s")
        with conn.cursor() as cur:
            cur.execute("VACUUM ANALYZE")
        conn.close()
        schedule = root / "schedules.toml"
        schedule.write_text(
            "".join(
                f'[[task]]\nname = "t{i:05d}"\ncron = "{i % 60} * * * *"\ncommand = "true"\n'
                for i in range(tasks)
            )
        )
        yield url, schedule
    finally:
        server.stop("immediate")
        shutil.rmtree(data, ignore_errors=True)
