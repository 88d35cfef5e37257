"""How long the dashboard's pages take server-side (docs/dashboard.md#speed).

    python bench/serve_pages.py [--tasks 10000] [--runs 1000000] [--hosts 50]
                                [--rounds 5] [--state DIR] [--profile]

Builds a schedule of TASKS tasks and a local state of RUNS runs spread over HOSTS host
names (bench/_serve_state.py; with --state DIR, once, reused while the sizes match), then
times, ROUNDS times each after one warm-up, and prints the median wall time, the median
CPU time of this process, and the slowest wall time:

- the data of the overview (every task), as the dashboard computes it;
- the whole overview page and /api/tasks: a request through the real Starlette app, in
  this process (the ASGI call uvicorn makes, without the socket), template rendering
  included;
- a history page deep in the history (keyset), as data and as the task page and the
  /api/runs answer.

--profile prints the overview page's cProfile, heaviest first.

--postgres times the fleet dashboard instead: a temporary PostgreSQL (as the tests start
one), its store filled by ``generate_series`` with RUNS records spread evenly over TASKS
tasks x HOSTS hosts (every ninth failed), written at schema 3 and then migrated (timed) to
the schema of the cronctl imported; the overview's data, the page, /api/tasks and /fleet;
then the overview again in an outage: every host's last run of every task failed (the
store's ``latest`` table rewritten so)."""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from _serve_state import START, build
from pg_fleet import fleet_store

from cronctl.coord import open_coordinator
from cronctl.core.model import format_utc
from cronctl.edge.schedfiles import load_paths
from cronctl.web.app import build_app
from cronctl.web.views import Dashboard, HistoryQuery


def asgi_get(app: Any, target: str) -> tuple[int, bytes]:
    """GET ``target`` through ``app`` as uvicorn would call it: status and body."""
    path, _, query = target.partition("?")
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
        "query_string": query.encode(), "headers": [(b"host", b"127.0.0.1:8077")],
        "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 8077),
    }  # fmt: skip
    status: list[int] = []
    body: list[bytes] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
        elif message["type"] == "http.response.body":
            body.append(message.get("body", b""))

    asyncio.run(app(scope, receive, send))
    return status[0], b"".join(body)


def timed(rounds: int, what: Callable[[], object]) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of each round, after one warm-up (templates compiled, SQLite's
    pages in its cache). The CPU time is this process's: on a shared machine the wall time
    also holds the waits for a core."""
    what()
    took = []
    for _ in range(rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        what()
        took.append((time.perf_counter() - t0, time.process_time() - c0))
    return took


def report(name: str, took: list[tuple[float, float]], detail: str = "") -> None:
    wall = statistics.median(t for t, _ in took) * 1000
    cpu = statistics.median(c for _, c in took) * 1000
    worst = max(t for t, _ in took) * 1000
    print(f"{name:<50} median {wall:7.1f} ms (CPU {cpu:7.1f})  slowest {worst:7.1f}  {detail}")


def page(app: Any, target: str) -> Callable[[], object]:
    def get() -> int:
        status, body = asgi_get(app, target)
        if status != 200:
            raise SystemExit(f"{target}: {status} {body[:300]!r}")
        return len(body)

    return get


def finish(app: Any, profile: bool) -> None:
    """The load average at the end, and the overview page's profile when asked for."""
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if profile:
        profiler = cProfile.Profile()
        profiler.runcall(page(app, "/"))
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--state", type=Path, help="build the state here once, and reuse it")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--postgres", action="store_true", help="the fleet store's dashboard")
    args = parser.parse_args()
    if args.postgres:
        fleet_pages(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        where = build(args.state or Path(tmp), args.tasks, args.runs, args.hosts)
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        schedule = load_paths([where.schedule])
        coord = open_coordinator(None, where.locks, host="h00", pid=1)
        board = Dashboard(schedule, where.state, coord, "h00")
        app = build_app(board, lambda: where.now, None, None)

        rounds = args.rounds
        view = board.overview(where.now)
        report(f"overview data, {len(view.tasks)} tasks",
               timed(rounds, lambda: board.overview(where.now)))  # fmt: skip
        size = page(app, "/")()
        report("overview page GET /", timed(rounds, page(app, "/")), f"{size / 1e6:.1f} MB")
        for target in ("/api/tasks", "/fleet"):
            report(f"GET {target}", timed(rounds, page(app, target)))

        deep = (START + timedelta(minutes=args.runs // 2), "r")
        cursor = f"{format_utc(deep[0])}~r"
        task = f"t{7 % args.tasks:05d}"
        for name, query in (
            ("first page, every task", HistoryQuery()),
            ("page in the middle, every task", HistoryQuery(before=deep)),
            ("page in the middle, one task", HistoryQuery(task=task, before=deep)),
            ("page in the middle, outcome failed", HistoryQuery(outcome="failed", before=deep)),
        ):
            report(f"history data: {name}", timed(rounds * 4, lambda q=query: board.history(q)))
        for target in (
            f"/tasks/{task}?before={cursor}",
            f"/api/runs?before={cursor}",
            f"/api/runs?outcome=failed&before={cursor}",
        ):
            shown = target.partition("before=")[0] + "before=..."
            report(f"history GET {shown}", timed(rounds * 4, page(app, target)))
        finish(app, args.profile)
        coord.close()


def fleet_pages(args: argparse.Namespace) -> None:
    """The fleet dashboard's overview on a PostgreSQL store (see the module's docstring)."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        fleet_store(Path(tmp), args.tasks, args.runs, args.hosts) as (url, schedule_path),
    ):
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        schedule = load_paths([schedule_path])
        coord = open_coordinator(url, Path(tmp) / "locks", host="viewer", pid=1)
        board = Dashboard(schedule, Path(tmp), coord, "viewer")
        now = START + timedelta(days=1)
        app = build_app(board, lambda: now, None, None)
        rounds = args.rounds
        report("fleet overview data", timed(rounds, lambda: board.overview(now)))
        size = page(app, "/")()
        report("fleet overview page GET /", timed(rounds, page(app, "/")), f"{size / 1e6:.1f} MB")
        for target in ("/api/tasks", "/fleet", "/tasks/t00007", "/?host=h07"):
            report(f"GET {target}", timed(rounds, page(app, target)))
        outage(url)
        size = page(app, "/")()
        report("outage: overview page GET /", timed(rounds, page(app, "/")), f"{size / 1e6:.1f} MB")
        finish(app, args.profile)
        coord.close()


def outage(url: str) -> None:
    """Every (task, host)'s last run failed, as in an outage of something every task needs."""
    import psycopg2

    conn = psycopg2.connect(url)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("UPDATE cronctl.latest SET outcome = 'failed', exit_code = 1")
        cur.execute("VACUUM ANALYZE cronctl.latest")
    conn.close()


if __name__ == "__main__":
    main()
