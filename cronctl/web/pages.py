"""The dashboard's pages and pictures, and the forms they post."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, quote, urlencode

from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from cronctl.cli.explain_cmd import render
from cronctl.cli.render.chain import chain_svg
from cronctl.cli.render.timeline import timeline_svg
from cronctl.core.model import format_utc
from cronctl.core.zones import parse_zone
from cronctl.errors import CronctlError
from cronctl.web.auth import SESSION_COOKIE, SESSION_S, actor_of, origin_problem, scheme_of
from cronctl.web.overview_html import overview_rows
from cronctl.web.site import HEADERS, TEMPLATES, Site, failure, query_of, read_route, site_of, typed
from cronctl.web.views import STATES, Filters, HistoryQuery, TaskPage, cursor

#: What the task page says after each action (?done=...): fixed words, never echoed input.
DONE = {"pause": "paused", "resume": "resumed", "run": "started"}
#: The heading of the page that says an action was not done.
NOT_DONE = {"pause": "Not paused", "resume": "Not resumed", "run": "Nothing was started"}


@read_route("/")
def overview(site: Site, request: Request) -> Response:
    q = request.query_params
    state = q.get("state") or None
    filters = Filters(q.get("host") or None, state if state in STATES else None,
                      q.get("name") or None)  # fmt: skip

    def render_page() -> bytes:
        now = site.clock()
        view = site.dashboard.overview(now, filters)
        rows = Markup(overview_rows(view.tasks, now))  # noqa: S704 (every value escaped there)
        return site.rendered("overview.html", view=view, rows=rows, filters=filters).encode()

    return typed(site.shared.get(("/", filters), render_page), "text/html; charset=utf-8")


@read_route("/tasks/{name}")
def task(site: Site, request: Request) -> Response:
    name = request.path_params["name"]
    now = site.clock()
    view = site.dashboard.task_page(name, now, query_of(request, name))
    at = request.query_params.get("at")
    answer, problem = None, None
    if at is not None:
        try:
            answer = render(site.explained(name, at.strip()))
        except CronctlError as exc:
            problem = str(exc)
    cookie = request.cookies.get(SESSION_COOKIE, "")
    csrf = site.sessions.csrf(cookie) if site.sessions is not None and cookie else ""
    chain = Markup(chain_svg(view.chains, name) if view.chains else "")  # noqa: S704 (escaped there)
    return site.page(
        "task.html", 400 if problem else 200, view=view, now=now, query=request.query_params,
        older=_older(request, view), actions=site.actions is not None, csrf=csrf,
        done=DONE.get(request.query_params.get("done") or ""), at=at or format_utc(now),
        explanation=answer, explain_error=problem, chain=chain,
    )  # fmt: skip


def _older(request: Request, view: TaskPage) -> str | None:
    if view.history.after is None:
        return None
    params = {k: v for k, v in request.query_params.items() if k != "before" and v}
    params["before"] = cursor(view.history.after)
    return f"{request.url.path}?{urlencode(params)}"


def _pictured(site: Site, request: Request) -> TaskPage:
    name = request.path_params["name"]
    return site.dashboard.task_page(name, site.clock(), HistoryQuery(task=name, limit=1))


@read_route("/tasks/{name}/timeline.svg")
def timeline(site: Site, request: Request) -> Response:
    return typed(timeline_svg(_pictured(site, request).timeline), "image/svg+xml")


@read_route("/tasks/{name}/durations.svg")
def durations(site: Site, request: Request) -> Response:
    points = _pictured(site, request).durations  # one bar per run, oldest left
    top = max((d for _, d in points), default=0.0) or 1.0
    return typed(site.rendered("durations.svg", points=points, top=top), "image/svg+xml")


@read_route("/runs/{id}")
def run(site: Site, request: Request) -> Response:
    view = site.dashboard.run_page(request.path_params["id"])
    # The task's zone for the run's exact times (UTC: no longer in the schedule).
    zones = {t.name: t.zone for t in site.dashboard.schedule.tasks}
    return site.page("run.html", view=view, zone=zones.get(view.run.task, parse_zone("UTC")))


@read_route("/fleet")
def fleet(site: Site, request: Request) -> Response:
    return site.page("fleet.html", hosts=site.machines.get("hosts", site.dashboard.hosts))


@read_route("/static/style.css")
def style(site: Site, request: Request) -> Response:
    return typed((TEMPLATES / "style.css").read_text(encoding="utf-8"), "text/css")


@read_route("/login")
def login(site: Site, request: Request) -> Response:
    return site.page("login.html")


async def login_post(request: Request) -> Response:
    site = site_of(request)
    sessions = site.sessions
    if sessions is None or site.foreign(request):
        return PlainTextResponse("not here", 404, headers=HEADERS)
    # At most 16 KB: web/limits.py answers 413 past that, reading no more.
    if not sessions.matches(_form(await request.body()).get("token", "")):
        return site.page("login.html", 403, wrong=True)
    response = RedirectResponse("/", 303, headers=HEADERS)
    secure = scheme_of(request.headers, request.url.scheme) == "https"
    response.set_cookie(SESSION_COOKIE, sessions.new(time.time()), max_age=SESSION_S,
                        httponly=True, samesite="strict", secure=secure)  # fmt: skip
    return response


async def act(kind: str, request: Request) -> Response:
    """POST /tasks/NAME/{pause,resume,run}, a form of the task page: a login session, from a
    page of this dashboard, with the session's CSRF token. Every request with a session is
    recorded: a refused one is what a cross-site attempt looks like."""
    site = site_of(request)
    actions, sessions = site.actions, site.sessions
    assert actions is not None and sessions is not None  # the only dashboard with the route
    cookie = request.cookies.get(SESSION_COOKIE, "")
    if not sessions.valid(cookie, time.time()):
        return site.page("error.html", 403, message="log in first: the token is required")
    name = request.path_params["name"]
    if not actions.known(name):
        return site.page("error.html", 404, message=f"no task named {name!r} in the schedule")
    actor = actor_of(request.client.host if request.client else None, request.headers, "page")
    problem = origin_problem(request.headers, request.url.scheme)
    # The body is at most 16 KB: web/limits.py answers 413 past that.
    fields = _form(await request.body()) if problem is None else {}
    if problem is None and not sessions.csrf_ok(cookie, fields.get("csrf", "")):
        problem = "the form's CSRF token is missing or wrong: reload the page"
    if problem is not None:
        actions.refuse(kind, name, actor, site.clock(), problem)
        return site.page("error.html", 403, message=f"refused: {problem}",
                         heading=NOT_DONE[kind], task=name)  # fmt: skip
    try:
        # In a worker thread: a lock, the state and the store may each take a while.
        await run_in_threadpool(actions.do, kind, name, actor, fields, site.clock())
    except CronctlError as exc:
        status, said = failure(exc)
        return site.page("error.html", status, message=said, heading=NOT_DONE[kind], task=name)
    return RedirectResponse(f"/tasks/{quote(name, safe='')}?done={kind}", 303, headers=HEADERS)


def _form(data: bytes) -> dict[str, str]:
    form = parse_qs(data.decode("utf-8", "replace"), keep_blank_values=True)
    return {key: values[0] for key, values in form.items()}
