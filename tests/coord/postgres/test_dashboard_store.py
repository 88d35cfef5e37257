"""What the dashboard reads of a fleet store (docs/dashboard.md, docs/fleets-postgresql.md):
the output tail each run that did not end well publishes, history filtered and keyset-paged
by the store on an index, each host's version and clock skew, and the migration that brings
an existing store there. Real `cronctl run`s, a real PostgreSQL."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronctl._version import __version__
from cronctl.coord.history import RunQuery
from cronctl.coord.outbox import OUTBOX, OUTPUT_TAIL_BYTES
from cronctl.coord.postgres import conn, fleet, schema
from cronctl.coord.postgres.adapter import PostgresCoordinator
from cronctl.core.runs import RunRow
from tests.coord.conftest import PgServer
from tests.coord.postgres.kit import T1, T, database_of, older_store, serving
from tests.coord.postgres.test_blocked_store import locked
from tests.helpers import Cli, write_schedule

SECRET = "Zq8-tok-VeryPrivate"  # noqa: S105  (a test's secret)
# 12,000 bytes of numbered lines, the secret, a last line; then a failure.
NOISY = (
    "i=0; while [ $i -lt 400 ]; do printf 'line %05d %s\\n' $i "
    'abcdefghijklmnopqrstu; i=$((i+1)); done; echo "token=$TOKEN"; echo last-line; exit 3'
)


@pytest.fixture
def coord(pg_url: str) -> Iterator[PostgresCoordinator]:
    store = PostgresCoordinator(pg_url, host="viewer", pid=os.getpid())
    yield store
    store.close()


def _noisy_schedule(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(SECRET + "\n")
    (tmp_path / "token").chmod(0o600)
    write_schedule(
        tmp_path / "schedules.toml",
        [
            f"name = \"noisy\"\ncron = \"* * * * *\"\ncommand = '''{NOISY}'''\n"
            f'env_from_file = {{ TOKEN = "{tmp_path / "token"}" }}',
            'name = "fine"\ncron = "* * * * *"\ncommand = "echo all is well"',
        ],
    )


def _stored(pg_server: PgServer, pg_url: str) -> dict[str, tuple[Any, ...]]:
    rows = pg_server.sql(
        "SELECT task, outcome, output, trigger, attempt FROM cronctl.runs", database_of(pg_url)
    )
    return {str(row[0]): row[1:] for row in rows}


def test_a_failed_run_publishes_the_masked_end_of_its_log(
    machine: Callable[..., Any], tmp_path: Path, pg_server: PgServer, pg_url: str
) -> None:
    _noisy_schedule(tmp_path)
    result = machine("a", "run", "--now", T)
    assert result.returncode == 1, result.stderr
    stored = _stored(pg_server, pg_url)
    outcome, output, trigger, attempt = stored["noisy"]
    assert (outcome, trigger, attempt) == ("failed", "schedule", 1)
    (log,) = (tmp_path / "a" / "logs" / "noisy").glob("*.log")
    assert log.stat().st_size > OUTPUT_TAIL_BYTES  # there was more than the store keeps
    assert output.encode() == log.read_bytes()[-OUTPUT_TAIL_BYTES:]  # the log's own end
    assert output.endswith("token=***\nlast-line\n")
    assert SECRET not in output and "Zq8" not in output
    assert stored["fine"][:2] == ("ok", None)  # a run that went well publishes no output


def test_an_unreachable_store_keeps_the_tail_waiting_in_the_outbox(
    machine: Callable[..., Any], tmp_path: Path, pg_server: PgServer, pg_url: str
) -> None:
    _noisy_schedule(tmp_path)
    machine("a", "run", "--now", T)  # the schema, and a first run
    with locked(pg_url, "LOCK TABLE cronctl.runs IN ACCESS EXCLUSIVE MODE"):
        result = machine("a", "run", "--now", T1)
    # The run went as usual (its failure is the task's); only its records wait.
    assert result.returncode == 1 and "records wait in" in result.stderr, result.stderr
    assert (tmp_path / "a" / OUTBOX).exists()
    machine("a", "run", "--now", "2026-08-03T09:02:00Z")
    outputs = pg_server.sql(
        "SELECT occurrence, output FROM cronctl.runs WHERE task = 'noisy' ORDER BY occurrence",
        database_of(pg_url),
    )
    assert len(outputs) == 3
    assert all(str(o).endswith("token=***\nlast-line\n") for _, o in outputs)
    assert not (tmp_path / "a" / OUTBOX).exists()


def test_an_existing_store_is_migrated_and_keeps_its_records(
    pg_url: str, pg_server: PgServer
) -> None:
    # The store as the previous cronctl left it: version 2, one record published.
    with older_store(pg_url, 2):
        pass
    database = database_of(pg_url)
    pg_server.sql(
        "INSERT INTO cronctl.runs (id, task, occurrence, host, outcome) "
        "VALUES ('r-old', 'backup', '2026-08-03T09:00:00Z', 'old', 'failed')",
        database,
    )
    now = PostgresCoordinator(pg_url, host="new", pid=2)
    try:
        assert now.check().version == schema.SCHEMA_VERSION
        (old_run,) = now.fleet_page(RunQuery())
        assert (old_run.id, old_run.trigger, old_run.attempt) == ("r-old", "schedule", 1)
        found = now.fleet_run("r-old")
        assert found is not None and found.tail == ""
    finally:
        now.close()
    indexes = {str(row[0]) for row in pg_server.sql(
        "SELECT indexname FROM pg_indexes WHERE schemaname = 'cronctl'", database)}  # fmt: skip
    assert {"runs_page", "runs_page_by_host", "runs_with_output"} <= indexes
    assert "runs_by_occurrence" not in indexes


BASE = datetime(2026, 8, 1, tzinfo=UTC)


def _bulk(count: int) -> list[RunRow]:
    """Runs of two tasks on three hosts, some failed, some manual, several of one minute."""
    rows = []
    for i in range(count):
        rows.append(
            RunRow(
                id=f"{i % 7:02d}-{i:05d}",  # ids not in time order: the cursor must hold them
                task=("backup", "report")[i % 2],
                occurrence=BASE + timedelta(minutes=i // 3),
                outcome="failed" if i % 5 == 0 else "ok",
                host=("a", "b", "c")[i % 3],
                trigger="manual" if i % 4 == 0 else "schedule",
                attempt=1 + i % 2,
            )
        )
    return rows


QUERIES = [
    pytest.param(RunQuery(), id="all"),
    pytest.param(RunQuery(task="backup"), id="task"),
    pytest.param(RunQuery(host="b"), id="host"),
    pytest.param(RunQuery(outcome="failed"), id="outcome"),
    pytest.param(RunQuery(trigger="manual"), id="trigger"),
    pytest.param(RunQuery(task="report", outcome="failed"), id="task-outcome"),
    pytest.param(RunQuery(task="backup", host="a", outcome="failed"), id="task-host-outcome"),
    pytest.param(RunQuery(host="c", outcome="failed", trigger="manual"), id="three"),
]


def _expected(rows: list[RunRow], query: RunQuery) -> list[str]:
    kept = [
        r for r in rows
        if all(want is None or getattr(r, key) == want for key, want in (
            ("task", query.task), ("host", query.host), ("outcome", query.outcome),
            ("trigger", query.trigger)))
    ]  # fmt: skip
    return [r.id for r in sorted(kept, key=lambda r: (r.occurrence, r.id), reverse=True)]


@pytest.mark.parametrize("query", QUERIES)
def test_filtered_history_pages_through_the_store_without_gaps_or_repeats(
    coord: PostgresCoordinator, query: RunQuery
) -> None:
    rows = _bulk(600)
    coord.publish(rows)
    seen: list[str] = []
    pages = 0
    cursor = None
    while True:
        page = coord.fleet_page(RunQuery(query.task, query.host, query.outcome, query.trigger,
                                         cursor, limit=3))  # fmt: skip
        pages += 1
        seen += [r.id for r in page]
        if len(page) < 3:
            break
        cursor = (page[-1].occurrence, page[-1].id)
    assert seen == _expected(rows, query)
    assert pages > 2  # really across pages
    assert {coord.fleet_run(i).attempt for i in seen[:4]} <= {1, 2}  # type: ignore[union-attr]


@pytest.mark.parametrize("query", QUERIES)
def test_every_filter_is_answered_on_an_index_without_sorting(
    coord: PostgresCoordinator, query: RunQuery
) -> None:
    coord.publish(_bulk(60))
    cursor = (BASE + timedelta(minutes=10), "03-00030")
    plans = []
    for before in (None, cursor):
        wanted = RunQuery(query.task, query.host, query.outcome, query.trigger, before)

        def explain(cur: Any, wanted: RunQuery = wanted) -> str:
            # A tiny table, where scanning it all is cheapest: ask for an index that gives
            # the page's order under the filter. Without one, the plan still sorts.
            cur.execute("SET enable_seqscan = off; SET enable_sort = off; "
                        "SET enable_bitmapscan = off")  # fmt: skip
            fleet.page(cur, fleet.Scope(None), coord.skipped, wanted)
            cur.execute(b"EXPLAIN " + cur.query)
            plan = "\n".join(str(line[0]) for line in cur.fetchall())
            cur.execute("RESET ALL")
            return plan

        plans.append((before, coord._call(explain)))
    given = [key for key in ("task", "host", "outcome", "trigger") if getattr(query, key)]
    for before, plan in plans:
        assert "Index" in plan and "Sort" not in plan and "Seq Scan" not in plan, plan
        found = " ".join(line for line in plan.splitlines() if "Index Cond" in line)
        # A filter the index finds (not one that reads every row and drops most): each
        # one alone; of several, at least one. The cursor is found in the index too.
        if len(given) == 1:
            assert f"({given[0]} = " in found, plan
        elif given:
            assert any(f"({key} = " in found for key in given), plan
        if before is not None and not given:
            assert "ROW(occurrence, id) <" in found, plan


def test_hosts_record_their_version_and_clock_skew(pg_url: str) -> None:
    ahead = timedelta(minutes=5)
    right = PostgresCoordinator(pg_url, host="web-1", pid=1)
    fast = PostgresCoordinator(pg_url, host="web-2", pid=2,
                               clock=lambda: datetime.now(UTC) + ahead)  # fmt: skip
    viewer = PostgresCoordinator(pg_url, host="viewer", pid=3)
    try:
        when = datetime(2026, 8, 3, 9, tzinfo=UTC)
        assert right.claim([("backup", when)], now=when) == {("backup", when)}
        fast.claim([("backup", when)], now=when)  # lost: still seen
        fast.publish([RunRow("r1", "report", when, "ok", "web-2")])
        seen = {h.host: h for h in viewer.fleet_hosts()}
    finally:
        for one in (right, fast, viewer):
            one.close()
    assert set(seen) == {"web-1", "web-2"}  # the viewer only read: not a host of the fleet
    assert {h.version for h in seen.values()} == {__version__}
    assert abs(seen["web-1"].skew_s) < 2
    assert abs(seen["web-2"].skew_s - ahead.total_seconds()) < 2


def test_a_project_sees_its_own_hosts_only(pg_url: str) -> None:
    mine = PostgresCoordinator(pg_url, host="web-1", pid=1, project="shop")
    other = PostgresCoordinator(pg_url, host="web-9", pid=2, project="blog")
    try:
        when = datetime(2026, 8, 3, 9, tzinfo=UTC)
        mine.claim([("backup", when)], now=when)
        other.claim([("backup", when)], now=when)
        assert [h.host for h in mine.fleet_hosts()] == ["web-1"]
        assert mine.fleet_run("nope") is None
    finally:
        mine.close()
        other.close()


def test_the_sweep_drops_old_output_and_keeps_the_record(coord: PostgresCoordinator) -> None:
    now = datetime(2026, 8, 30, tzinfo=UTC)
    coord.publish([
        RunRow("old", "t", now - timedelta(days=20), "failed", "a", tail="old output"),
        RunRow("new", "t", now - timedelta(days=2), "failed", "a", tail="new output"),
    ])  # fmt: skip
    coord.sweep(now)
    old, new = coord.fleet_run("old"), coord.fleet_run("new")
    assert old is not None and old.tail == ""
    assert new is not None and new.tail == "new output"


def test_the_api_filters_fleet_history_in_the_store(
    machine: Callable[..., Any],
    tmp_path: Path,
    coord: PostgresCoordinator,
    cli: Cli,
    pg_server: PgServer,
) -> None:
    # Far more than the old in-memory window of 5,000 newest records: the one failure on
    # host c is older than all of them and must still be found. The newer ones are written
    # by the server itself: one statement publishing 5,199 records outlived cronctl's
    # statement time limit on a loaded machine.
    coord.publish([RunRow("x-first", "fine", BASE, "failed", "c", trigger="manual")])
    pg_server.sql(
        "INSERT INTO cronctl.runs (id, task, occurrence, host, outcome) "  # noqa: S608
        "SELECT 'x' || lpad(i::text, 5, '0'), 'fine', "
        f"timestamptz '{BASE.isoformat()}' + i * interval '1 minute', 'b', 'ok' "
        "FROM generate_series(1, 5199) i",
        database_of(coord.url),
    )
    write_schedule(
        tmp_path / "schedules.toml", ['name = "fine"\ncron = "* * * * *"\ncommand = "true"']
    )
    with serving(cli, tmp_path, coord.url, "b") as server:
        _, body = server.get("/api/runs?task=fine&host=c&outcome=failed&trigger=manual")
    assert [r["id"] for r in json.loads(body)["runs"]] == ["x-first"]


@pytest.mark.parametrize("project", [None, "shop"])
def test_the_planner_walks_the_index_on_a_real_sized_history(
    pg_url: str, pg_server: PgServer, project: str | None
) -> None:
    store = PostgresCoordinator(pg_url, host="viewer", pid=1, project=project)
    try:
        store.check()  # the schema
        prefix = f"{project}/" if project else ""
        pg_server.sql(
            "INSERT INTO cronctl.runs (id, task, occurrence, host, outcome) "  # noqa: S608
            f"SELECT 'r' || i, '{prefix}task-' || (i % 40), "
            "timestamptz '2026-08-01' + i * interval '1 minute', 'host-' || (i % 50), 'ok' "
            "FROM generate_series(1, 20000) i",
            database_of(pg_url),
        )
        pg_server.sql("ANALYZE cronctl.runs", database_of(pg_url))

        def explain(cur: Any) -> str:
            fleet.page(cur, store.scope, store.skipped, RunQuery(host="host-7", limit=51))
            cur.execute(b"EXPLAIN " + cur.query)
            return "\n".join(str(line[0]) for line in cur.fetchall())

        plan = store._call(explain)
    finally:
        store.close()
    # The scope's condition once looked like it kept one row in 200: the planner then read
    # every run of the host and sorted them for a page of 50.
    assert "Sort" not in plan and "Index Scan using runs_page_by_host" in plan, plan


def test_a_migration_may_take_longer_than_a_statement_of_a_run(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Indexing a large history (16-26 s for 1,000,000 records) stands in as a sleep past a
    # statement timeout cut to 0.2 s.
    monkeypatch.setattr(
        conn, "_SESSION_OPTIONS", conn._SESSION_OPTIONS.replace("statement_timeout=10000",
                                                                "statement_timeout=200")
    )  # fmt: skip
    monkeypatch.setattr(schema, "MIGRATIONS", (*schema.MIGRATIONS, ("SELECT pg_sleep(0.5)",)))
    monkeypatch.setattr(schema, "SCHEMA_VERSION", len(schema.MIGRATIONS))
    store = PostgresCoordinator(pg_url, host="new", pid=1)
    try:
        assert store.check().version == schema.SCHEMA_VERSION
    finally:
        store.close()
