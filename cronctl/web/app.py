"""The dashboard's ASGI app and its server (docs/dashboard.md). Only `serve` imports it:
Starlette, Jinja2 and uvicorn (the `web` extra) come with it, and nothing else loads them."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable
from datetime import datetime

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.routing import Route

from cronctl.web import api, pages
from cronctl.web.actions import ACTIONS, Actions
from cronctl.web.auth import Listen, Sessions
from cronctl.web.limits import MAX_BODY, BodyLimit, connection_limits, limited_protocol
from cronctl.web.site import HEADERS, READ_ROUTES, Site
from cronctl.web.views import Dashboard

ROUTES = [Route("/login", pages.login_post, methods=["POST"]), *READ_ROUTES]
#: Offered with --allow-actions only.
ACTION_ROUTES = [
    Route(f"{prefix}/tasks/{{name}}/{kind}", functools.partial(act, kind), methods=["POST"])
    for kind in ACTIONS
    for prefix, act in (("", pages.act), ("/api", api.act))
]


def build_app(
    dashboard: Dashboard,
    clock: Callable[[], datetime],
    token: str | None,
    hosts: frozenset[str] | None,
    actions: Actions | None = None,
) -> Starlette:
    """The ASGI app: ``token`` required of every request when set (a bearer header or the
    session cookie the login form sets)."""
    sessions = Sessions(token) if token is not None else None
    offered = ACTION_ROUTES if actions is not None and sessions is not None else []
    app = Starlette(routes=ROUTES + offered, lifespan=_lifespan,
                    middleware=[Middleware(BodyLimit, headers=HEADERS)])  # fmt: skip
    app.state.site = Site(dashboard, clock, sessions, hosts, actions)
    return app


@contextlib.asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    yield
    site: Site = app.state.site
    if site.actions is not None:
        # The server stops (Ctrl-C, SIGTERM): so do the runs it started, each recorded.
        await run_in_threadpool(site.actions.stop_runs)


def serve(app: Starlette, where: Listen) -> None:
    cap, backlog = connection_limits()
    uvicorn.run(
        app, host=where.host, port=where.port, log_level="warning", server_header=False,
        date_header=False,
        # Which forwarded headers count is web/auth.py's rule, not uvicorn's.
        proxy_headers=False,
        # A head of 16 KB, a request within seconds, a cap (docs/dashboard.md#limits).
        http=limited_protocol(cap), backlog=backlog, h11_max_incomplete_event_size=MAX_BODY,
    )  # fmt: skip
