"""`cronctl serve --allow-actions`: pause, resume and run now from the dashboard, and the task
page's "explain a time" — through a real server, real HTTP requests and a real Chromium
(the fixtures and the server of test_serve.py)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from tests.helpers import Cli, wait_for
from tests.web.test_serve import NOW, Server, _dirs, _serve, browser, page, server, state

__all__ = ["browser", "page", "server", "state"]  # fixtures used here, from test_serve.py

TOKEN = "act10n-token-" + "y" * 20
TOKEN_ENV = {"CRONCTL_SERVE_TOKEN": TOKEN}


def _fine_and_gated(root: Path) -> str:
    return f"""
[[task]]
name = "fine"
cron = "*/5 * * * *"
command = "echo fine"

[[task]]
name = "gated"
cron = "0 3 * * *"
command = '''echo "token=$CRONCTL_SERVE_TOKEN" >> {root}/marks
while [ ! -e {root}/gate ]; do sleep 0.05; done'''
"""


def _write_state(cli: Cli, root: Path) -> None:
    """The schedule, and the state of one minute's `cronctl run` (`fine` ran)."""
    (root / "schedules.toml").write_text(_fine_and_gated(root), encoding="utf-8")
    result = cli("run", "--now", "2026-12-03T08:00:00Z", *_dirs(root))
    assert result.returncode == 0, result.stderr


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _http(
    srv: Server, method: str, path: str, body: bytes | None = None, **headers: str
) -> tuple[int, bytes, dict[str, str]]:
    request = urllib.request.Request(  # noqa: S310
        srv.base + path, data=body, method=method, headers=headers
    )
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def _login(srv: Server) -> str:
    status, _, headers = _http(srv, "POST", "/login", f"token={TOKEN}".encode())
    assert status == 303
    match = re.search(r"cronctl_session=([^;]+)", headers["set-cookie"])
    assert match is not None and TOKEN not in headers["set-cookie"]
    return match.group(1)


def _csrf(srv: Server, cookie: str, task: str = "fine") -> str:
    status, body, _ = _http(srv, "GET", f"/tasks/{task}", Cookie=f"cronctl_session={cookie}")
    assert status == 200
    match = re.search(rb'name="csrf" value="([0-9a-f]+)"', body)
    assert match is not None
    return match.group(1).decode()


def _status(cli: Cli, root: Path) -> dict[str, dict[str, object]]:
    result = cli("status", "--json", *_dirs(root))
    return {t["name"]: t for t in json.loads(result.stdout)["tasks"]}


def _audit(root: Path) -> list[dict[str, object]]:
    path = root / "state" / "audit.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="ascii").splitlines()]


def _stop(srv: Server) -> None:
    """Stop the server; not `communicate`: a run now it started may hold its stderr open."""
    srv.proc.terminate()
    srv.proc.wait(timeout=20)
    for pipe in (srv.proc.stdout, srv.proc.stderr):
        if pipe is not None:
            pipe.close()


@pytest.fixture
def acting(cli: Cli, tmp_path: Path) -> Iterator[Server]:
    _write_state(cli, tmp_path)
    srv = _serve(cli, tmp_path, "--allow-actions", env=TOKEN_ENV)
    try:
        yield srv
    finally:
        (tmp_path / "gate").touch()  # lets a run-now still waiting end
        _stop(srv)


def test_allow_actions_without_a_token_is_refused(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "schedules.toml").write_text(_fine_and_gated(tmp_path), encoding="utf-8")
    result = cli("serve", "--allow-actions", *_dirs(tmp_path), timeout=30)
    assert result.returncode == 2
    assert "--allow-actions needs CRONCTL_SERVE_TOKEN" in result.stderr


def test_without_allow_actions_there_are_no_actions(cli: Cli, tmp_path: Path) -> None:
    _write_state(cli, tmp_path)
    srv = _serve(cli, tmp_path, env=TOKEN_ENV)
    try:
        cookie = _login(srv)
        _, body, _ = _http(srv, "GET", "/tasks/fine", Cookie=f"cronctl_session={cookie}")
        assert b"Run now" not in body and b'name="csrf"' not in body
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        for kind in ("pause", "resume", "run"):
            assert _http(srv, "POST", f"/api/tasks/fine/{kind}", b"{}", **bearer)[0] == 404
            status, _, _ = _http(srv, "POST", f"/tasks/fine/{kind}", b"",
                                 Cookie=f"cronctl_session={cookie}")  # fmt: skip
            assert status in (404, 405)
    finally:
        _stop(srv)
    assert not _status(cli, tmp_path)["fine"]["paused"]


def test_actions_are_refused_without_the_token(cli: Cli, acting: Server, tmp_path: Path) -> None:
    form = b"reason=x&csrf=0"
    assert _http(acting, "POST", "/tasks/fine/pause", form, Origin=acting.base)[0] == 403
    forged = f"cronctl_session=1.2.{'0' * 64}"
    assert _http(acting, "POST", "/tasks/fine/pause", form, Cookie=forged)[0] == 403
    assert _http(acting, "POST", "/api/tasks/fine/run", b"")[0] == 401
    wrong = {"Authorization": "Bearer " + "z" * 33}
    assert _http(acting, "POST", "/api/tasks/fine/pause", b'{"reason": "x"}', **wrong)[0] == 401
    # the cookie of a session is not a bearer token, and the token is no cookie
    cookie = _login(acting)
    assert _http(acting, "POST", "/api/tasks/fine/run", b"",
                 Authorization=f"Bearer {cookie}")[0] == 401  # fmt: skip
    assert _http(acting, "POST", "/tasks/fine/pause", form,
                 Cookie=f"cronctl_session={TOKEN}")[0] == 403  # fmt: skip
    assert not _status(cli, tmp_path)["fine"]["paused"]
    assert not (tmp_path / "marks").exists()
    assert _audit(tmp_path) == []  # nobody who lacks the token writes to the record


def test_a_foreign_origin_or_none_is_refused(cli: Cli, acting: Server, tmp_path: Path) -> None:
    cookie = _login(acting)
    csrf = _csrf(acting, cookie)
    form = f"reason=evil&csrf={csrf}".encode()
    jar = f"cronctl_session={cookie}"
    tries = [
        {"Origin": "http://attacker.example"},
        {"Origin": "null"},
        {"Origin": acting.base.replace("http:", "https:")},
        {"Referer": "http://attacker.example/page"},
        {},  # neither Origin nor Referer
    ]
    for headers in tries:
        status, body, _ = _http(acting, "POST", "/tasks/fine/pause", form, Cookie=jar, **headers)
        assert status == 403, headers
        assert b"refused" in body
    bearer = f"Bearer {TOKEN}"
    status, _, _ = _http(acting, "POST", "/api/tasks/fine/pause", b'{"reason": "evil"}',
                         Authorization=bearer, Origin="http://attacker.example")  # fmt: skip
    assert status == 403
    assert not _status(cli, tmp_path)["fine"]["paused"]
    refused = [r for r in _audit(tmp_path) if str(r["result"]).startswith("refused")]
    assert len(refused) == len(tries) + 1
    assert all(r["action"] == "pause" and r["task"] == "fine" for r in refused)
    # The same form from this dashboard's own origin (a Referer will do) is taken.
    referer = acting.base + "/tasks/fine"
    assert _http(acting, "POST", "/tasks/fine/pause", form, Cookie=jar, Referer=referer)[0] == 303


def test_a_missing_or_wrong_csrf_token_is_refused(cli: Cli, acting: Server, tmp_path: Path) -> None:
    cookie = _login(acting)
    jar = f"cronctl_session={cookie}"
    other = _csrf(acting, _login(acting))  # another session's token
    for form in (b"reason=x", b"reason=x&csrf=", b"reason=x&csrf=deadbeef",
                 f"reason=x&csrf={other}".encode()):  # fmt: skip
        status, body, _ = _http(acting, "POST", "/tasks/fine/pause", form, Cookie=jar,
                                Origin=acting.base)  # fmt: skip
        assert status == 403 and b"CSRF" in body, form
    assert not _status(cli, tmp_path)["fine"]["paused"]
    good = f"reason=x&csrf={_csrf(acting, cookie)}".encode()
    assert _http(acting, "POST", "/tasks/fine/pause", good, Cookie=jar,
                 Origin=acting.base)[0] == 303  # fmt: skip
    assert _status(cli, tmp_path)["fine"]["paused"]


def test_an_unknown_task_is_404(acting: Server) -> None:
    cookie = _login(acting)
    csrf = _csrf(acting, cookie)
    status, _, _ = _http(acting, "POST", "/tasks/nope/run", f"csrf={csrf}".encode(),
                         Cookie=f"cronctl_session={cookie}", Origin=acting.base)  # fmt: skip
    assert status == 404
    bearer = f"Bearer {TOKEN}"
    assert _http(acting, "POST", "/api/tasks/nope/pause", b"", Authorization=bearer)[0] == 404


def _browser_login(browser: Browser, srv: Server, **headers: str) -> Page:
    context = browser.new_context(java_script_enabled=False, extra_http_headers=headers)
    page = context.new_page()
    page.goto(srv.base + "/tasks/gated")
    page.fill("input[name=token]", TOKEN)
    page.click("button[type=submit]")
    page.goto(srv.base + "/tasks/gated")
    return page


def test_pause_and_resume_from_the_page(
    cli: Cli, acting: Server, tmp_path: Path, browser: Browser
) -> None:
    proxy = {"X-Forwarded-User": "alice", "X-Forwarded-For": "10.9.9.9, 198.51.100.7"}
    page = _browser_login(browser, acting, **proxy)
    page.fill("input[name=reason]", "storage \u001b[31m")
    page.click("button:has-text('Pause')")
    assert "contains a control character" in page.inner_text("main")
    assert not _status(cli, tmp_path)["gated"]["paused"]
    page.goto(acting.base + "/tasks/gated")
    page.fill("input[name=reason]", "storage <b>migration</b>")
    page.click("button:has-text('Pause')")
    assert page.url.endswith("/tasks/gated?done=pause")
    assert "gated: paused." in page.inner_text("main")
    assert "by dashboard (alice) from 198.51.100.7" in page.inner_text("dl.facts")
    assert "storage <b>migration</b>" in page.inner_text("dl.facts")  # shown as text
    shown = _status(cli, tmp_path)["gated"]
    assert shown["paused"] and shown["pause_reason"] == "storage <b>migration</b>"
    pause = shown["pause"]
    assert isinstance(pause, dict)
    assert pause["user"] == "dashboard (alice) from 198.51.100.7"
    page.click("button:has-text('Resume')")
    assert "gated: resumed." in page.inner_text("main")
    assert not _status(cli, tmp_path)["gated"]["paused"]
    records = _audit(tmp_path)
    assert [(r["action"], str(r["result"])[:8]) for r in records] == [
        ("pause", "refused:"), ("pause", "accepted"), ("resume", "accepted")]  # fmt: skip
    assert records[0]["reason"] == "storage \u001b[31m"
    assert "\\u001b" in (tmp_path / "state" / "audit.jsonl").read_text(encoding="ascii")
    taken = records[1]
    assert taken["reason"] == "storage <b>migration</b>"
    assert taken["forwarded_user"] == "alice" and taken["forwarded_for"] == "198.51.100.7"
    assert taken["client"] == "127.0.0.1" and taken["user"] == "dashboard"
    assert taken["via"] == "page"
    page.context.close()


def test_run_now_runs_once_and_never_a_second_copy(
    cli: Cli, acting: Server, tmp_path: Path, browser: Browser
) -> None:
    marks = tmp_path / "marks"
    page = _browser_login(browser, acting)
    page.click("button:has-text('Run now')")
    assert page.url.endswith("/tasks/gated?done=run")
    wait_for(lambda: marks.exists(), "the run to start")
    assert marks.read_text(encoding="utf-8") == "token=\n"  # the dashboard's token stays here
    page.goto(acting.base + "/tasks/gated")
    with page.expect_response(lambda r: r.url.endswith("/tasks/gated/run")) as answer:
        page.click("button:has-text('Run now')")
    assert answer.value.status == 409
    assert page.inner_text("h1") == "Nothing was started"
    assert "task gated is running (pid " in page.inner_text("main")
    assert "--wait" not in page.inner_text("main")  # exec's flag: no such thing on a page
    page.click("a:has-text('Back to gated')")  # a way back to where the button was
    assert page.url == acting.base + "/tasks/gated"
    beside = cli("exec", "gated", *_dirs(tmp_path), timeout=30)
    assert beside.returncode == 2 and "task gated is running" in beside.stderr
    assert "or pass --wait to wait for it" in beside.stderr
    # The server stops: the run it started is stopped with it and recorded, as a Ctrl-C
    # stops `cronctl exec`'s.
    _stop(acting)
    runs = json.loads(cli("history", "gated", "--json", *_dirs(tmp_path)).stdout)["runs"]
    assert [(r["trigger"], r["outcome"]) for r in runs] == [("manual", "interrupted")]
    assert marks.read_text(encoding="utf-8") == "token=\n"
    results = [(r["action"], r["result"]) for r in _audit(tmp_path)]
    assert results[:2] == [("run", "accepted"), ("run", "accepted")]
    assert results[2][1].startswith("failed: task gated is running (pid ")
    assert len(results) == 3
    page.context.close()


def run_now_beside_exec(cli: Cli, root: Path, coordination: str | None) -> None:
    """With a project name (and a store, when given): the dashboard's Run now is refused
    while a `cronctl exec` of the task runs, `cronctl exec` is refused while the
    dashboard's run runs, and both runs are in `cronctl history` (one state directory)."""
    marks, gate = root / "marks", root / "gate"
    store = f'coordination = "{coordination}"\n' if coordination else ""
    (root / "schedules.toml").write_text(
        f"""[cronctl]\nproject = "shop"\n{store}
[[task]]
name = "gated"
cron = "0 3 * * *"
command = '''echo run >> {marks}
while [ ! -e {gate} ]; do sleep 0.05; done
rm {gate}'''
""",
        encoding="utf-8",
    )
    bearer = {"Authorization": f"Bearer {TOKEN}"}

    def started(count: int) -> Callable[[], bool]:
        return lambda: marks.exists() and len(marks.read_text().splitlines()) == count

    srv = _serve(cli, root, "--allow-actions", env=TOKEN_ENV)
    try:
        by_hand = cli.popen("exec", "gated", *_dirs(root))
        wait_for(started(1), "exec's run to start")
        status, body, _ = _http(srv, "POST", "/api/tasks/gated/run", b"", **bearer)
        assert status == 409 and b"task gated is running" in body, body
        assert b"--wait" not in body, body
        gate.touch()
        _, err = by_hand.communicate(timeout=30)
        assert by_hand.returncode == 0, err
        status, body, _ = _http(srv, "POST", "/api/tasks/gated/run", b"", **bearer)
        assert status == 202, body
        run_id = json.loads(body).get("run")
        wait_for(started(2), "the dashboard's run to start")
        beside = cli("exec", "gated", *_dirs(root), timeout=30)
        assert beside.returncode == 2 and "task gated is running" in beside.stderr
        gate.touch()

        def recorded() -> list[dict[str, object]]:
            out = cli("history", "gated", "--json", *_dirs(root)).stdout
            return list(json.loads(out)["runs"])

        wait_for(lambda: [r["outcome"] for r in recorded()] == ["ok", "ok"], "both runs")
        runs = recorded()
        assert runs[0]["id"] == run_id
        assert {(r["trigger"], r["task"]) for r in runs} == {("manual", "gated")}
        _, shown = srv.get("/api/runs?task=gated", bearer)  # and the dashboard shows both
        assert {r["id"] for r in json.loads(shown)["runs"]} == {r["id"] for r in runs}
    finally:
        gate.touch()
        _stop(srv)
    assert len(marks.read_text().splitlines()) == 2  # never a second copy
    assert not list((root / "state").rglob("projects/shop/projects"))  # one state directory


def test_run_now_beside_exec_with_a_project(cli: Cli, tmp_path: Path) -> None:
    run_now_beside_exec(cli, tmp_path, None)


def test_the_api_pauses_resumes_and_runs(cli: Cli, acting: Server, tmp_path: Path) -> None:
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    status, body, _ = _http(acting, "POST", "/api/tasks/fine/pause", b"", **bearer)
    assert status == 400 and b"needs a reason" in body
    status, body, _ = _http(acting, "POST", "/api/tasks/fine/pause", b"[1]", **bearer)
    assert status == 400 and b"JSON object" in body
    status, body, _ = _http(acting, "POST", "/api/tasks/fine/pause",
                            json.dumps({"reason": "x" * 201}).encode(), **bearer)  # fmt: skip
    assert status == 400 and b"keep it to 200" in body
    status, body, _ = _http(acting, "POST", "/api/tasks/fine/pause",
                            b'{"reason": "deploy"}', **bearer)  # fmt: skip
    assert status == 200 and json.loads(body) == {"task": "fine", "action": "pause",
                                                  "paused": True}  # fmt: skip
    shown = _status(cli, tmp_path)["fine"]
    assert shown["pause_reason"] == "deploy"
    assert isinstance(shown["pause"], dict) and shown["pause"]["user"] == "dashboard from 127.0.0.1"
    status, body, _ = _http(acting, "POST", "/api/tasks/fine/resume", b"", **bearer)
    assert status == 200 and json.loads(body)["resumed"] is True
    status, body, _ = _http(acting, "POST", "/api/tasks/fine/resume", b"", **bearer)
    assert status == 200 and json.loads(body)["resumed"] is False
    status, body, _ = _http(acting, "POST", "/api/tasks/fine/run", b"", **bearer)
    assert status == 202 and json.loads(body)["started"] is True
    run_id = json.loads(body)["run"]

    def ran() -> bool:
        out = cli("history", "fine", "--json", *_dirs(tmp_path)).stdout
        return any(r["id"] == run_id and r["outcome"] == "ok" for r in json.loads(out)["runs"])

    wait_for(ran, "the run of fine")
    vias = {r["via"] for r in _audit(tmp_path)}
    assert vias == {"api"}


def test_explain_for_a_time_on_the_task_page(server: Server, browser: Browser) -> None:
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(server.base + "/tasks/hostile")
    assert page.input_value("input[name=at]") == NOW
    page.fill("input[name=at]", "2026-12-03T08:01:30Z")
    page.click("button:has-text('Explain')")
    answer = page.inner_text("pre.explain")
    assert answer.startswith("hostile: ran\n")
    assert "due at 2026-12-03T08:01:00Z" in answer and "failed, exit code 3" in answer
    page.fill("input[name=at]", "<script>yesterday")
    with page.expect_response(lambda r: "at=" in r.url) as answer_info:
        page.click("button:has-text('Explain')")
    assert answer_info.value.status == 400
    error = page.inner_text("p.error")
    assert "'<script>yesterday' is not ISO 8601" in error
    assert page.locator("script").count() == 0
    assert page.locator("table.history tbody tr").count() > 0  # the rest of the page is there
    context.close()
    status, body = server.get("/api/tasks/fine/explain?at=2026-12-03T08:00:00Z")
    assert status == 200 and json.loads(body)["verdict"] == "ran"
