"""Heartbeat pings (the healthchecks.io protocol) and on_failure/on_success hooks.

Both are advice about a run, never part of it: each has a 10 s limit, neither changes the
run's outcome, and a failing endpoint or hook is reported once (a notice stamp in
`STATE_DIR/notices`), again only after it has worked in between — cron mails whatever `run`
prints, and an outage must not mail every minute.

A healthchecks.io URL's path is its secret (whoever has it can ping the check), so a URL is
only ever shown as `scheme://host/***`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from cronctl.core.model import Task
from cronctl.core.runs import RunRow
from cronctl.edge.paths import ensure_private_dir, open_nofollow
from cronctl.edge.process import runner

LIMIT_S = 10.0
BODY_LIMIT = 10 * 1024
_NOTICES = "notices"


def redact(url: str) -> str:
    """`https://hc-ping.com/***`: the scheme and host, never the path or query."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}/***"


def ping_target(url: str, kind: str, rid: str) -> str:
    """The URL to call: `/start`, `/fail` or the URL itself, with `?rid=RUN_ID`."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/") + ("" if kind == "success" else f"/{kind}")
    query = (parts.query + "&" if parts.query else "") + f"rid={quote(rid)}"
    return urlunsplit((parts.scheme, parts.netloc, path, query, ""))


def send_ping(
    url: str, kind: str, rid: str, body: bytes = b"", timeout_s: float | None = None
) -> None:
    """POST one ping; raises OSError (URLError, HTTPError, timeout, refused) or ValueError.

    The timeout bounds each socket operation (connect, send, each read): a server that
    accepts and never answers is cut off after 10 s.
    """
    # Imported here, not at the top: urllib.request (http.client, ssl, email) is costly, and
    # only a task with ping_url needs it.
    import urllib.request

    request = urllib.request.Request(  # noqa: S310 (the scheme is checked: http or https)
        ping_target(url, kind, rid),
        data=body,
        method="POST",
        headers={"User-Agent": "cronctl", "Content-Type": "text/plain; charset=utf-8"},
    )
    limit = LIMIT_S if timeout_s is None else timeout_s
    with urllib.request.urlopen(request, timeout=limit) as response:  # noqa: S310
        response.read(1024)  # HTTP errors (>= 400) were raised by urlopen as HTTPError


class Pinger:
    """The pings of one occurrence: `/start` in the background, then the ending ping."""

    def __init__(self, task: Task, state_dir: Path, warn: Callable[[str], None]) -> None:
        """Ping `task.ping_url`; problems go to `warn`, once per outage."""
        assert task.ping_url is not None
        self._task = task
        self._url = task.ping_url
        self._state_dir = state_dir
        self._warn = warn
        self._rid = ""
        self._starting: threading.Thread | None = None
        self._errors: list[str] = []

    def start(self, rid: str) -> None:
        """Send `/start?rid=RID` without delaying the command (it may hang up to 10 s)."""
        self._rid = rid
        self._starting = threading.Thread(
            target=self._send, args=("start", b""), name="cronctl-ping", daemon=True
        )
        self._starting.start()

    def finish(self, result: RunRow) -> None:
        """The URL on success, `/fail` otherwise, with the output's tail (<= 10 KB) as body.

        The rid is the first attempt's run id, the one `/start` carried, so healthchecks.io
        pairs them and measures the whole occurrence, retries included.
        """
        if self._starting is not None:
            self._starting.join(LIMIT_S)
        kind = "success" if result.outcome == "ok" else "fail"
        self._send(kind, output_tail(result.log_path, result.tail))
        self._conclude()

    def _send(self, kind: str, body: bytes) -> None:
        try:
            send_ping(self._url, kind, self._rid, body)
        except (OSError, ValueError) as exc:
            self._errors.append(f"{kind}: {_reason(exc)}")

    def _conclude(self) -> None:
        key = f"ping-{self._task.name}"
        if not self._errors:
            clear_notice(self._state_dir, key)
            return
        if first_notice(self._state_dir, key):
            self._warn(
                f"cronctl: warning: task {self._task.name}: ping {redact(self._url)} failed "
                f"({'; '.join(self._errors)}); the task's outcome stands. Said once until a "
                "ping gets through again"
            )


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or exc
    text = str(reason) or type(reason).__name__
    return "timed out" if "timed out" in text else text


def output_tail(log_path: str | None, fallback: str) -> bytes:
    """The last 10 KB of the run's log (the history's tail when the log is gone)."""
    if log_path:
        try:
            fd = open_nofollow(Path(log_path), os.O_RDONLY)
        except OSError:
            return fallback.encode()[-BODY_LIMIT:]
        try:
            size = os.fstat(fd).st_size
            return os.pread(fd, BODY_LIMIT, max(0, size - BODY_LIMIT))
        except OSError:
            return fallback.encode()[-BODY_LIMIT:]
        finally:
            os.close(fd)
    return fallback.encode()[-BODY_LIMIT:]


def run_hook(
    task: Task,
    result: RunRow,
    env: Mapping[str, str],
    state_dir: Path,
    warn: Callable[[str], None],
) -> None:
    """Run `on_failure` or `on_success` (whichever fits the outcome), 10 s at most.

    Its output goes to a log beside the run's (`RUN_ID.on_failure.log`).
    """
    key = "on_success" if result.outcome == "ok" else "on_failure"
    command = task.on_success if result.outcome == "ok" else task.on_failure
    if command is None or result.outcome.startswith("skipped") or result.outcome == "missed":
        return
    hook_env = dict(env)
    hook_env.update(
        CRONCTL_TASK=task.name,
        CRONCTL_OUTCOME=result.outcome,
        CRONCTL_EXIT_CODE="" if result.exit_code is None else str(result.exit_code),
        CRONCTL_RUN_ID=result.id,
        CRONCTL_LOG=result.log_path or "",
    )
    log_dir = ensure_private_dir(state_dir / "logs" / task.name, within=state_dir)
    spec = runner.RunSpec(
        command=command,
        shell=task.shell,
        workdir=task.workdir,
        env=hook_env,
        timeout=timedelta(seconds=LIMIT_S),
        log_path=log_dir / f"{result.id}.{key}.log",
        kill_grace=1.0,
    )
    outcome = runner.start(spec).wait()
    notice = f"hook-{task.name}-{key}"
    if outcome.outcome == "ok":
        clear_notice(state_dir, notice)
        return
    if first_notice(state_dir, notice):
        what = {"timeout": f"did not finish in {LIMIT_S:g}s and was killed"}.get(
            outcome.outcome,
            f"exited {outcome.exit_code}" if outcome.exit_code is not None else "could not run",
        )
        warn(
            f"cronctl: warning: task {task.name}: {key} hook {what} (log: {spec.log_path}); "
            "the task's outcome stands. Said once until the hook works again"
        )


def first_notice(state_dir: Path, key: str) -> bool:
    """True the first time `key` is noticed since it was last cleared (creates its stamp)."""
    directory = ensure_private_dir(state_dir / _NOTICES, within=state_dir)
    try:
        fd = open_nofollow(directory / key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    except OSError:
        return True  # cannot remember: saying it again beats never saying it
    os.close(fd)
    return True


def clear_notice(state_dir: Path, key: str) -> None:
    """Forget `key`: the next problem is news again."""
    try:
        # Checked first: a link planted at notices/ must not aim the unlink elsewhere.
        (ensure_private_dir(state_dir / _NOTICES, within=state_dir) / key).unlink()
    except OSError:
        return
