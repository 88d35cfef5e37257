"""What `cronctl serve` takes from a client (docs/dashboard.md#limits)."""

from __future__ import annotations

import asyncio
import resource

import h11
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

#: The largest request body, on every route, and the largest request head.
MAX_BODY = 16 * 1024
#: From a connection's start (or the end of its last answer) to its request's last byte.
REQUEST_S = 5.0
#: Connections at most, whatever the descriptor limit (1,000 viewers at once is plenty).
MOST_CONNECTIONS = 1000


def connection_limits() -> tuple[int, int]:
    """(connections at most, accepted at a time) from the descriptor limit: a half, an eighth
    (asyncio accepts that many before the protocol sees any); the rest for the store, logs
    and threads, so accepting never runs out of descriptors (it would stop for a second)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 8 * MOST_CONNECTIONS
    return max(8, min(MOST_CONNECTIONS, soft // 2)), max(4, min(2048, soft // 8))


class BodyLimit:
    """413 for a body over MAX_BODY: at once when Content-Length says so (nothing of it is
    read), else as soon as a chunked body passes it; the connection is then closed."""

    def __init__(self, app: ASGIApp, headers: dict[str, str]) -> None:
        self.app = app
        self.headers = headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length", b"0")
        if not length.isdigit() or int(length) > MAX_BODY:
            await self._too_large(scope, receive, send)
            return
        seen = 0
        started = False

        async def bounded() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > MAX_BODY:
                raise _TooLarge
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self.app(scope, bounded, watched)
        except _TooLarge:
            if not started:
                await self._too_large(scope, receive, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        said = f"the request body is over {MAX_BODY} bytes\n"
        headers = {**self.headers, "connection": "close"}
        await PlainTextResponse(said, 413, headers)(scope, receive, send)


class _TooLarge(Exception):
    pass


def limited_protocol(cap: int) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a deadline for each request (REQUEST_S to its last byte)
    and a connection cap: one past it closes the one that has waited longest (or itself,
    when every connection is being answered)."""
    waiting: dict[Limited, None] = {}  # in the order they started waiting

    class Limited(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > cap:
                oldest = next(iter(waiting), None)
                if oldest is None:
                    transport.abort()
                    return
                oldest.unwait()
                oldest.transport.abort()  # descriptors run short: free one now
            self.wait()

        def wait(self) -> None:
            self.unwait()
            self._deadline = self.loop.call_later(REQUEST_S, self.late)
            waiting[self] = None

        def unwait(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            waiting.pop(self, None)

        def late(self) -> None:
            self.unwait()
            self.transport.close()  # what is left of an answer to a slow reader goes first

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR):
                self.unwait()

        def on_response_complete(self) -> None:
            if not self.transport.is_closing():
                self.wait()  # for the next request on this connection (keep-alive)
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self.unwait()
            super().connection_lost(exc)

    return Limited
