"""`cronctl serve` under hostile clients (docs/dashboard.md#limits): a body past 16 KB is
refused on every route without being read, and slow or idle connections — more of them than
the server has descriptors — neither keep a viewer out nor stay open."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import Cli
from tests.web.test_actions import TOKEN, TOKEN_ENV, _stop
from tests.web.test_serve import Server, _serve, state

__all__ = ["state"]  # the fixture used here, from test_serve.py

#: `cronctl serve` with a descriptor limit of 96, as `ulimit -n 96` would start it.
LOW_FDS = (
    "import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (96, 96)); "
    "sys.argv = ['cronctl', *sys.argv[1:]]; runpy.run_module('cronctl', run_name='__main__')"
)
BEARER = {"Authorization": f"Bearer {TOKEN}"}


def _peak_kb(srv: Server) -> int:
    """The server's peak resident memory (VmHWM), in KiB."""
    for line in Path(f"/proc/{srv.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _connect(srv: Server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    sock.settimeout(30)
    return sock


def _answer(sock: socket.socket) -> bytes:
    """What the server answers before it closes (its status line first)."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass  # closed with our unread body still arriving: what was answered came first
    return data


@pytest.fixture
def acting(cli: Cli, state: Path) -> Iterator[Server]:
    srv = _serve(cli, state, "--allow-actions", env=TOKEN_ENV)
    yield srv
    _stop(srv)


def test_a_body_over_16_kb_is_refused_on_every_route_unread(acting: Server) -> None:
    before = _peak_kb(acting)
    host = f"Host: 127.0.0.1:{acting.port}\r\nAuthorization: Bearer {TOKEN}\r\n"
    for route in ("/login", "/", "/api/tasks/fine/run", "/tasks/fine/pause", "/nowhere"):
        with _connect(acting) as sock:
            sock.sendall(f"POST {route} HTTP/1.1\r\n{host}Content-Length: 800000000\r\n\r\n"
                         .encode())  # fmt: skip
            answer = _answer(sock)  # nothing of the body was sent: the server did not wait
        assert answer.startswith(b"HTTP/1.1 413 "), (route, answer[:100])
        assert b"over 16384 bytes" in answer
    # A chunked body says nothing of its size: it is cut off once past 16 KB.
    with _connect(acting) as sock:
        sock.sendall(f"POST /login HTTP/1.1\r\n{host}Transfer-Encoding: chunked\r\n\r\n".encode())
        chunk = b"10000\r\n" + b"t" * 0x10000 + b"\r\n"
        sent = 0
        with pytest.raises(OSError):  # the server closed the connection on us
            while sent < 64 * 1024 * 1024:
                sock.sendall(chunk)
                sent += len(chunk)
        assert sent < 32 * 1024 * 1024
    # A body under the limit is read as before: a wrong token answers 403, not 413.
    with _connect(acting) as sock:
        form = b"token=" + b"w" * 16000
        sock.sendall(f"POST /login HTTP/1.1\r\n{host}Content-Length: {len(form)}\r\n"
                     "Connection: close\r\n\r\n".encode() + form)  # fmt: skip
        assert _answer(sock).startswith(b"HTTP/1.1 403 ")
    assert acting.get("/api/tasks", BEARER)[0] == 200
    grown = _peak_kb(acting) - before
    assert grown < 16 * 1024, f"serve's peak memory grew by {grown} KiB"


def test_slow_and_idle_clients_neither_keep_a_viewer_out_nor_stay(cli: Cli, state: Path) -> None:
    srv = _serve(cli, state, code=LOW_FDS)
    slow: list[socket.socket] = []
    try:
        # More connections than the server has descriptors: some send half a request's
        # head, the rest nothing at all.
        for i in range(150):
            sock = _connect(srv)
            if i % 2:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            slow.append(sock)
        for _ in range(3):
            status, body = srv.get("/api/tasks")
            assert status == 200 and body.startswith(b'{"tasks":')
        # Each of them is closed (given way to newer ones, or after its few seconds),
        # without an answer.
        for sock in (slow[-1], slow[-2]):
            assert sock.recv(100) == b""
        assert srv.proc.poll() is None
    finally:
        for sock in slow:
            sock.close()
        srv.proc.terminate()
        _, err = srv.proc.communicate(timeout=20)
    assert "Too many open files" not in err  # accepting never ran out of descriptors
