"""Chains on a PostgreSQL store: two machines run each link once per upstream occurrence,
and one catches up the link the other's crash left."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import pytest

from cronctl.coord.history import RunQuery
from cronctl.coord.port import ChainEnd
from cronctl.coord.postgres.adapter import PostgresCoordinator
from cronctl.core.model import Schedule
from cronctl.run.context import RunReport
from tests.coord.conftest import PgServer
from tests.coord.postgres.kit import database_of
from tests.helpers import Cli
from tests.run.conftest import Drive
from tests.run.test_chain_processes import caught_up_elsewhere
from tests.run.test_chains import AT_2, crashed_after_extract, etl, trail


def _run(drive: Drive, url: str, schedule: Schedule, host: str, minutes: int) -> RunReport:
    coord = PostgresCoordinator(url, host=host, pid=1000 + len(host))
    drive.host = host
    return drive.run(
        schedule, AT_2 + timedelta(minutes=minutes), state_dir=drive.root / host, coord=coord
    )


def test_two_machines_run_each_link_once(tmp_path: Path, pg_url: str, pg_server: PgServer) -> None:
    drive = Drive(tmp_path)
    schedule = etl(drive, extra="on_one_server = true\n")
    for host in ("web-1", "web-2"):
        _run(drive, pg_url, schedule, host, -1)
    reports: dict[str, RunReport] = {}

    def machine(host: str) -> None:
        sibling = Drive(tmp_path, host=host)
        coord = PostgresCoordinator(pg_url, host=host, pid=2000 + len(host))
        reports[host] = sibling.run(schedule, AT_2, state_dir=tmp_path / host, coord=coord)

    threads = [threading.Thread(target=machine, args=(h,)) for h in ("web-1", "web-2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    ran = [
        (r.task, r.host) for report in reports.values() for r in report.runs if r.outcome == "ok"
    ]
    assert sorted(task for task, _ in ran) == ["extract", "load", "transform"]
    assert sorted(step[0] for step in trail(drive)) == ["extract", "load", "transform"]
    ids = {r.task: r.id for report in reports.values() for r in report.runs if r.outcome == "ok"}
    published = pg_server.sql(
        "SELECT task, upstream FROM cronctl.runs WHERE trigger = 'after' AND outcome = 'ok' "
        "ORDER BY task",
        database_of(pg_url),
    )
    assert published == [("load", ids["transform"]), ("transform", ids["extract"])]
    # The fleet views show them as `history` and the dashboard show this machine's.
    reader = PostgresCoordinator(pg_url, host="reader", pid=1)
    try:
        ones = [reader.fleet_run(ids["load"]), reader.fleet_run(ids["transform"])]
        for found in (reader.fleet_history(None, None, 10), reader.fleet_page(RunQuery()), ones):
            chained = {r.task: r.upstream for r in found if r and r.trigger == "after"}
            assert chained == {"load": ids["transform"], "transform": ids["extract"]}
    finally:
        reader.close()


def test_another_machine_catches_up_a_link_once(tmp_path: Path, pg_url: str) -> None:
    drive = Drive(tmp_path)
    schedule = etl(drive, extra="on_one_server = true\n")
    for host in ("web-1", "web-2"):
        _run(drive, pg_url, schedule, host, -1)
    coord = PostgresCoordinator(pg_url, host="web-1", pid=3000)
    end = crashed_after_extract(drive, schedule, coord=coord, state_dir=tmp_path / "web-1")
    caught = _run(drive, pg_url, schedule, "web-2", 1)
    assert [(r.task, r.outcome, r.upstream) for r in caught.runs if r.task == "transform"] == [
        ("transform", "ok", end.run_id)
    ]
    later = _run(drive, pg_url, schedule, "web-1", 2)
    assert {(r.task, r.outcome) for r in later.runs} == {
        ("transform", "skipped: another server"),
        ("load", "skipped: another server"),
    }
    assert [step[0] for step in trail(drive)] == ["transform", "load"]


def test_an_end_row_no_reader_can_use_is_skipped_and_named(
    pg_url: str, pg_server: PgServer, capsys: pytest.CaptureFixture[str]
) -> None:
    coord = PostgresCoordinator(pg_url, host="web-1", pid=1)
    try:
        good = ChainEnd("extract", AT_2, "ok", "20260803T0200Z-00000000000000ab", "web-1",
                        AT_2 + timedelta(seconds=3))  # fmt: skip
        coord.record_end(good)
        pg_server.sql(
            "INSERT INTO cronctl.chain_ends VALUES "
            "('extract', '2026-08-03 02:00+00', 'b', 'skipped: paused', 'r1', now()), "
            "('extract', '2026-08-03 02:00+00', 'c', 'ok', '../x', now()), "
            "('extract', '2026-08-03 02:00+00', 'd', 'ok', 'r2', 'infinity'), "
            "('extract', 'infinity', 'e', 'ok', 'r3', now())",
            database_of(pg_url),
        )
        assert coord.chain_ends({"extract"}, AT_2) == [good]
        assert coord.chain_ends({"extract"}, AT_2) == [good]
    finally:
        coord.close()
    err = capsys.readouterr().err
    assert err.count("cronctl.chain_ends") == 4  # each named once, not at every read


def test_a_kill_between_two_links_is_caught_up_by_another_machine(
    cli: Cli, tmp_path: Path, pg_url: str
) -> None:
    caught_up_elsewhere(cli, tmp_path, pg_url)
