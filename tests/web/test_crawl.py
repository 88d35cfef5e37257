"""Every page of the dashboard for every task answers: a crawl that follows every link (and
picture, and style sheet) from the overview, on schedules.example.toml and on a schedule
that uses every task key, after runs exist (so run pages and history links do), plus every
JSON route of every task (docs/dashboard.md)."""

from __future__ import annotations

import json
import re
import tomllib
from collections import deque
from collections.abc import Callable
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, urljoin, urlsplit

import pytest

from cronctl.core.runs import TRIGGERS
from cronctl.core.schema import TASK_KEYS
from tests.helpers import REPO_ROOT, Cli
from tests.web.test_serve import NOW, Server, _dirs, _serve

#: Instants whose `cronctl run` makes most tasks of both schedules run (before NOW).
INSTANTS = ("2026-12-03T03:00:00Z", "2026-12-03T08:00:00Z", "2026-12-03T08:01:00Z")


def every_key_schedule(root: Path) -> str:
    """A schedule whose tasks, together, set every task key."""
    (root / "secrets.env").write_text("SECRET_A=alpha-secret\n", encoding="utf-8")
    (root / "token").write_text("token-secret\n", encoding="utf-8")
    for path in (root / "secrets.env", root / "token"):
        path.chmod(0o600)
    return f"""
[[group]]
name = "batch"
max_running = 2

[[task]]
name = "shell-line"
description = "sets most keys"
command = "echo fetching https://bob:hunter2@example.com/x; echo $SECRET_A $TOKEN"
cron = "* * * * *"
timezone = "Europe/Berlin"
ignore_warnings = ["dst-gap", "dst-overlap"]
when = "true"
skip = "false"
without_overlapping = "1h"
on_one_server = true
timeout = "1m"
misfire = "coalesce"
misfire_grace = "5m"
workdir = "{root}"
shell = "/bin/sh"
env = {{ GREETING = "hello" }}
env_files = ["{root / "secrets.env"}"]
env_from_file = {{ TOKEN = "{root / "token"}" }}
max_output = "1MB"
group = "batch"
hosts = ["*"]
retries = 1
retry_delay = "1s"
on_success = "true"
on_failure = "true"
notify = "change"
memory_max = "512MB"
cpu_max = "200%"
nice = 5
ionice = "best-effort:6"

[[task]]
name = "array-command"
command = ["echo", "https://carol:pw@example.com/y", "two words", "it's"]
every_minute = true

[[task]]
name = "pinged"
command = "true"
every_minutes = 30
jitter = "2s"
ping_url = "http://127.0.0.1:9/ping"

[[task]]
name = "hourly"
command = "true"
hourly = true
weekends = true

[[task]]
name = "hourly-at"
command = "true"
hourly_at = 1

[[task]]
name = "daily"
command = "true"
daily = true

[[task]]
name = "daily-at"
command = "true"
daily_at = "03:00"
days = "1-5"

[[task]]
name = "twice-daily"
command = "true"
twice_daily = [3, 15]
weekdays = true

[[task]]
name = "weekly"
command = "true"
weekly = true

[[task]]
name = "weekly-on"
command = "true"
weekly_on = ["SAT", "03:00"]

[[task]]
name = "monthly"
command = "true"
monthly = true

[[task]]
name = "monthly-on"
command = "true"
monthly_on = [3, "03:00"]

[[task]]
name = "yearly"
command = "true"
yearly = true
paused = true

[[task]]
name = "one-shot"
command = "true"
at = 2026-12-24T18:00:00Z

[[task]]
name = "at-start"
command = "true"
on_start = true
cron = "0 0 1 1 *"

[[task]]
name = "after-daily"
command = "true"
after = ["daily-at"]

[[task]]
name = "after:any"
command = "true"
after = "after-daily"
after_outcome = "any"
"""


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is not None and (name, tag) in {("href", "a"), ("href", "link"),
                                                     ("src", "img")}:  # fmt: skip
                self.found.append(value)


def crawl(srv: Server, pages: dict[str, bytes]) -> dict[str, int]:
    """Every page reachable from the overview through links of this dashboard: its status
    (and in `pages`, each HTML page)."""
    seen: dict[str, int] = {}
    queue = deque(["/"])
    while queue and len(seen) < 3000:
        path = queue.popleft()
        if path in seen:
            continue
        status, body = srv.get(path)
        seen[path] = status
        if status != 200 or not body.lstrip().startswith(b"<!doctype html>"):
            continue
        pages[path] = body
        parser = _Links()
        parser.feed(body.decode("utf-8"))
        for link in parser.found:
            target = urlsplit(urljoin(srv.base + path, link))
            if target.netloc == urlsplit(srv.base).netloc:
                queue.append(target.path + (f"?{target.query}" if target.query else ""))
    return seen


def routes_of_every_task(srv: Server, names: list[str]) -> dict[str, int]:
    """The JSON routes and the explain answer of every task, which no link leads to."""
    paths = ["/api/tasks", "/api/runs", "/api/hosts"]
    paths += [f"/api/runs?trigger={t}" for t in TRIGGERS]  # the history filter's every choice
    paths += [f"/tasks/{quote(names[0], safe='')}?trigger={t}" for t in TRIGGERS]
    for name in names:
        task = quote(name, safe="")
        paths += [f"/api/tasks/{task}", f"/api/tasks/{task}/explain",
                  f"/api/runs?task={task}", f"/tasks/{task}?at={NOW}"]  # fmt: skip
    return {path: srv.get(path)[0] for path in paths}


def runs_for_every_task(cli: Cli, root: Path, extra_env: dict[str, str]) -> list[str]:
    """Some minutes of `cronctl run`, and an `exec` of each task those did not run (so every
    task has a run page); the task names."""
    for instant in INSTANTS:
        result = cli("run", "--now", instant, *_dirs(root), env=extra_env, timeout=120)
        assert result.returncode in (0, 1), result.stderr
    shown = cli("status", "--json", *_dirs(root), env=extra_env)
    tasks = json.loads(shown.stdout)["tasks"]
    for name in [t["name"] for t in tasks if t["last_run"] is None]:
        result = cli("exec", name, *_dirs(root), env=extra_env, timeout=120)
        assert result.returncode in (0, 1, 127), result.stderr
    return [t["name"] for t in tasks]


def every_page_answers(
    cli: Cli, root: Path, schedule: str, extra_env: dict[str, str] | None = None
) -> dict[str, bytes]:
    """Crawl the dashboard of `schedule` after runs, requiring 200 everywhere; every HTML
    page by path."""
    env = extra_env or {}
    (root / "schedules.toml").write_text(schedule, encoding="utf-8")
    names = runs_for_every_task(cli, root, env)
    srv = _serve(cli, root, env=env)
    try:
        pages: dict[str, bytes] = {}
        statuses = crawl(srv, pages) | routes_of_every_task(srv, names)
    finally:
        srv.proc.terminate()
        srv.proc.communicate(timeout=20)
    for name in names:  # every task's page and at least one of its runs were reached
        assert f"/tasks/{quote(name, safe='')}" in statuses, name
    assert any(p.startswith("/runs/") for p in statuses)
    assert {p for p, s in statuses.items() if s != 200} == set()
    assert len(statuses) > 20
    return pages


SCHEDULES: dict[str, Callable[[Path], str]] = {
    "example": lambda _root: (REPO_ROOT / "schedules.example.toml").read_text(encoding="utf-8"),
    "every-key": every_key_schedule,
}


def test_the_schedule_uses_every_task_key(tmp_path: Path) -> None:
    parsed = tomllib.loads(every_key_schedule(tmp_path))
    used = {key for task in parsed["task"] for key in task}
    assert used == set(TASK_KEYS), set(TASK_KEYS) ^ used


@pytest.mark.parametrize("which", sorted(SCHEDULES))
def test_every_page_for_every_task_answers(cli: Cli, tmp_path: Path, which: str) -> None:
    pages = every_page_answers(cli, tmp_path, SCHEDULES[which](tmp_path))
    if which == "every-key":
        shown_as_command(pages["/tasks/array-command"])
        # The chain's picture links each task of it, escaped and percent-encoded.
        chain = pages["/tasks/after-daily"].decode()
        assert '<svg xmlns="http://www.w3.org/2000/svg" class="chain"' in chain
        assert 'href="/tasks/daily-at"' in chain and 'href="/tasks/after%3Aany"' in chain
        assert "<option>after</option>" in chain  # its history filtered by its trigger


def shown_as_command(page: bytes) -> None:
    """An array command is shown as a shell line that runs it, its URL password masked."""
    assert b"pw@" not in page
    shown = re.search(rb"<dt>Command</dt><dd><code>(.*?)</code>", page)
    assert shown is not None
    line = "echo 'https://carol:***@example.com/y' 'two words' 'it'\"'\"'s'"
    assert unescape(shown.group(1).decode()) == line
