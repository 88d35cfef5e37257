"""The dashboard's JSON API, in the shapes of the CLI's --json (docs/commands.md)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from cronctl.cli.explain_cmd import as_dict
from cronctl.cli.render.runs import run_json
from cronctl.core.model import format_utc
from cronctl.errors import CronctlError
from cronctl.web.auth import actor_of, bearer, origin_problem
from cronctl.web.site import HEADERS, Site, failure, query_of, read_route, site_of, typed
from cronctl.web.views import HistoryQuery, TaskSummary, cursor


@read_route("/api/tasks")
def tasks(site: Site, request: Request) -> Response:
    def answer() -> bytes:
        view = site.dashboard.overview(site.clock())
        return bytes(JSONResponse({"tasks": [summary_json(r) for r in view.tasks]}).body)

    return typed(site.shared.get("/api/tasks", answer), "application/json")


@read_route("/api/tasks/{name}")
def task(site: Site, request: Request) -> Response:
    name = request.path_params["name"]
    view = site.dashboard.task_page(name, site.clock(), HistoryQuery(task=name, limit=20))
    body = summary_json(view.summary) | {
        "upcoming": [format_utc(u.at) for u in view.upcoming],
        "history": [run_json(r) for r in view.history.runs],
    }
    return JSONResponse(body, headers=HEADERS)


@read_route("/api/tasks/{name}/explain")
def explain(site: Site, request: Request) -> Response:
    at = request.query_params.get("at") or format_utc(site.clock())
    return JSONResponse(as_dict(site.explained(request.path_params["name"], at)), headers=HEADERS)


@read_route("/api/runs")
def runs(site: Site, request: Request) -> Response:
    view = site.dashboard.history(query_of(request))
    rows = [run_json(r) for r in view.runs]
    body = {"runs": rows, "before": cursor(view.after) if view.after else None}
    return JSONResponse(body, headers=HEADERS)


@read_route("/api/hosts")
def hosts(site: Site, request: Request) -> Response:
    rows = []
    for h in site.machines.get("hosts", site.dashboard.hosts):
        skew = None if h.clock_skew_s is None else round(h.clock_skew_s, 3)
        rows.append(asdict(h) | {"last_seen": format_utc(h.last_seen), "clock_skew_s": skew})
    return JSONResponse({"hosts": rows}, headers=HEADERS)


async def act(kind: str, request: Request) -> Response:
    """POST /api/tasks/NAME/{pause,resume,run}: the token as a bearer header (a browser never
    adds one by itself), and if it says where it comes from, here. Each is recorded."""
    site = site_of(request)
    actions, sessions = site.actions, site.sessions
    assert actions is not None and sessions is not None  # the only dashboard with the route
    given = bearer(request.headers)
    if given is None or not sessions.matches(given):
        return JSONResponse({"error": "an Authorization: Bearer token is required"}, 401,
                            headers=HEADERS)  # fmt: skip
    name = request.path_params["name"]
    if not actions.known(name):
        return JSONResponse({"error": f"no task named {name!r}"}, 404, headers=HEADERS)
    actor = actor_of(request.client.host if request.client else None, request.headers, "api")
    seen = "origin" in request.headers or "referer" in request.headers
    problem = origin_problem(request.headers, request.url.scheme) if seen else None
    if problem is not None:
        actions.refuse(kind, name, actor, site.clock(), problem)
        return JSONResponse({"error": f"refused: {problem}"}, 403, headers=HEADERS)
    try:
        fields = _json(await request.body())
        answer = await run_in_threadpool(actions.do, kind, name, actor, fields, site.clock())
    except CronctlError as exc:
        status, said = failure(exc)
        return JSONResponse({"error": said}, status, headers=HEADERS)
    body = {"task": name, "action": kind, **answer}
    return JSONResponse(body, 202 if kind == "run" else 200, headers=HEADERS)


def _json(data: bytes) -> dict[str, str]:
    if not data.strip():
        return {}
    try:
        value = json.loads(data)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise CronctlError('the body must be a JSON object, e.g. {"reason": "..."}')
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def summary_json(row: TaskSummary) -> dict[str, Any]:
    counted = row.hosts
    hosts = counted and {
        "ok": counted.ok_hosts,
        "not_ok": counted.not_ok_hosts,
        "failing": counted.failing_hosts,
        "not_ok_named": [asdict(h) for h in counted.not_ok],
    }
    return {
        "name": row.task.name,
        "paused": row.paused,
        "pause_reason": row.pause_reason,
        "next_run": format_utc(row.next_run) if row.next_run else None,
        # None: on several hosts, never, or counted (a fleet's overview: ``last`` empty).
        "last_run": run_json(row.last[0]) if len(row.last) == 1 else None,
        "last_runs": [run_json(r) for r in row.last],
        "hosts": hosts,
        "running": [run_json(r) for r in row.running],
        "consecutive_failures": row.failures,
        "overdue": row.overdue is not None,
        "overdue_since": format_utc(row.overdue) if row.overdue else None,
        "state": row.state,
    }
