"""What every handler of the dashboard reads from ``request.app.state.site``, the pages'
templates and headers, and the checks each read route passes (docs/dashboard.md,
"Security"): every value reaches a page through Jinja2's autoescaping after :func:`visible`,
and pages hold no script (the Content-Security-Policy forbids it)."""

from __future__ import annotations

import functools
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from jinja2 import Environment, FileSystemLoader, pass_context, select_autoescape
from jinja2.runtime import Context
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Route

from cronctl.cli.fastpath import parse_instant
from cronctl.cli.render.runs import visible
from cronctl.commands.doctor import SKEW_WARN_S
from cronctl.commands.exec import Busy
from cronctl.commands.explain import Explanation, explain_here
from cronctl.coord.port import StoreUnavailable
from cronctl.coord.redact import redact_text
from cronctl.core.model import format_utc
from cronctl.core.runs import OUTCOMES, TRIGGERS
from cronctl.core.zones import Zone, parse_zone
from cronctl.errors import CronctlError
from cronctl.web.actions import MAX_REASON, Actions
from cronctl.web.auth import SESSION_COOKIE, Sessions, bearer
from cronctl.web.overview_html import time_tag
from cronctl.web.shared_answers import SharedAnswers
from cronctl.web.views import STATES, Dashboard, HistoryQuery, HostRow, NotFound, parse_cursor

TEMPLATES = Path(__file__).with_name("templates")
#: No script anywhere, no inline style, nothing from another origin, no framing.
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    # A form post carries its Origin (no-referrer says "null"); no address leaks elsewhere.
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
UTC = parse_zone("UTC")
View = Callable[["Site", Request], Response]
#: Every route but the posts, each added by its handler's @read_route.
READ_ROUTES: list[Route] = []


def masked(command: str | Sequence[str]) -> str:
    """A task's command as shown: a shell line, passwords as ``***``, controls visible."""
    if isinstance(command, str):
        return visible(redact_text(command, None))
    return shlex.join(masked(word) for word in command)


@pass_context
def _ago(context: Context, value: datetime | None, zone: Zone = UTC) -> Markup:
    return Markup(time_tag(value, context["now"], zone))  # noqa: S704 (escaped there)


def _templates() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    env.filters.update(ago=_ago, visible=visible, masked=masked, utc=format_utc)
    env.globals.update(states=STATES, outcomes=sorted(OUTCOMES), triggers=TRIGGERS,
                       skew_warn=SKEW_WARN_S, max_reason=MAX_REASON)  # fmt: skip
    return env


@dataclass(frozen=True, slots=True)
class Site:
    """The dashboard as build_app made it: ``sessions``, the token every request must bring
    (None: none asked); ``hosts``, the Host headers accepted (None: any), so another site's
    page cannot reach a loopback dashboard by DNS rebinding; ``actions`` (None: read-only)."""

    dashboard: Dashboard
    clock: Callable[[], datetime]
    sessions: Sessions | None
    hosts: frozenset[str] | None
    actions: Actions | None
    templates: Environment = field(default_factory=_templates)
    #: The overview's page and JSON, and the hosts: computed once for concurrent viewers.
    shared: SharedAnswers[bytes] = field(default_factory=SharedAnswers)
    machines: SharedAnswers[list[HostRow]] = field(default_factory=SharedAnswers)

    def rendered(self, name: str, **values: Any) -> str:
        coord = self.dashboard.coord
        given = {"fleet": self.dashboard.fleet, "source": coord.describe(), "now": self.clock(),
                 "skipped": coord.skipped_rows}  # fmt: skip
        return self.templates.get_template(name).render(given | values)

    def page(self, name: str, status: int = 200, **values: Any) -> Response:
        return HTMLResponse(self.rendered(name, **values), status, headers=HEADERS)

    def foreign(self, request: Request) -> bool:
        return self.hosts is not None and request.headers.get("host", "") not in self.hosts

    def authorised(self, request: Request) -> bool:
        if self.sessions is None:
            return True
        given = bearer(request.headers)
        if given is not None:
            return self.sessions.matches(given)
        return self.sessions.valid(request.cookies.get(SESSION_COOKIE, ""), time.time())

    def explained(self, name: str, at: str) -> Explanation:
        instant = parse_instant(at, "time")
        board = self.dashboard
        return explain_here(board.schedule, board.state_dir, board.coord, name, instant,
                            host=board.host, now=self.clock())  # fmt: skip


def site_of(request: Request) -> Site:
    return cast(Site, request.app.state.site)


def typed(body: str | bytes, content_type: str) -> Response:
    return Response(body, headers={**HEADERS, "Content-Type": content_type})


def query_of(request: Request, task: str | None = None) -> HistoryQuery:
    q = {k: v for k, v in request.query_params.items() if v}
    return HistoryQuery(task=task or q.get("task"), host=q.get("host"), outcome=q.get("outcome"),
                        trigger=q.get("trigger"), before=parse_cursor(q.get("before")))  # fmt: skip


def failure(exc: CronctlError) -> tuple[int, str]:
    return (409, exc.said) if isinstance(exc, Busy) else (400, str(exc))


def read_route(path: str) -> Callable[[View], View]:
    """Serve the view at ``path`` in a worker thread, behind the checks of every route but
    the posts: the Host header, no NUL in the address, the token."""

    def register(view: View) -> View:
        READ_ROUTES.append(Route(path, functools.partial(_read, view)))
        return view

    return register


async def _read(view: View, request: Request) -> Response:
    site = site_of(request)
    path = request.url.path
    if site.foreign(request):
        return PlainTextResponse("unknown Host header", 421, headers=HEADERS)
    if "\0" in path + "".join(map("".join, request.query_params.multi_items())):
        # No store value holds a NUL, and the driver refuses one (docs/dashboard.md).
        return PlainTextResponse("NUL in the address", 400, headers=HEADERS)
    if path not in ("/login", "/static/style.css") and not site.authorised(request):
        if path.startswith("/api/"):
            return JSONResponse({"error": "token required"}, 401, headers=HEADERS)
        return RedirectResponse("/login", 303, headers=HEADERS)
    try:
        # In a worker thread: a run page need not wait behind an overview of 10,000 tasks.
        return await run_in_threadpool(view, site, request)
    except CronctlError as exc:
        status = 404 if isinstance(exc, NotFound) else 400
        if isinstance(exc, StoreUnavailable):
            # A coordinator gives up on a store for the rest of a run: the next request retries.
            site.dashboard.coord.close()
            status = 503
        if path.startswith("/api/"):
            return JSONResponse({"error": str(exc)}, status, headers=HEADERS)
        return site.page("error.html", status, message=str(exc))
