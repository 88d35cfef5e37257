"""How long the dashboard's data takes server-side (docs/dashboard.md#speed).

    python bench/serve_pages.py [--tasks 10000] [--runs 1000000] [--hosts 50] [--profile]

Builds a schedule of TASKS tasks and a local state of RUNS runs spread over HOSTS host
names in a temporary directory, then times the overview (every task) and a history page
deep in the history (keyset). --profile prints the overview's cProfile, heaviest first."""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cronctl.commands.serve import Dashboard, HistoryQuery
from cronctl.coord import open_coordinator
from cronctl.core.runs import RunRow
from cronctl.edge.schedfiles import load_paths
from cronctl.edge.state.store import Store


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sched = root / "schedules.toml"
        sched.write_text(
            "".join(
                f'[[task]]\nname = "t{i:05d}"\ncron = "{i % 60} * * * *"\ncommand = "true"\n'
                for i in range(args.tasks)
            )
        )
        schedule = load_paths([sched])
        (root / "state").mkdir(mode=0o700)
        (root / "locks").mkdir(mode=0o700)
        start = datetime(2024, 1, 1, tzinfo=UTC)
        t0 = time.perf_counter()
        with Store.open(root / "state") as store:
            batch = 100_000
            for first in range(0, args.runs, batch):
                with store.transaction() as txn:
                    txn.add_runs(
                        [
                            RunRow(
                                f"r{i:08d}",
                                f"t{i % args.tasks:05d}",
                                start + timedelta(minutes=i),
                                "ok" if i % 9 else "failed",
                                f"h{i % args.hosts:02d}",
                                exit_code=0,
                                duration_s=1.0,
                            )
                            for i in range(first, min(first + batch, args.runs))
                        ]
                    )
        print(f"built {args.runs} runs in {time.perf_counter() - t0:.1f} s")
        coord = open_coordinator(None, root / "locks", host="h00", pid=1)
        board = Dashboard(schedule, root / "state", coord, "h00")
        now = start + timedelta(minutes=args.runs)
        for _ in range(2):
            t0 = time.perf_counter()
            view = board.overview(now)
            print(f"overview of {len(view.tasks)} tasks: {time.perf_counter() - t0:.3f} s")
        if args.profile:
            profiler = cProfile.Profile()
            profiler.runcall(board.overview, now)
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
        deep = (start + timedelta(minutes=args.runs // 2), "r")
        for name, query in (
            ("first page, every task", HistoryQuery()),
            ("page in the middle, every task", HistoryQuery(before=deep)),
            ("page in the middle, one task", HistoryQuery(task="t00007", before=deep)),
            ("page in the middle, outcome failed", HistoryQuery(outcome="failed", before=deep)),
        ):
            board.history(query)
            t0 = time.perf_counter()
            for _ in range(20):
                page = board.history(query)
            took = (time.perf_counter() - t0) / 20
            print(f"history {name}: {len(page.runs)} runs in {took * 1000:.1f} ms")


if __name__ == "__main__":
    main()
