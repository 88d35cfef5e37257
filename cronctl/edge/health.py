"""`cronctl work --health ADDR` (liveness and metrics over HTTP) and `--health-file PATH` (a
file touched every minute), docs/containers.md. `http.server` and prometheus-client are
imported only when the server starts: `work` always imports this module."""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cronctl.edge.metrics import HELP, Sample
from cronctl.edge.safefiles import check_file_path
from cronctl.errors import UsageError

Liveness = Callable[[], tuple[bool, str]]  # (healthy, a line saying why)
Samples = Callable[[], list[Sample]]

# An idle client cannot keep a thread of `work` for longer.
REQUEST_TIMEOUT_S = 10.0
# More requests are told 503 at once: a flood of scrapes must not starve the minute loop.
MAX_CONCURRENT = 8
_TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True, slots=True)
class Address:
    host: str  # an IP literal
    port: int

    @property
    def loopback(self) -> bool:
        import ipaddress  # only with --health

        return ipaddress.ip_address(self.host).is_loopback

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_address(text: str) -> Address:
    """`PORT` (loopback), `HOST:PORT` or `[V6]:PORT`, HOST an IP address or `localhost`."""
    import ipaddress  # only with --health

    def bad(why: str) -> UsageError:
        return UsageError(
            f"--health {text!r}: {why}; give PORT (listens on 127.0.0.1), HOST:PORT or "
            "[IPV6]:PORT, e.g. 127.0.0.1:8080 or 0.0.0.0:8080"
        )

    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    elif host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise bad("an IPv6 address goes in brackets")
    if host == "localhost":
        host = "127.0.0.1"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise bad(f"{host!r} is not an IP address (names are not looked up)") from None
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise bad(f"the port {port!r} is not a number from 1 to 65535")
    return Address(str(address), int(port))


class HealthServer:
    """GET /healthz (200 or 503) and GET /metrics, each request on a thread of its own."""

    def __init__(self, address: Address, liveness: Liveness, samples: Samples) -> None:
        self.address = address
        self._server: Any = None
        self._liveness = liveness
        self._samples = samples

    def start(self) -> None:
        """Listen, and answer in the background; UsageError if the address cannot be used."""
        import http.server  # only with --health
        import socket

        handler = _handler(http.server.BaseHTTPRequestHandler, self._liveness, self._samples)
        family = socket.AF_INET6 if ":" in self.address.host else socket.AF_INET

        class Server(http.server.ThreadingHTTPServer):
            address_family = family
            daemon_threads = True  # a slow client never holds up the exit of `work`

            def handle_error(self, request: Any, client_address: Any) -> None:
                """A client gone mid-answer: no traceback in the log of `work`."""

        try:
            self._server = Server((self.address.host, self.address.port), handler)
        except OSError as exc:
            raise UsageError(
                f"--health {self.address}: cannot listen there: {exc.strerror or exc}; "
                "choose a free port on an address of this machine"
            ) from None
        threading.Thread(
            target=self._server.serve_forever, name="cronctl-health", daemon=True
        ).start()

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()  # returns once serve_forever has
            self._server.server_close()


def _handler(base: Any, liveness: Liveness, samples: Samples) -> Any:
    slots = threading.BoundedSemaphore(MAX_CONCURRENT)

    class Handler(base):  # type: ignore[misc]
        timeout = REQUEST_TIMEOUT_S
        server_version = "cronctl"
        sys_version = ""

        def do_GET(self) -> None:
            if not slots.acquire(blocking=False):
                self._answer(503, b"busy: too many requests at once\n")
                return
            try:
                self._route()
            finally:
                slots.release()

        def _route(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                healthy, why = liveness()
                self._answer(200 if healthy else 503, (why + "\n").encode())
            elif path == "/metrics":
                try:
                    body, kind = prometheus_text(samples())
                except Exception as exc:  # anything: the probe sees a 500 that names it
                    self._answer(500, f"metrics unavailable: {exc}\n".encode())
                    return
                self._answer(200, body, kind)
            else:
                self._answer(404, b"not found: GET /healthz or /metrics\n")

        def do_HEAD(self) -> None:
            self.do_GET()

        def _answer(self, status: int, body: bytes, kind: str = _TEXT) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: a probe every few seconds would fill the log of `work`."""

    return Handler


def prometheus_text(found: list[Sample]) -> tuple[bytes, str]:
    try:
        from prometheus_client import CollectorRegistry, exposition
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    except ImportError:
        raise UsageError(
            "--health needs prometheus-client: pip install 'cronctl[health]'"
        ) from None
    families: dict[str, Any] = {}
    for name, (kind, text) in HELP.items():
        family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
        keys = ["task", "outcome"] if name == "cronctl_runs_total" else ["task"]
        families[name] = family(name, text, labels=keys)
    for name, labels, value in found:
        families[name].add_metric([v for _, v in labels], value)

    class Collector:
        def collect(self) -> Any:
            return iter(families.values())

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    return exposition.generate_latest(registry), exposition.CONTENT_TYPE_LATEST


def check_prometheus_client() -> None:
    """Refuse --health at start, not at the first scrape, when the extra is not installed."""
    prometheus_text([])


class HealthFile:
    """`--health-file PATH`: touched every minute, removed when `work` stops; in a sticky `/tmp`
    others can plant a link, FIFO or file there, so it is touched only once found ours."""

    def __init__(self, path: Path, warn: Callable[[str], None]) -> None:
        self.path = path
        self._warn = warn
        self._failing = False
        self._ours: tuple[int, int] | None = None  # (device, inode) of the file touched

    def start(self) -> None:
        """The first touch: a path that cannot be written stops `work` (UsageError)."""
        check_file_path(self.path, sticky_ok=True)
        try:
            self._touch()
        except OSError as exc:
            raise UsageError(
                f"--health-file {self.path}: cannot write it: {_why(exc)}; give a path in a "
                "directory this user can write (e.g. /tmp/cronctl-alive)"
            ) from None

    def touch(self) -> None:
        """A failure is said once, never fatal: the probe sees a stale file, the truth."""
        try:
            self._touch()
        except OSError as exc:
            if not self._failing:
                self._warn(f"cronctl work: warning: --health-file {self.path}: {_why(exc)}")
            self._failing = True
            return
        self._failing = False

    def _touch(self) -> None:
        # O_NOFOLLOW: a planted link is never followed; O_NONBLOCK: a planted FIFO never hangs
        # the open. Without O_TRUNC the open changes nothing: what is found is judged first.
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        fd = os.open(self.path, flags, 0o644)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise OSError(errno.EPERM, "it is not a regular file (remove it)")
            if st.st_uid != os.geteuid():
                raise OSError(
                    errno.EPERM,
                    f"it belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()}); "
                    "another user may have planted it: remove it or choose another name",
                )
            os.utime(fd)
            self._ours = (st.st_dev, st.st_ino)
        finally:
            os.close(fd)

    def remove(self) -> None:
        """Only the file this `work` touched, never one it refused."""
        with suppress(OSError):
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) == self._ours:
                self.path.unlink()


def _why(exc: OSError) -> str:
    # Another user's link in a sticky directory (/tmp) answers EACCES, not ELOOP.
    if exc.errno == errno.ELOOP or (exc.filename is not None and Path(exc.filename).is_symlink()):
        return "it is a symbolic link (not followed; remove it)"
    if exc.errno == errno.ENXIO:
        return "it is a FIFO or socket, not a regular file (remove it)"
    return exc.strerror or str(exc)
