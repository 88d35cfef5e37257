"""ping_url (healthchecks.io protocol) and on_failure/on_success hooks, against a real HTTP
server on 127.0.0.1 and real processes."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from cronctl.edge import notify
from tests.helpers import Cli, free_port, history, write_schedule
from tests.run.conftest import Drive

NOW = "2026-08-03T09:00:00Z"
SECRET = "5f1c2e9a-secret-uuid"  # noqa: S105 (the ping key whose leak the tests look for)


@dataclass
class Recorder:
    """What the server received: (path, rid, body) in order; `hang` makes it never answer."""

    pings: list[tuple[str, str, bytes]] = field(default_factory=list)
    hang: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def server() -> Iterator[tuple[str, Recorder]]:
    recorder = Recorder()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            parts = urlsplit(self.path)
            rid = parse_qs(parts.query).get("rid", [""])[0]
            if recorder.hang.is_set():
                recorder.release.wait(30)
                return
            recorder.pings.append((parts.path, rid, body))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"OK")

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/{SECRET}", recorder
    recorder.release.set()
    httpd.shutdown()
    httpd.server_close()


def _task(url: str, command: str, extra: str = "") -> str:
    return f'name = "beat"\ncommand = "{command}"\nevery_minute = true\nping_url = "{url}"\n{extra}'


def test_success_pings_start_then_the_url_with_the_run_id_and_output(
    cli: Cli, tmp_path: Path, server: tuple[str, Recorder]
) -> None:
    url, recorder = server
    write_schedule(tmp_path / "schedules.toml", [_task(url, "echo all good")])
    result = cli("run", "--now", NOW)
    assert result.returncode == 0 and result.stderr == ""
    [run] = history(cli)
    assert [(p, rid) for p, rid, _ in recorder.pings] == [
        (f"/{SECRET}/start", run["id"]),
        (f"/{SECRET}", run["id"]),
    ]
    assert recorder.pings[1][2] == b"all good\n"


def test_failure_pings_fail_with_at_most_10_kb_of_the_output_tail(
    cli: Cli, tmp_path: Path, server: tuple[str, Recorder]
) -> None:
    url, recorder = server
    command = "seq 1 20000; echo the-last-line; exit 3"
    write_schedule(tmp_path / "schedules.toml", [_task(url, command)])
    result = cli("run", "--now", NOW)
    assert result.returncode == 1  # the task's failure, unchanged by the ping
    paths = [p for p, _, _ in recorder.pings]
    assert paths == [f"/{SECRET}/start", f"/{SECRET}/fail"]
    body = recorder.pings[1][2]
    assert len(body) == 10 * 1024 and body.endswith(b"20000\nthe-last-line\n")


def test_retries_ping_start_once_and_end_once_with_the_first_attempts_id(
    drive: Drive, server: tuple[str, Recorder]
) -> None:
    url, recorder = server
    schedule = drive.schedule(_task(url, "exit 1", "retries = 2"))
    report = drive.run(schedule)
    first = next(r for r in report.runs if r.attempt == 1)
    assert [(p, rid) for p, rid, _ in recorder.pings] == [
        (f"/{SECRET}/start", first.id),
        (f"/{SECRET}/fail", first.id),
    ]


def test_an_unreachable_endpoint_is_reported_once_without_its_secret(
    cli: Cli, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{free_port()}/{SECRET}"
    write_schedule(tmp_path / "schedules.toml", [_task(url, "true")])
    first = cli("run", "--now", NOW)
    assert first.returncode == 0  # the task's outcome stands
    assert "ping http://127.0.0.1:" in first.stderr and "/*** failed" in first.stderr
    assert SECRET not in first.stderr
    second = cli("run", "--now", "2026-08-03T09:01:00Z")
    assert second.returncode == 0 and second.stderr == ""
    assert [r["outcome"] for r in history(cli)] == ["ok", "ok"]


def test_a_hanging_endpoint_times_out_and_never_changes_the_outcome(
    drive: Drive, server: tuple[str, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, recorder = server
    recorder.hang.set()
    monkeypatch.setattr(notify, "LIMIT_S", 0.3)
    schedule = drive.schedule(_task(url, "true"))
    [row] = drive.run(schedule).runs
    assert row.outcome == "ok"
    [warning] = drive.warnings
    assert "timed out" in warning and SECRET not in warning


def test_the_notice_is_cleared_once_pings_get_through_again(
    drive: Drive, server: tuple[str, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, recorder = server
    monkeypatch.setattr(notify, "LIMIT_S", 0.3)
    schedule = drive.schedule(_task(url, "true"))
    recorder.hang.set()
    drive.run(schedule)
    drive.run(schedule, at=drive.clock.now.replace(minute=1))
    assert len(drive.warnings) == 1
    recorder.hang.clear()
    # The answered pings get a loaded machine's time: only the hanging ones must time out.
    monkeypatch.setattr(notify, "LIMIT_S", 60.0)
    drive.run(schedule, at=drive.clock.now.replace(minute=2))
    recorder.hang.set()
    monkeypatch.setattr(notify, "LIMIT_S", 0.3)
    drive.run(schedule, at=drive.clock.now.replace(minute=3))
    assert len(drive.warnings) == 2  # a new outage is news again


def test_redact_keeps_scheme_and_host_only() -> None:
    assert notify.redact("https://hc-ping.com/abc-def?x=1") == "https://hc-ping.com/***"
    assert notify.redact("http://user:pw@10.0.0.1:8000/p/k") == "http://10.0.0.1:8000/***"
    assert notify.redact("http://[::1]:8000/p/k") == "http://[::1]:8000/***"
    assert notify.redact("https://[2001:DB8::1]/k") == "https://[2001:db8::1]/***"


def test_an_unreachable_ipv6_endpoint_is_named_with_its_brackets(cli: Cli, tmp_path: Path) -> None:
    port = free_port()
    write_schedule(tmp_path / "schedules.toml", [_task(f"http://[::1]:{port}/{SECRET}", "true")])
    result = cli("run", "--now", NOW)
    assert result.returncode == 0, result.stderr
    assert f"ping http://[::1]:{port}/*** failed" in result.stderr
    assert SECRET not in result.stderr


def test_ping_target_adds_kind_and_rid() -> None:
    base = "https://hc-ping.com/ping-key/backup"
    assert notify.ping_target(base, "start", "r1") == f"{base}/start?rid=r1"
    assert notify.ping_target(base + "/", "success", "r1") == f"{base}?rid=r1"
    assert notify.ping_target(base + "?create=1", "fail", "r1") == f"{base}/fail?create=1&rid=r1"


def test_hooks_get_the_outcome_variables_and_never_change_the_outcome(
    cli: Cli, tmp_path: Path
) -> None:
    hook = "env | grep ^CRONCTL_ | sort > hook-$CRONCTL_OUTCOME.env; exit 9"
    write_schedule(
        tmp_path / "schedules.toml",
        [
            f'name = "bad"\ncommand = "echo broke; exit 5"\nevery_minute = true\n'
            f'on_failure = "{hook}"\n'
            f'on_success = "touch wrong"',
            f'name = "good"\ncommand = "true"\nevery_minute = true\non_success = "{hook}"',
        ],
    )
    result = cli("run", "--now", NOW)
    assert result.returncode == 1
    assert "task bad failed (exit 5)" in result.stderr
    assert not (tmp_path / "wrong").exists()
    env = dict(
        line.split("=", 1) for line in (tmp_path / "hook-failed.env").read_text().splitlines()
    )
    bad = next(r for r in history(cli) if r["task"] == "bad")
    assert env["CRONCTL_TASK"] == "bad" and env["CRONCTL_OUTCOME"] == "failed"
    assert env["CRONCTL_EXIT_CODE"] == "5" and env["CRONCTL_RUN_ID"] == bad["id"]
    assert Path(env["CRONCTL_LOG"]).is_file()
    assert (tmp_path / "hook-ok.env").exists()
    # Both hooks exited 9: said once each, and not again on the next run.
    assert result.stderr.count("hook exited 9") == 2
    again = cli("run", "--now", "2026-08-03T09:01:00Z")
    assert "hook exited" not in again.stderr
    assert [r["outcome"] for r in history(cli) if r["task"] == "good"] == ["ok", "ok"]


def test_a_hanging_hook_is_killed_at_the_limit(
    drive: Drive, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notify, "LIMIT_S", 0.5)
    schedule = drive.schedule(
        'name = "t"\ncommand = "true"\nhourly = true\non_success = "sleep 30 & echo $! > pid; wait"'
    )
    [row] = drive.run(schedule).runs
    assert row.outcome == "ok"
    [warning] = drive.warnings
    assert "on_success hook did not finish in 0.5s and was killed" in warning
    pid = int((drive.root / "pid").read_text())
    assert not Path(f"/proc/{pid}").exists() or " Z " in Path(f"/proc/{pid}/stat").read_text()


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ('ping_url = "ftp://hc-ping.com/uuid"', "bad-url"),
        ('ping_url = "hc-ping.com/uuid"', "bad-url"),
        ('ping_url = "https:///uuid"', "bad-url"),
        ('ping_url = "https://hc-ping.com/a b"', "bad-url"),
        ("ping_url = 1", "bad-type"),
        ('on_failure = "  "', "bad-value"),
        ('on_failure = "echo \\u0000"', "bad-value"),
        ("on_success = true", "bad-type"),
        ('jitter = "0s"', "bad-duration"),
    ],
)
def test_check_locates_bad_ping_hook_and_jitter_values(
    cli: Cli, tmp_path: Path, line: str, code: str
) -> None:
    write_schedule(
        tmp_path / "schedules.toml", [f'name = "t"\ncommand = "true"\nhourly = true\n{line}']
    )
    result = cli("check", "--format", "json")
    assert result.returncode == 1
    [problem] = json.loads(result.stdout)["problems"]
    assert (problem["code"], problem["task"], problem["line"]) == (code, "t", 6)
    assert SECRET not in result.stdout
