"""The dashboard's web layer: Starlette routes, Jinja2 pages, SVG pictures, the JSON API.

Starlette and Jinja2 (the `web` extra) are imported inside :func:`build_app` only, so
nothing else in cronctl loads them. Every value from a task or the store reaches the page
through Jinja2's autoescaping, after :func:`visible` turned control characters into
``^[``-style text; pages hold no script at all, and the Content-Security-Policy forbids it.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import time
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode

from cronctl.cli.explain_cmd import as_dict, render
from cronctl.cli.fastpath import parse_instant
from cronctl.cli.render.chain import chain_svg
from cronctl.cli.render.runs import run_json, visible
from cronctl.cli.render.timeline import timeline_svg
from cronctl.commands.doctor import SKEW_WARN_S
from cronctl.commands.explain import Explanation, explain_here
from cronctl.coord.port import StoreUnavailable, TaskLatest, redact_text
from cronctl.core.model import format_utc
from cronctl.core.runs import OUTCOMES, RunRow
from cronctl.core.zones import Zone, parse_zone
from cronctl.errors import CronctlError
from cronctl.web.action_routes import DONE, action_routes
from cronctl.web.actions import MAX_REASON, Actions
from cronctl.web.auth import SESSION_COOKIE, SESSION_S, Sessions, bearer, token_matches
from cronctl.web.limits import BodyLimit
from cronctl.web.overview_html import overview_rows, time_tag, when
from cronctl.web.shared_answers import SharedAnswers
from cronctl.web.views import (
    STATES,
    Dashboard,
    Filters,
    HistoryQuery,
    HostRow,
    NotFound,
    TaskSummary,
    parse_cursor,
)

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

TEMPLATES = Path(__file__).with_name("templates")
#: No script anywhere, no inline style, nothing from another origin, no framing.
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    # Same-origin: a form post then carries its Origin (with no-referrer it says "null"),
    # and no address of the dashboard reaches another site.
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


def masked(command: str | Sequence[str]) -> str:
    """A task's command as the dashboard shows it: an array as a shell line that runs it
    (each word quoted as needed), passwords (in URLs, ``password=``) as ``***``, controls
    visible."""
    if isinstance(command, str):
        return visible(redact_text(command, None))
    return shlex.join(masked(word) for word in command)


def summary_json(row: TaskSummary) -> dict[str, Any]:
    """A task as `status --json` shows it, with the last run on every host."""
    return {
        "name": row.task.name,
        "paused": row.paused,
        "pause_reason": row.pause_reason,
        "next_run": when(row.next_run) if row.next_run else None,
        "last_run": run_json(only) if (only := _only_run(row)) is not None else None,
        "last_runs": [run_json(r) for r in row.last],
        "hosts": _hosts_json(row.hosts) if row.hosts is not None else None,
        "running": [run_json(r) for r in row.running],
        "consecutive_failures": row.failures,
        "overdue": row.overdue is not None,
        "overdue_since": when(row.overdue) if row.overdue else None,
        "state": row.state,
    }


def _only_run(row: TaskSummary) -> RunRow | None:
    """The task's last run when it ran on one host only (None: on several, never, or in a
    fleet's overview, which counts the hosts instead of reading their runs: ``last`` is
    then empty)."""
    return row.last[0] if len(row.last) == 1 else None


def _hosts_json(hosts: TaskLatest) -> dict[str, Any]:
    """A fleet overview's count of a task's hosts, by how their last run went."""
    return {
        "ok": hosts.ok_hosts,
        "not_ok": hosts.not_ok_hosts,
        "failing": hosts.failing_hosts,
        "not_ok_named": [
            {"host": h.host, "outcome": h.outcome, "run_id": h.run_id} for h in hosts.not_ok
        ],
    }


def duration_svg(points: list[tuple[datetime, float]]) -> str:
    """Durations over time: one bar per run, oldest left."""
    width, height, left, bottom = 640, 180, 48, 24
    top = max((d for _, d in points), default=0.0) or 1.0
    step = (width - left - 8) / max(len(points), 1)
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' font-family='DejaVu Sans, sans-serif' font-size='11'>",
        f"<rect width='{width}' height='{height}' fill='#ffffff'/>",
        f"<text x='4' y='14' fill='#57606a'>{top:.2f}s</text>",
        f"<text x='4' y='{height - bottom}' fill='#57606a'>0s</text>",
        f"<line x1='{left}' y1='{height - bottom}' x2='{width}' y2='{height - bottom}' "
        "stroke='#d0d7de'/>",
    ]
    plot = height - bottom - 8
    for i, (at, seconds) in enumerate(points):
        h = max(1.0, plot * seconds / top)
        x = left + i * step
        parts.append(
            f"<rect x='{x:.1f}' y='{height - bottom - h:.1f}' width='{max(step - 1, 1):.1f}' "
            f"height='{h:.1f}' fill='#0969da'><title>{escape(format_utc(at))} "
            f"{seconds:.2f}s</title></rect>"
        )
    if not points:
        parts.append(f"<text x='{left + 8}' y='{height // 2}' fill='#57606a'>no runs yet</text>")
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def build_app(
    dashboard: Dashboard,
    clock: Callable[[], datetime],
    token: str | None,
    hosts: frozenset[str] | None,
    actions: Actions | None = None,
) -> Starlette:
    """The ASGI app. ``token``: required of every request when set (a bearer header or the
    session cookie the login form sets); ``hosts``: the Host headers accepted (None: any),
    so a page of another site cannot reach a loopback dashboard by DNS rebinding;
    ``actions``: pause, resume and run now (`--allow-actions`, which needs the token)."""
    from jinja2 import Environment, FileSystemLoader, pass_context, select_autoescape
    from jinja2.runtime import Context
    from markupsafe import Markup
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.middleware import Middleware
    from starlette.responses import (
        HTMLResponse,
        JSONResponse,
        PlainTextResponse,
        RedirectResponse,
        Response,
    )
    from starlette.routing import Route

    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    utc = parse_zone("UTC")

    @pass_context
    def ago(context: Context, value: datetime | None, zone: Zone = utc) -> Markup:
        """An instant in words from the page's ``now``, exact in ``zone`` on hover."""
        return Markup(time_tag(value, context["now"], zone))  # noqa: S704 (escaped there)

    def zone_of(name: str) -> Zone:
        """A task's zone, for its runs' exact times (UTC: no longer in the schedule)."""
        try:
            return dashboard.schedule.task(name).zone
        except KeyError:
            return utc

    env.filters["ago"] = ago
    env.filters["visible"] = visible
    env.filters["masked"] = masked
    env.globals["states"] = STATES
    env.globals["outcomes"] = sorted(OUTCOMES)
    env.globals["skew_warn"] = SKEW_WARN_S
    env.globals["max_reason"] = MAX_REASON
    sessions = Sessions(token) if token is not None else None

    def rendered(name: str, **values: Any) -> str:
        values.setdefault("fleet", dashboard.fleet)
        values.setdefault("source", dashboard.coord.describe())
        values.setdefault("now", clock())
        values.setdefault("skipped", dashboard.coord.skipped_rows)
        return env.get_template(name).render(**values)

    def page(name: str, status: int = 200, **values: Any) -> Response:
        return HTMLResponse(rendered(name, **values), status, headers=HEADERS)

    # The overview's page and JSON, computed once for the viewers who ask at the same time.
    shared: SharedAnswers[bytes] = SharedAnswers()
    machines: SharedAnswers[list[HostRow]] = SharedAnswers()

    def authorised(request: Request) -> bool:
        if token is None or sessions is None:
            return True
        given = bearer(request.headers)
        if given is not None:
            return token_matches(given, token)
        return sessions.valid(request.cookies.get(SESSION_COOKIE, ""), time.time())

    async def guard(request: Request, view: Callable[[Request], Response]) -> Response:
        if hosts is not None and request.headers.get("host", "") not in hosts:
            return PlainTextResponse("unknown Host header", 421, headers=HEADERS)
        if "\0" in request.url.path + "".join(map("".join, request.query_params.multi_items())):
            # No store value holds a NUL, and the driver refuses one (docs/dashboard.md).
            return PlainTextResponse("NUL in the address", 400, headers=HEADERS)
        if request.url.path not in ("/login", "/static/style.css") and not authorised(request):
            if request.url.path.startswith("/api/"):
                return JSONResponse({"error": "token required"}, 401, headers=HEADERS)
            return RedirectResponse("/login", 303, headers=HEADERS)
        try:
            # In a worker thread: the loop goes on answering (a run page need not wait for
            # an overview of 10,000 tasks), and SQLite works without the GIL meanwhile.
            return await run_in_threadpool(view, request)
        except CronctlError as exc:
            status = 404 if isinstance(exc, NotFound) else 400
            if isinstance(exc, StoreUnavailable):
                # A coordinator gives up on a store for the rest of a run; serve's "run" is
                # every request from now on, so the next one tries the store afresh.
                dashboard.coord.close()
                status = 503
            if request.url.path.startswith("/api/"):
                return JSONResponse({"error": str(exc)}, status, headers=HEADERS)
            return page("error.html", status, message=str(exc))

    def route(path: str, view: Callable[[Request], Response], methods: list[str]) -> Route:
        async def endpoint(request: Request) -> Response:
            return await guard(request, view)

        return Route(path, endpoint, methods=methods)

    def query_of(request: Request, task: str | None = None) -> HistoryQuery:
        q = request.query_params
        return HistoryQuery(
            task=task or q.get("task") or None,
            host=q.get("host") or None,
            outcome=q.get("outcome") or None,
            trigger=q.get("trigger") or None,
            before=parse_cursor(q.get("before")),
        )

    def next_link(request: Request, after: tuple[datetime, str] | None) -> str | None:
        if after is None:
            return None
        params = {k: v for k, v in request.query_params.items() if k != "before" and v}
        params["before"] = f"{format_utc(after[0])}~{after[1]}"
        return f"{request.url.path}?{urlencode(params)}"

    def overview(request: Request) -> Response:
        q = request.query_params
        state = q.get("state") or None
        filters = Filters(q.get("host") or None, state if state in STATES else None,
                          q.get("name") or None)  # fmt: skip

        def render() -> bytes:
            now = clock()
            view = dashboard.overview(now, filters)
            rows = Markup(overview_rows(view.tasks, now))  # noqa: S704 (every value escaped there)
            return rendered("overview.html", view=view, rows=rows, filters=filters).encode()

        body = shared.get(("/", filters), render)
        return Response(body, headers={**HEADERS, "Content-Type": "text/html; charset=utf-8"})

    def task(request: Request) -> Response:
        name = request.path_params["name"]
        now = clock()
        view = dashboard.task_page(name, now, query_of(request, name))
        at = request.query_params.get("at")
        answer, problem = None, None
        if at is not None:
            try:
                answer = render(explained(name, at.strip()))
            except CronctlError as exc:
                problem = str(exc)
        cookie = request.cookies.get(SESSION_COOKIE, "")
        done = request.query_params.get("done")
        chain = Markup(chain_svg(view.chains, name) if view.chains else "")  # noqa: S704 (escaped there)
        return page(
            "task.html", 400 if problem else 200, view=view, now=now, query=request.query_params,
            older=next_link(request, view.history.after), actions=actions is not None,
            csrf=sessions.csrf(cookie) if sessions is not None and cookie else "",
            done=DONE.get(done or ""), at=at or format_utc(now), explanation=answer,
            explain_error=problem, chain=chain,
        )  # fmt: skip

    def explained(name: str, at: str) -> Explanation:
        """`cronctl explain NAME --at AT` as this server sees it."""
        instant = parse_instant(at, "time")
        return explain_here(
            dashboard.schedule, dashboard.state_dir, dashboard.coord, name, instant,
            host=dashboard.host, now=clock(),
        )  # fmt: skip

    def svg(body: str) -> Response:
        return Response(body, headers={**HEADERS, "Content-Type": "image/svg+xml"})

    def timeline(request: Request) -> Response:
        name = request.path_params["name"]
        view = dashboard.task_page(name, clock(), HistoryQuery(task=name, limit=1))
        return svg(timeline_svg(view.timeline))

    def durations(request: Request) -> Response:
        name = request.path_params["name"]
        view = dashboard.task_page(name, clock(), HistoryQuery(task=name, limit=1))
        return svg(duration_svg(view.durations))

    def run(request: Request) -> Response:
        view = dashboard.run_page(request.path_params["id"])
        return page("run.html", view=view, zone=zone_of(view.run.task))

    def fleet(request: Request) -> Response:
        return page("fleet.html", hosts=machines.get("hosts", dashboard.hosts))

    def style(request: Request) -> Response:
        css = (TEMPLATES / "style.css").read_text(encoding="utf-8")
        return Response(css, headers={**HEADERS, "Content-Type": "text/css"})

    def login(request: Request) -> Response:
        return page("login.html")

    def api_tasks(request: Request) -> Response:

        def answer() -> bytes:
            view = dashboard.overview(clock())
            tasks = {"tasks": [summary_json(r) for r in view.tasks]}
            # As JSONResponse writes it.
            return json.dumps(tasks, ensure_ascii=False, allow_nan=False, separators=(",", ":")
                              ).encode()  # fmt: skip

        body = shared.get("/api/tasks", answer)
        return Response(body, headers={**HEADERS, "Content-Type": "application/json"})

    def api_task(request: Request) -> Response:
        name = request.path_params["name"]
        view = dashboard.task_page(name, clock(), HistoryQuery(task=name, limit=20))
        body = summary_json(view.summary) | {
            "upcoming": [format_utc(u.at) for u in view.upcoming],
            "history": [run_json(r) for r in view.history.runs],
        }
        return JSONResponse(body, headers=HEADERS)

    def api_explain(request: Request) -> Response:
        at = request.query_params.get("at") or format_utc(clock())
        result = explained(request.path_params["name"], at)
        return JSONResponse(as_dict(result), headers=HEADERS)

    def api_runs(request: Request) -> Response:
        view = dashboard.history(query_of(request))
        after = view.after
        body: dict[str, Any] = {
            "runs": [run_json(r) for r in view.runs],
            "before": f"{format_utc(after[0])}~{after[1]}" if after else None,
        }
        return JSONResponse(body, headers=HEADERS)

    def api_hosts(request: Request) -> Response:
        rows = [
            {
                "host": h.host,
                "last_seen": when(h.last_seen),
                "tasks": h.tasks,
                "failing": h.failing,
                "failing_total": h.failing_total,
                "version": h.version,
                "clock_skew_s": None if h.skew_s is None else round(h.skew_s, 3),
            }
            for h in machines.get("hosts", dashboard.hosts)
        ]
        return JSONResponse({"hosts": rows}, headers=HEADERS)

    async def login_post(request: Request) -> Response:
        if (
            sessions is None
            or token is None
            or (hosts is not None and request.headers.get("host") not in hosts)
        ):
            return PlainTextResponse("not here", 404, headers=HEADERS)
        # At most 16 KB: web/limits.py answers 413 past that, reading no more.
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        given = (form.get("token") or [""])[0]
        if not token_matches(given, token):
            return page("login.html", 403, wrong=True)
        response = RedirectResponse("/", 303, headers=HEADERS)
        secure = request.url.scheme == "https" or request.headers.get(
            "x-forwarded-proto") == "https"  # fmt: skip
        response.set_cookie(SESSION_COOKIE, sessions.new(time.time()), max_age=SESSION_S,
                            httponly=True, samesite="strict", secure=secure)  # fmt: skip
        return response

    routes = [
        Route("/login", login_post, methods=["POST"]),
        route("/", overview, ["GET"]),
        route("/tasks/{name}", task, ["GET"]),
        route("/tasks/{name}/timeline.svg", timeline, ["GET"]),
        route("/tasks/{name}/durations.svg", durations, ["GET"]),
        route("/runs/{id}", run, ["GET"]),
        route("/fleet", fleet, ["GET"]),
        route("/static/style.css", style, ["GET"]),
        route("/login", login, ["GET"]),
        route("/api/tasks", api_tasks, ["GET"]),
        route("/api/tasks/{name}", api_task, ["GET"]),
        route("/api/tasks/{name}/explain", api_explain, ["GET"]),
        route("/api/runs", api_runs, ["GET"]),
        route("/api/hosts", api_hosts, ["GET"]),
    ]
    if actions is not None and sessions is not None and token is not None:
        routes += action_routes(actions, sessions, token, clock, page, HEADERS)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        yield
        if actions is not None:
            # The server stops (Ctrl-C, SIGTERM): so do the runs it started, each recorded.
            await run_in_threadpool(actions.stop_runs)

    limit = Middleware(BodyLimit, headers=HEADERS)
    app = Starlette(routes=routes, lifespan=lifespan, middleware=[limit])
    app.state.started = datetime.now(UTC)
    return app
