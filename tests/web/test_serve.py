"""`cronctl serve`: real state from real `cronctl run`s, a real server, a real Chromium.

The browser is Debian's chromium driven by Playwright (never `playwright install`, which
downloads); .ci/run installs chromium, and these tests are required, not skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from cronctl.core.runs import RunRow
from cronctl.edge.state.store import Store
from tests.helpers import Cli, free_port, listening, wait_for

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
NOW = "2026-12-03T08:03:00Z"
HOSTILE = (
    'printf \'<script>document.title="pwned"</script></textarea>'
    '<a id="evil" href="javascript:document.title=1">click</a>'
    "\\033[31mred\\033]0;title\\007\\n'; exit 3"
)
SCHEDULE = f"""
[[task]]
name = "hostile"
cron = "* * * * *"
command = '''{HOSTILE}'''
description = "says <b id='bold'>hi</b>"

[[task]]
name = "fine"
cron = "*/5 * * * *"
command = "echo fine https://bob:hunter2@example.com/x"
env = {{ API_KEY = "s3cret-value" }}
"""


class Server:
    def __init__(self, proc: subprocess.Popen[str], port: int) -> None:
        self.proc = proc
        self.port = port
        self.base = f"http://127.0.0.1:{port}"

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        request = urllib.request.Request(self.base + path, headers=headers or {})  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()


def _serve(
    cli: Cli,
    tmp_path: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    code: str | None = None,
) -> Server:
    """`cronctl serve` on a free port (`code`: started as `python -c CODE` instead)."""
    port = free_port()
    proc = cli.popen_code(code, "serve", "--listen", f"127.0.0.1:{port}", "--now", NOW,
                          *_dirs(tmp_path), *extra, env=env)  # fmt: skip
    try:
        wait_for(lambda: listening(port, proc), "serve to listen", 60)
    except AssertionError:
        proc.kill()
        raise
    return Server(proc, port)


def _dirs(tmp_path: Path) -> list[str]:
    return ["--state-dir", str(tmp_path / "state"), "--lock-dir", str(tmp_path / "locks")]


@pytest.fixture
def state(cli: Cli, tmp_path: Path) -> Path:
    (tmp_path / "schedules.toml").write_text(SCHEDULE, encoding="utf-8")
    for minute in ("08:00", "08:01", "08:02"):
        result = cli("run", "--now", f"2026-12-03T{minute}:00Z", *_dirs(tmp_path))
        assert result.returncode in (0, 1), result.stderr
    return tmp_path


@pytest.fixture
def server(cli: Cli, state: Path) -> Iterator[Server]:
    srv = _serve(cli, state)
    yield srv
    srv.proc.terminate()
    srv.proc.communicate(timeout=20)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(java_script_enabled=True)
    page = context.new_page()
    yield page
    context.close()


def test_overview_lists_failing_first_with_schedule_in_words(server: Server, page: Page) -> None:
    page.goto(server.base + "/")
    rows = page.locator("table.tasks tbody tr")
    assert rows.count() == 2
    first = rows.nth(0)
    assert first.locator("a").first.inner_text() == "hostile"
    assert "failing" in first.inner_text()
    assert "every minute" in first.inner_text()
    assert "every 5 minutes" in rows.nth(1).inner_text()
    assert "in 2 min" in rows.nth(1).inner_text()  # next run from --now
    upcoming = rows.nth(1).locator("time").first
    assert upcoming.get_attribute("datetime") == "2026-12-03T08:05:00Z"


def test_overview_filters_by_state_and_name_without_javascript(
    server: Server, browser: Browser
) -> None:
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(server.base + "/")
    page.select_option("select[name=state]", "ok")
    page.click("button[type=submit]")
    # expect() waits for the filtered page: a loaded machine may still be loading it.
    names = page.locator("table.tasks tbody tr td:first-child a")
    expect(names).to_have_text(["fine"], timeout=30_000)
    page.fill("input[name=name]", "host")
    page.select_option("select[name=state]", "")
    page.click("button[type=submit]")
    expect(names).to_have_text(["hostile"], timeout=30_000)
    context.close()


def test_hostile_output_and_names_are_shown_inert(server: Server, page: Page) -> None:
    alerts: list[str] = []
    page.on("dialog", lambda dialog: (alerts.append(dialog.message), dialog.dismiss()))
    page.goto(server.base + "/tasks/hostile")
    assert page.locator("#bold").count() == 0  # the description's markup is text
    page.locator("table.history a").first.click()
    output = page.locator("pre.output")
    text = output.inner_text()
    assert "<script>" in text and "</textarea>" in text and "javascript:" in text
    assert "^[[31m" in text and "^G" in text  # terminal escapes shown, not obeyed
    assert output.locator("script, a, textarea").count() == 0
    assert page.locator("#evil").count() == 0
    assert page.title() != "pwned" and not alerts
    assert page.locator("script").count() == 0  # no script at all on any page


def test_overview_shows_descriptions_and_pause_reasons_inert(
    cli: Cli, server: Server, state: Path, page: Page
) -> None:
    reason = '<img id="evil-reason" src=x> \x1b[2J'
    paused = cli("pause", "fine", "--reason", reason, *_dirs(state))
    assert paused.returncode == 0, paused.stderr
    page.goto(server.base + "/")
    assert page.locator("#bold, #evil-reason, script").count() == 0
    text = page.locator("table.tasks").inner_text()
    assert "says <b id='bold'>hi</b>" in text
    assert '<img id="evil-reason" src=x> ^[[2J' in text


def test_fifty_concurrent_requests_all_answer(server: Server) -> None:
    paths = ["/", "/api/tasks", "/tasks/fine", "/fleet", "/api/runs?task=hostile", "/api/hosts"]
    statuses: list[int] = []
    lock = threading.Lock()

    def ask(i: int) -> None:
        status, body = server.get(paths[i % len(paths)])
        with lock:
            statuses.append(status if body else -1)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert statuses == [200] * 50


def test_every_page_forbids_inline_script(server: Server) -> None:
    for path in ("/", "/tasks/fine", "/fleet", "/api/tasks"):
        status, _ = server.get(path)
        assert status == 200
    request = urllib.request.Request(server.base + "/")  # noqa: S310
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        csp = response.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp


def test_secrets_are_never_shown(server: Server) -> None:
    for path in ("/tasks/fine", "/api/tasks/fine", "/", "/api/tasks"):
        _, body = server.get(path)
        assert b"hunter2" not in body and b"s3cret-value" not in body
    _, body = server.get("/tasks/fine")
    assert b"https://bob:***@example.com/x" in body


def test_task_page_shows_upcoming_timeline_and_durations(server: Server, page: Page) -> None:
    page.goto(server.base + "/tasks/fine")
    upcoming = page.locator("h2:has-text('Upcoming') + table tbody tr")
    assert upcoming.first.inner_text().startswith("in 2 min")
    assert upcoming.first.locator("time").get_attribute("title") == "2026-12-03 08:05 UTC"
    for picture in page.locator("img.picture").all():
        assert picture.evaluate("img => img.complete && img.naturalWidth > 0")


def test_pages_say_times_from_the_servers_now_exact_in_the_tasks_zone(
    cli: Cli, tmp_path: Path, page: Page
) -> None:
    (tmp_path / "schedules.toml").write_text(
        '[[task]]\nname = "berlin"\ncron = "15 9 * * *"\ntimezone = "Europe/Berlin"\n'
        'command = "true"\n',
        encoding="utf-8",
    )
    ran = cli("run", "--now", "2026-12-02T08:15:00Z", *_dirs(tmp_path))
    assert ran.returncode == 0, ran.stderr
    srv = _serve(cli, tmp_path)  # at NOW, 08:03 UTC: 09:03 in Berlin
    try:
        page.goto(srv.base + "/")
        row = page.locator("table.tasks tbody tr").first
        next_run, last_run = row.locator("time").all()[-2:]
        assert next_run.inner_text() == "in 12 min"
        assert next_run.get_attribute("title") == "2026-12-03 09:15 CET (Europe/Berlin)"
        assert next_run.get_attribute("datetime") == "2026-12-03T08:15:00Z"
        assert last_run.inner_text() == "1 day ago"  # 23 h 48 min
        assert last_run.get_attribute("title") == "2026-12-02 09:15 CET (Europe/Berlin)"
        page.goto(srv.base + "/tasks/berlin")
        facts = page.locator("dl.facts time").first
        assert facts.inner_text() == "in 12 min" and "CET (Europe/Berlin)" in str(
            facts.get_attribute("title")
        )
        page.locator("table.history a").first.click()  # the run's page
        occurrence = page.locator("dl.facts time").first
        assert occurrence.get_attribute("title") == "2026-12-02 09:15 CET (Europe/Berlin)"
        page.goto(srv.base + "/fleet")  # a host has no zone of its own: UTC
        seen = page.locator("table.hosts time").first
        assert str(seen.get_attribute("title")).endswith(" UTC")
        # The JSON keeps UTC ISO 8601.
        task = json.loads(srv.get("/api/tasks")[1])["tasks"][0]
        assert task["next_run"] == "2026-12-03T08:15:00Z"
        assert task["last_run"]["occurrence"] == "2026-12-02T08:15:00Z"
        (host,) = json.loads(srv.get("/api/hosts")[1])["hosts"]
        assert host["last_seen"] == seen.get_attribute("datetime")
    finally:
        srv.proc.terminate()
        srv.proc.communicate(timeout=20)


def test_history_pages_by_keyset_through_every_run(cli: Cli, state: Path, page: Page) -> None:
    base = datetime(2026, 11, 1, tzinfo=UTC)
    with Store.open(state / "state") as store, store.transaction() as txn:
        txn.add_runs(
            [
                RunRow(
                    f"bulk-{i:04d}",
                    "fine",
                    base + timedelta(minutes=5 * i),
                    "ok",
                    "vm",
                    exit_code=0,
                    duration_s=float(i % 7),
                )
                for i in range(120)
            ]
        )
    srv = _serve(cli, state)
    try:
        page.goto(srv.base + "/tasks/fine?outcome=ok")
        seen: list[str] = []
        while True:
            links = page.locator("table.history tbody tr td:first-child time").all()
            seen += [str(link.get_attribute("datetime")) for link in links]
            older = page.locator("a.older")
            if older.count() == 0:
                break
            older.click()
        assert len(seen) == len(set(seen)) == 121  # 120 written + 1 real run, none twice
        assert seen == sorted(seen, reverse=True)
        status, body = srv.get("/api/runs?task=fine&outcome=failed")
        assert status == 200 and json.loads(body)["runs"] == []
        status, body = srv.get("/api/runs?before=nonsense")
        assert status == 400 and "cursor" in json.loads(body)["error"]
    finally:
        srv.proc.terminate()
        srv.proc.communicate(timeout=20)


def test_an_unknown_task_or_run_answers_404(server: Server) -> None:
    for path in ("/tasks/nosuch", "/api/tasks/nosuch", "/tasks/nosuch/timeline.svg",
                 "/runs/20260101T0000Z-0000000000000000"):  # fmt: skip
        status, body = server.get(path)
        assert status == 404, (path, status, body)
        assert b"no task named" in body or b"no run " in body, body
    status, _ = server.get("/api/runs?before=nonsense")
    assert status == 400  # a bad value stays a bad request


def test_api_shapes_match_the_cli(cli: Cli, server: Server, state: Path) -> None:
    _, body = server.get("/api/runs?task=hostile")
    runs = json.loads(body)["runs"]
    history = json.loads(cli("history", "hostile", "--json", *_dirs(state)).stdout)["runs"]
    assert runs == history
    _, body = server.get("/api/hosts")
    assert [h["host"] for h in json.loads(body)["hosts"]] == [runs[0]["host"]]


def test_a_fresh_state_dir_shows_every_task_as_never_ran(cli: Cli, tmp_path: Path) -> None:
    assert cli("init").returncode == 0
    srv = _serve(cli, tmp_path)
    try:
        status, body = srv.get("/api/tasks")
        assert status == 200, body
        tasks = json.loads(body)["tasks"]
        assert len(tasks) == 10 and {t["state"] for t in tasks} == {"new", "paused"}
        assert all(t["last_run"] is None for t in tasks)
        status, body = srv.get("/")
        assert status == 200, body
        page = body.decode()
        assert f"Nothing has run with state dir <code>{tmp_path / 'state'}</code> yet" in page
        assert page.count('<span class="muted">never ran</span>') == 10
        for path in ("/tasks/heartbeat", "/fleet", "/api/runs", "/api/tasks/heartbeat"):
            assert srv.get(path)[0] == 200, path
    finally:
        srv.proc.terminate()
        srv.proc.communicate(timeout=20)
    assert not (tmp_path / "state").exists()


def test_a_foreign_host_header_is_refused(server: Server) -> None:
    status, _ = server.get("/", {"Host": "attacker.example:8077"})
    assert status == 421


def test_non_loopback_listen_without_a_token_is_refused(cli: Cli, state: Path) -> None:
    result = cli("serve", "--listen", "0.0.0.0:18099", *_dirs(state), timeout=30)
    assert result.returncode == 2
    assert "without a token" in result.stderr and "CRONCTL_SERVE_TOKEN" in result.stderr


def test_with_a_token_every_request_must_bring_it(cli: Cli, state: Path, browser: Browser) -> None:
    token = "t0ken-" + "x" * 20
    srv = _serve(cli, state, env={"CRONCTL_SERVE_TOKEN": token})
    try:
        assert srv.get("/api/tasks")[0] == 401
        assert srv.get("/api/tasks", {"Authorization": "Bearer wrong"})[0] == 401
        assert srv.get("/api/tasks", {"Authorization": f"Bearer {token}"})[0] == 200
        context = browser.new_context(java_script_enabled=False)
        page = context.new_page()
        page.goto(srv.base + "/")
        assert page.url.endswith("/login")
        page.fill("input[name=token]", "wrong")
        page.click("button[type=submit]")
        assert "not the token" in page.inner_text("main")
        page.fill("input[name=token]", token)
        page.click("button[type=submit]")
        assert page.locator("table.tasks tbody tr").count() == 2
        context.close()
    finally:
        srv.proc.terminate()
        srv.proc.communicate(timeout=20)


@pytest.mark.parametrize("missing", ["uvicorn", "starlette", "jinja2"])
def test_without_the_web_extra_serve_names_the_install_command_that_fits(
    cli: Cli, tmp_path: Path, missing: str
) -> None:
    """A checkout installed with pip is reinstalled from its path, not from an index;
    whichever package of the extra is missing."""
    hidden = tmp_path / "no-web" / missing
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('not installed')\n")
    (tmp_path / "schedules.toml").write_text(SCHEDULE, encoding="utf-8")
    env = {"PYTHONPATH": f"{hidden.parent}{os.pathsep}{cli.env['PYTHONPATH']}"}
    result = cli("serve", *_dirs(tmp_path), env=env, timeout=30)
    assert result.returncode == 2
    recorded = json.loads(metadata.distribution("cronctl").read_text("direct_url.json") or "{}")
    url = recorded.get("url", "")
    if url.startswith("file://"):
        editable = "-e " if recorded.get("dir_info", {}).get("editable") else ""
        expected = f"-m pip install {editable}'{url.removeprefix('file://')}[web]'"
    else:
        expected = "-m pip install 'cronctl[web]'"
    assert expected in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_only_serve_loads_the_web_extra(cli: Cli) -> None:
    """The typer app imports the dashboard's app only when `serve` starts (cli/serve_cmd.py),
    so no other command pays for Starlette, Jinja2 and uvicorn."""
    extra = "{'starlette', 'jinja2', 'uvicorn'}"
    code = f"import sys, cronctl.cli.app; print(sorted({extra} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], env=dict(cli.env), capture_output=True,
                            text=True, timeout=60, check=True)  # fmt: skip
    assert result.stdout.strip() == "[]"
