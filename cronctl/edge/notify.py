"""Heartbeat pings (the healthchecks.io protocol) and on_failure/on_success hooks: advice
about a run, never part of it. 10 s each (a ping's whole exchange, however slowly the endpoint
drips), the outcome unchanged, a failure said once per outage (a stamp in STATE_DIR/notices:
cron mails what `run` prints). A URL's path is its secret: shown as `scheme://host/***`."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit, urlunsplit

from cronctl.core.model import Task
from cronctl.core.runs import RunRow
from cronctl.edge.awake import join_awake
from cronctl.edge.process import logfiles, runner
from cronctl.edge.safefiles import ensure_private_dir, open_nofollow

if TYPE_CHECKING:
    import http.client
    import socket
    import urllib.request

LIMIT_S = 10.0
BODY_LIMIT = 10 * 1024
_NOTICES = "notices"
# How long a cut ping's thread is waited for (one stuck in a name lookup ends later: a daemon).
_CUT_WAIT_S = 0.5
_STOPPED = "not completed: cronctl was told to stop"


def redact(url: str) -> str:
    """`https://hc-ping.com/***`: the scheme and host, never the path or query."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        if ":" in host:  # an IPv6 literal: urlsplit took its brackets off
            host = f"[{host}]"
        if parts.port is not None:
            host = f"{host}:{parts.port}"
    except ValueError:  # check refuses such a URL; never let showing it raise
        return "(a malformed URL)"
    return f"{parts.scheme}://{host}/***"


def ping_target(url: str, kind: str, rid: str) -> str:
    """The URL to call: `/start`, `/fail` or the URL itself, with `?rid=RUN_ID`."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/") + ("" if kind == "success" else f"/{kind}")
    query = (parts.query + "&" if parts.query else "") + f"rid={quote(rid)}"
    return urlunsplit((parts.scheme, parts.netloc, path, query, ""))


def _opener(opened: Callable[[socket.socket], None]) -> urllib.request.OpenerDirector:
    """urllib's usual opener, whose connections hand each socket to `opened` before use."""
    import http.client
    import socket  # as urllib: only a ping needs it, and a `run` without pings never loads it
    import urllib.request

    def create(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        sock = socket.create_connection(address, *args, **kwargs)
        opened(sock)
        return sock

    def hooked(kind: type[http.client.HTTPConnection]) -> Callable[..., Any]:
        def connection(host: str, **kwargs: Any) -> http.client.HTTPConnection:
            conn = kind(host, **kwargs)
            conn._create_connection = create  # type: ignore[attr-defined]  # its socket maker
            return conn

        return connection

    class Plain(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(hooked(http.client.HTTPConnection), req)

    class Secure(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            context = getattr(self, "_context", None)
            return self.do_open(hooked(http.client.HTTPSConnection), req, context=context)

    return urllib.request.build_opener(Plain, Secure)


def _shut(sock: socket.socket) -> None:
    import socket  # loaded already: the ping that opened `sock` imported it

    with suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's, under TLS too


class _Flight:
    """One ping in a daemon thread: LIMIT_S after it was sent, its sockets are shut down."""

    def __init__(self, url: str, kind: str, rid: str, body: bytes) -> None:
        self.deadline = time.monotonic() + LIMIT_S
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._cut: str | None = None  # why it was cut off, once it was
        self._error: str | None = None
        self._done = threading.Event()
        args = (url, kind, rid, body)
        thread = threading.Thread(target=self._send, args=args, name="cronctl-ping", daemon=True)
        thread.start()

    def _send(self, url: str, kind: str, rid: str, body: bytes) -> None:
        try:
            # Here: costly (http.client, ssl, email), and only a task with ping_url needs it.
            import urllib.request

            request = urllib.request.Request(  # noqa: S310 (the scheme is checked: http or https)
                ping_target(url, kind, rid),
                data=body,
                method="POST",
                headers={"User-Agent": "cronctl", "Content-Type": "text/plain; charset=utf-8"},
            )
            # LIMIT_S bounds each socket operation only: settle() cuts the whole exchange.
            with _opener(self._opened).open(request, timeout=LIMIT_S):  # >= 400: HTTPError
                pass  # the status is all a ping needs: its body is never read
        except Exception as exc:  # anything: a ping never changes the run (module docstring)
            reason = getattr(exc, "reason", None) or exc
            text = str(reason) or type(reason).__name__
            self._error = "timed out" if "timed out" in text else text
        finally:
            self._done.set()

    def _opened(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            cut = self._cut is not None
        if cut:
            _shut(sock)

    def cut(self, why: str) -> None:
        with self._lock:
            if self._done.is_set() or self._cut is not None:
                return
            self._cut = why
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def settle(self) -> str | None:
        """Wait for the ping, cutting it off at its deadline: its error, or None."""
        if not self._done.wait(max(0.0, self.deadline - time.monotonic())):
            self.cut(f"timed out: no complete answer within {LIMIT_S:g}s")
            self._done.wait(_CUT_WAIT_S)
        with self._lock:
            if self._cut is not None:
                return self._cut
        return self._error if self._done.is_set() else "no answer"


class RunPings:
    """The pings of one run, in the background: a slow endpoint holds no worker and no run
    record. The run settles them before it ends; stop() cuts them off at once."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # stop() may run in a signal handler, in any thread
        self._flights: list[_Flight] = []
        self._endings: list[threading.Thread] = []
        self.stopped = False

    def send(self, url: str, kind: str, rid: str, body: bytes = b"") -> _Flight | None:
        with self._lock:
            if self.stopped:
                return None
            flight = _Flight(url, kind, rid, body)
            self._flights.append(flight)
            return flight

    def later(self, work: Callable[[], None]) -> None:
        thread = threading.Thread(target=work, name="cronctl-ping-end", daemon=True)
        with self._lock:
            self._endings.append(thread)
        thread.start()

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            flights = list(self._flights)
        for flight in flights:
            flight.cut(_STOPPED)

    def settle(self) -> None:
        with self._lock:
            endings = list(self._endings)
        for thread in endings:
            join_awake(thread, 2 * (LIMIT_S + _CUT_WAIT_S) + 1.0)  # `run`'s main thread


class OccurrencePings:
    """`/start` when made, as the command starts; the ending ping at finish(). Never raises."""

    def __init__(
        self, task: Task, state_dir: Path, warn: Callable[[str], None], pings: RunPings, rid: str
    ) -> None:
        assert task.ping_url is not None
        self._task = task
        self._url = task.ping_url
        self._state_dir = state_dir
        self._warn = warn
        self._pings = pings
        self._rid = rid
        self._starting = pings.send(self._url, "start", rid)

    def finish(self, result: RunRow) -> None:
        """The URL, or `/fail`, with the output's tail, after `/start` ended; at once. The rid
        is `/start`'s (the first attempt's), so the whole occurrence is measured."""
        self._pings.later(lambda: self._finish(result))

    def _finish(self, result: RunRow) -> None:
        try:
            errors = []
            if self._starting is not None and (error := self._starting.settle()) is not None:
                errors.append(f"start: {error}")
            kind = "success" if result.outcome == "ok" else "fail"
            tail = logfiles.last_bytes(result.log_path, result.tail, BODY_LIMIT)
            ending = self._pings.send(self._url, kind, self._rid, tail)
            if ending is not None and (error := ending.settle()) is not None:
                errors.append(f"{kind}: {error}")
            self._conclude(errors, stopped=ending is None or self._pings.stopped)
        except Exception as exc:  # anything: a ping never changes the run (module docstring)
            self._warn(f"cronctl: warning: task {self._task.name}: ping not sent: {exc}")

    def _conclude(self, errors: list[str], stopped: bool) -> None:
        key = f"ping-{self._task.name}"
        where = f"task {self._task.name}: ping {redact(self._url)}"
        if stopped:
            # Not the endpoint's fault: no notice stamp, which would hide a real outage.
            self._warn(f"cronctl: warning: {where} {_STOPPED}")
            return
        failed = (
            f"cronctl: warning: {where} failed ({'; '.join(errors)}); the task's outcome "
            "stands. Said once until a ping gets through again"
        )
        _once(self._state_dir, key, failed if errors else None, self._warn)


def run_hook(
    task: Task, result: RunRow, env: Mapping[str, str], state_dir: Path, warn: Callable[[str], None]
) -> None:
    """Run `on_failure` or `on_success`, 10 s at most, logged to `RUN_ID.on_failure.log`."""
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
    what = {"timeout": f"did not finish in {LIMIT_S:g}s and was killed"}.get(
        outcome.outcome,
        f"exited {outcome.exit_code}" if outcome.exit_code is not None else "could not run",
    )
    failed = (
        f"cronctl: warning: task {task.name}: {key} hook {what} (log: {spec.log_path}); "
        "the task's outcome stands. Said once until the hook works again"
    )
    _once(state_dir, f"hook-{task.name}-{key}", None if outcome.outcome == "ok" else failed, warn)


def _once(state_dir: Path, key: str, warning: str | None, warn: Callable[[str], None]) -> None:
    """Say `warning` the first time since the last None: once an outage, by a stamp."""
    notices = state_dir / _NOTICES
    if warning is None:
        with suppress(OSError):
            # Checked first: a link planted at notices/ must not aim the unlink elsewhere.
            (ensure_private_dir(notices, within=state_dir) / key).unlink()
        return
    stamp = ensure_private_dir(notices, within=state_dir) / key
    try:
        os.close(open_nofollow(stamp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return
    except OSError:
        pass  # cannot remember: saying it again beats never saying it
    warn(warning)
