"""The dashboard's action routes (`cronctl serve --allow-actions`): a form post from the task
page, or a JSON call with a bearer token, for pause, resume and run now.

A form post must bring a login session, come from a page of this dashboard (the Origin or
Referer header) and carry the session's CSRF token. An API call must bring the token as a
bearer header (a browser never adds one by itself); if it says where it comes from, that
must be here too. Every request that passed the token is recorded (web/actions.py)
with what became of it, refusals included: a refused action with a valid session is what a
cross-site attempt looks like."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote

from cronctl.commands.exec import Busy
from cronctl.errors import CronctlError
from cronctl.web.actions import Actions, Actor
from cronctl.web.auth import (
    SESSION_COOKIE,
    Sessions,
    actor_of,
    bearer,
    origin_problem,
    token_matches,
)

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

#: What the task page says after each action (?done=...): fixed words, never echoed input.
DONE = {"pause": "paused", "resume": "resumed", "run": "started"}
#: The heading of the page that says an action was not done.
NOT_DONE = {"pause": "Not paused", "resume": "Not resumed", "run": "Nothing was started"}

Page = Callable[..., "Response"]


def action_routes(
    actions: Actions,
    sessions: Sessions,
    token: str,
    clock: Callable[[], datetime],
    page: Page,
    headers: dict[str, str],
) -> list[Route]:
    """POST /tasks/NAME/{pause,resume,run} (forms) and /api/tasks/NAME/{...} (JSON)."""
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse, RedirectResponse
    from starlette.routing import Route

    def act(kind: str, name: str, actor: Actor, fields: dict[str, str]) -> Any:
        now = clock()
        if kind == "pause":
            actions.pause(name, fields.get("reason", ""), actor, now)
            return {"paused": True}
        if kind == "resume":
            return {"resumed": actions.resume(name, actor, now)}
        return {"started": True, "run": actions.run_now(name, actor, now)}

    def refused(kind: str, name: str, actor: Actor, problem: str) -> None:
        # Refused all the same when the record cannot be written (which stops every action).
        with contextlib.suppress(CronctlError):
            actions.record(kind, name, actor, clock(), f"refused: {problem}")

    def status_of(exc: CronctlError) -> int:
        return 409 if isinstance(exc, Busy) else 400

    def said(exc: CronctlError) -> str:
        return exc.said if isinstance(exc, Busy) else str(exc)

    def form_endpoint(kind: str) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            cookie = request.cookies.get(SESSION_COOKIE, "")
            if not sessions.valid(cookie, time.time()):
                return page("error.html", 403, message="log in first: the token is required")
            name = request.path_params["name"]
            if not actions.known(name):
                return page("error.html", 404, message=f"no task named {name!r} in the schedule")
            actor = actor_of(request.client.host if request.client else None,
                             request.headers, "page")  # fmt: skip
            problem = origin_problem(request.headers, request.url.scheme)
            # The body is at most 16 KB: web/limits.py answers 413 past that.
            fields = _form(await request.body()) if problem is None else {}
            if problem is None and not sessions.csrf_ok(cookie, fields.get("csrf", "")):
                problem = "the form's CSRF token is missing or wrong: reload the page"
            heading = NOT_DONE[kind]
            if problem is not None:
                refused(kind, name, actor, problem)
                return page("error.html", 403, message=f"refused: {problem}", heading=heading,
                            task=name)  # fmt: skip
            try:
                # In a worker thread: a lock, the state and the store may each take a while.
                await run_in_threadpool(act, kind, name, actor, fields)
            except CronctlError as exc:
                return page("error.html", status_of(exc), message=said(exc), heading=heading,
                            task=name)  # fmt: skip
            return RedirectResponse(f"/tasks/{quote(name, safe='')}?done={kind}", 303,
                                    headers=headers)  # fmt: skip

        return endpoint

    def api_endpoint(kind: str) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            given = bearer(request.headers)
            if given is None or not token_matches(given, token):
                return JSONResponse({"error": "an Authorization: Bearer token is required"},
                                    401, headers=headers)  # fmt: skip
            name = request.path_params["name"]
            if not actions.known(name):
                return JSONResponse({"error": f"no task named {name!r}"}, 404, headers=headers)
            actor = actor_of(request.client.host if request.client else None,
                             request.headers, "api")  # fmt: skip
            seen = "origin" in request.headers or "referer" in request.headers
            problem = origin_problem(request.headers, request.url.scheme) if seen else None
            if problem is not None:
                refused(kind, name, actor, problem)
                return JSONResponse({"error": f"refused: {problem}"}, 403, headers=headers)
            try:
                fields = _json(await request.body())
                answer = await run_in_threadpool(act, kind, name, actor, fields)
            except CronctlError as exc:
                return JSONResponse({"error": said(exc)}, status_of(exc), headers=headers)
            body = {"task": name, "action": kind, **answer}
            return JSONResponse(body, 202 if kind == "run" else 200, headers=headers)

        return endpoint

    routes = []
    for kind in DONE:
        routes.append(Route(f"/tasks/{{name}}/{kind}", form_endpoint(kind), methods=["POST"]))
        routes.append(Route(f"/api/tasks/{{name}}/{kind}", api_endpoint(kind), methods=["POST"]))
    return routes


def _form(data: bytes) -> dict[str, str]:
    """A urlencoded form's fields, the first value of each."""
    form = parse_qs(data.decode("utf-8", "replace"), keep_blank_values=True)
    return {key: values[0] for key, values in form.items()}


def _json(data: bytes) -> dict[str, str]:
    """An API call's JSON object (none: no fields), its string values."""
    if not data.strip():
        return {}
    try:
        value = json.loads(data)
    except ValueError:
        raise CronctlError('the body must be a JSON object, e.g. {"reason": "..."}') from None
    if not isinstance(value, dict):
        raise CronctlError('the body must be a JSON object, e.g. {"reason": "..."}')
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}
