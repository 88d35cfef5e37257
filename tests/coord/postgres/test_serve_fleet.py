"""`cronctl serve` on one machine of a fleet shows another's runs (docs/dashboard.md): the
output tail machine A published, hostile and masked, in a real Chromium on machine B's
dashboard; and the fleet page's hosts with their version and clock skew."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page

from cronctl._version import __version__
from cronctl.coord.postgres.adapter import PostgresCoordinator
from tests.coord.postgres.kit import T, serving
from tests.coord.postgres.test_blocked_store import locked
from tests.helpers import Cli, write_schedule
from tests.web.test_actions import run_now_beside_exec
from tests.web.test_crawl import SCHEDULES, every_page_answers, shown_as_command
from tests.web.test_serve import HOSTILE, browser, page  # noqa: F401 (the fixtures)

SECRET = "Wm4-hush-NotForYou"  # noqa: S105  (a test's secret)


def test_a_dashboard_shows_another_machines_failed_run_inert_and_masked(
    cli: Cli,
    machine: Callable[..., Any],
    tmp_path: Path,
    pg_url: str,
    page: Page,  # noqa: F811 (the fixture)
) -> None:
    (tmp_path / "token").write_text(SECRET + "\n")
    (tmp_path / "token").chmod(0o600)
    command = HOSTILE.replace("; exit 3", '; echo "the token is $TOKEN"; exit 3')
    write_schedule(
        tmp_path / "schedules.toml",
        [
            f"name = \"hostile\"\ncron = \"* * * * *\"\ncommand = '''{command}'''\n"
            f'env_from_file = {{ TOKEN = "{tmp_path / "token"}" }}'
        ],
    )
    assert machine("a", "run", "--now", T).returncode == 1
    alerts: list[str] = []
    page.on("dialog", lambda dialog: (alerts.append(dialog.message), dialog.dismiss()))
    with serving(cli, tmp_path, pg_url, "b") as server:
        page.goto(server.base + "/tasks/hostile?host=a&outcome=failed")
        page.locator("table.history a").first.click()
        assert "Host\na" in page.inner_text("dl.facts")  # machine A's run, on B's page
        output = page.locator("pre.output")
        text = output.inner_text()
        assert "published to the store" in page.inner_text("h2:has-text('Output')")
        assert "<script>" in text and "</textarea>" in text and "javascript:" in text
        assert "^[[31m" in text and "^G" in text  # terminal escapes shown, not obeyed
        assert "the token is ***" in text
        assert output.locator("script, a, textarea").count() == 0
        assert page.locator("#evil, script").count() == 0
        assert page.title() != "pwned" and not alerts
        for path in (page.url.removeprefix(server.base), "/api/runs", "/fleet"):
            _, body = server.get(path)
            assert SECRET.encode() not in body


def test_the_fleet_page_shows_each_hosts_version_and_clock_skew(
    cli: Cli,
    tmp_path: Path,
    pg_url: str,
    page: Page,  # noqa: F811 (the fixture)
) -> None:
    write_schedule(
        tmp_path / "schedules.toml", ['name = "t"\ncron = "* * * * *"\ncommand = "true"']
    )
    when = datetime(2026, 8, 3, 9, tzinfo=UTC)
    late = timedelta(seconds=90)
    behind = PostgresCoordinator(
        pg_url, host="slow-clock", pid=os.getpid(), clock=lambda: datetime.now(UTC) - late
    )
    right = PostgresCoordinator(pg_url, host="good-clock", pid=os.getpid())
    try:
        for one in (behind, right):
            one.claim([("t", when)], now=when)
    finally:
        behind.close()
        right.close()
    with serving(cli, tmp_path, pg_url, "viewer") as server:
        _, body = server.get("/api/hosts")
        page.goto(server.base + "/fleet")
        rows, seen_at = {}, {}
        for row in page.locator("table.hosts tbody tr").all():
            name = row.locator("td").first.inner_text()
            rows[name] = row.inner_text()
            seen_at[name] = row.locator("time").get_attribute("datetime")
    hosts = {h["host"]: h for h in json.loads(body)["hosts"]}
    assert set(hosts) == set(rows) == {"slow-clock", "good-clock"}
    assert {h["version"] for h in hosts.values()} == {__version__}
    assert abs(hosts["slow-clock"]["clock_skew_s"] + 90) < 2
    assert abs(hosts["good-clock"]["clock_skew_s"]) < 2
    assert re.search(r"-(8[89]|9[01])\.\d s", rows["slow-clock"]), rows
    # Its last seen as the API gives it (the store's clock at the check-in); a year written
    # here ("2026") is the real clock's, and failed from 1 January 2027.
    seen = str(hosts["good-clock"]["last_seen"])
    assert __version__ in rows["good-clock"] and seen != "-" and seen == seen_at["good-clock"]


def test_a_dashboard_recovers_when_the_store_answers_again(
    cli: Cli, tmp_path: Path, pg_url: str
) -> None:
    write_schedule(
        tmp_path / "schedules.toml", ['name = "t"\ncron = "* * * * *"\ncommand = "true"']
    )
    maker = PostgresCoordinator(pg_url, host="maker", pid=1)
    maker.check()  # creates the schema, which the dashboard only reads
    maker.close()
    with serving(cli, tmp_path, pg_url, "viewer") as server:
        assert server.get("/api/runs")[0] == 200
        with locked(pg_url, "LOCK TABLE cronctl.runs IN ACCESS EXCLUSIVE MODE"):
            status, body = server.get("/api/runs")
        assert status == 503 and "did not answer in time" in json.loads(body)["error"]
        status, body = server.get("/api/runs")
        assert status == 200 and json.loads(body) == {"runs": [], "before": None}


def test_a_fleet_dashboard_shows_its_own_machines_runs_from_the_whole_log(
    cli: Cli, machine: Callable[..., Any], tmp_path: Path, pg_url: str
) -> None:
    command = "i=0; while [ $i -lt 2000 ]; do echo line-$i; i=$((i+1)); done; exit 1"
    write_schedule(
        tmp_path / "schedules.toml", [f'name = "t"\ncron = "* * * * *"\ncommand = "{command}"']
    )
    assert machine("a", "run", "--now", T).returncode == 1
    with serving(cli, tmp_path, pg_url, "a") as mine, serving(cli, tmp_path, pg_url, "b") as other:
        (run,) = json.loads(mine.get("/api/runs")[1])["runs"]
        _, here = mine.get(f"/runs/{run['id']}")
        _, there = other.get(f"/runs/{run['id']}")
    assert b"this machine&#39;s log" in here and b"line-0\n" in here  # the whole log
    assert b"published to the store" in there and b"line-0\n" not in there  # its last 8 KB
    assert b"line-1999" in here and b"line-1999" in there


def test_run_now_beside_exec_with_a_project_and_a_store(
    cli: Cli, tmp_path: Path, pg_url: str
) -> None:
    run_now_beside_exec(cli, tmp_path, pg_url)


@pytest.mark.parametrize("which", sorted(SCHEDULES))
def test_every_page_of_a_fleet_dashboard_answers(
    cli: Cli, tmp_path: Path, pg_url: str, which: str
) -> None:
    schedule = SCHEDULES[which](tmp_path)
    pages = every_page_answers(cli, tmp_path, schedule, {"CRONCTL_COORDINATION": pg_url})
    assert "/fleet" in pages
    if which == "every-key":
        shown_as_command(pages["/tasks/array-command"])
