"""`cronctl serve`: the dashboard (cronctl/web, docs/dashboard.md), whose app and web extra
are imported only when the command runs."""

from __future__ import annotations

import json
import os
import shlex
import sys
from importlib import metadata
from typing import Annotated
from urllib.parse import unquote, urlsplit

import typer

from cronctl.cli.options import NowOpt, shared
from cronctl.cli.wiring import Where, host_name, parse_instant
from cronctl.errors import UsageError
from cronctl.run.context import RunContext, real_clock
from cronctl.web.actions import Actions
from cronctl.web.auth import TOKEN_ENV, check_actions, check_exposure, parse_listen
from cronctl.web.views import Dashboard


def install_hint() -> str:
    """How to add the web extra: by name, by the checkout's path pip recorded (PEP 610), or
    the three packages when cronctl runs from source without being installed."""
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    try:
        recorded = metadata.distribution("cronctl").read_text("direct_url.json")
        direct = json.loads(recorded) if recorded else {}
    except (metadata.PackageNotFoundError, ValueError):
        return f"`{pip} starlette jinja2 uvicorn`"
    url = direct.get("url") if isinstance(direct, dict) else None
    if not isinstance(url, str) or not url.startswith("file://"):
        return f"`{pip} 'cronctl[web]'`"
    info = direct.get("dir_info")
    editable = "-e " if isinstance(info, dict) and info.get("editable") else ""
    where = shlex.quote(unquote(urlsplit(url).path) + "[web]")
    return f"`{pip} {editable}{where}` (cronctl was installed from that directory)"


@shared("file", "state_dir", "lock_dir", "coordination", "host")
def serve_command(
    listen: Annotated[
        str,
        typer.Option(
            "--listen",
            metavar="HOST:PORT",
            help=f"Where to listen. Not a loopback address: needs {TOKEN_ENV}.",
        ),
    ] = "127.0.0.1:8077",
    *,
    where: Where,
    now: NowOpt = None,
    allow_actions: Annotated[
        bool,
        typer.Option(
            "--allow-actions",
            help=f"Offer pause, resume and run now (needs {TOKEN_ENV}; each is recorded in "
            "STATE_DIR/audit.jsonl).",
        ),
    ] = False,
) -> None:
    """A web dashboard and JSON API over this machine's state, or the fleet's with a
    coordination store; read-only unless --allow-actions. Needs the `web` extra
    (pip install 'cronctl[web]', or 'PATH[web]' for a checkout at PATH).

    With CRONCTL_SERVE_TOKEN set, every request must bring the token (a login form, or an
    `Authorization: Bearer` header for the API). --allow-actions (which needs the token)
    offers pause, resume and run now on the task page and the API, each checked for its
    origin and CSRF token and recorded with who and from where (docs/dashboard.md).

    \b
    Example:
      cronctl serve --listen 127.0.0.1:8080
      CRONCTL_SERVE_TOKEN=... cronctl serve --allow-actions
    """
    address = parse_listen(listen)
    token = os.environ.get(TOKEN_ENV) or None
    check_exposure(address, token)
    check_actions(allow_actions, token)
    try:
        from cronctl.web.app import build_app, serve  # with the web extra: only here
    except ImportError as exc:
        if (exc.name or "").startswith("cronctl"):
            raise  # not the extra: a fault of cronctl's own
        raise UsageError(
            "`cronctl serve` needs the web extra (Starlette, Jinja2 and uvicorn), which is "
            f"not installed here: {install_hint()}"
        ) from None
    schedule, states, locks = where.load()
    me = host_name(where.host)
    coord = where.coordinator(schedule, locks, reads_only=True)
    fixed = parse_instant(now) if now is not None else None
    clock = real_clock if fixed is None else lambda: fixed
    dashboard = Dashboard(schedule, states, coord, me)
    actions = None
    if allow_actions:
        # Run now runs as `cronctl exec` would, with what serve resolved once, and the
        # server's environment without the dashboard's token.
        env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
        ctx = RunContext(state_dir=states, lock_dir=locks, host=me, env=env, coord=coord,
                         max_parallel=schedule.settings.max_parallel)  # fmt: skip
        actions = Actions(schedule, ctx)
    app = build_app(dashboard, clock, token, None if token else address.host_headers(), actions)
    print(f"cronctl serve: http://{listen}/ ({coord.describe()})", file=sys.stderr, flush=True)
    try:
        serve(app, address)
    finally:
        coord.close()
