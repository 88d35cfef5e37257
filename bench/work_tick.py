"""`work`'s tick in process: the minute boundary -> the call that starts a due task's command.

bench/work.py measures the whole path (down to the command's first instruction) but needs a
minute per boundary, and on a shared machine its few samples carry the load of the moment.
This runs the real Worker loop (its lead, its plan ahead, its wait for the boundary, the tick
thread, run_once) in this process with a clock shifted forward between ticks, so a boundary
comes every ~0.7 s. Each due task's start is timed just before runner.start (Popen); the time
from there to the command's first instruction (sh, then `date`) is not in these figures.

    /tmp/venv/bin/python bench/work_tick.py [--ticks 30] [--tasks 1000] [--due 5] [--out DIR]
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import _common as c

import cronctl
from cronctl.coord import open_coordinator
from cronctl.core.minutes import minute_floor
from cronctl.edge.process.runner import start as start_command
from cronctl.edge.schedfiles import load_paths
from cronctl.run.context import RunContext, World
from cronctl.run.work import Worker

REAL_LEAD_S = 0.5  # how long, in real time, each wait for a boundary is cut to


def main() -> None:
    p = c.parser(__doc__.splitlines()[0], runs=None)
    p.add_argument("--ticks", type=int, default=30, help="boundaries measured (30)")
    p.add_argument("--tasks", type=int, default=1000, help="tasks in the schedule (1000)")
    p.add_argument("--due", type=int, default=5, help="tasks due every minute (5)")
    p.add_argument("--date", action="store_true", help="also time each command's `date`")
    args = p.parse_args()
    with c.Sandbox(args.keep) as box:
        c.write_json(
            args.out, "work_tick", measure(box.root, args.tasks, args.due, args.ticks, args.date)
        )


def measure(root: Path, tasks: int, due: int, ticks: int, date: bool = False) -> dict[str, Any]:
    stamps = root / "stamps"
    stamps.mkdir()
    tables = [
        f'[[task]]\nname = "every-minute-{i}"\n'
        f'command = "{f"date +%s.%N >> {stamps}/{i}" if date else "true"}"\nevery_minute = true\n'
        for i in range(due)
    ]
    tables += [c.rare_task(i, keys=c.SELDOM) for i in range(due, tasks)]
    path = c.write_schedule(root / "schedules.toml", tables)
    shift = [timedelta(0)]
    starts: list[tuple[datetime, list[float]]] = []
    real: list[float] = []  # each tick's boundary on the real clock (`date` reads that one)
    lock = threading.Lock()
    stop = threading.Event()

    def clock() -> datetime:
        return datetime.now(UTC) + shift[0]

    def start(spec: Any) -> Any:
        now = clock()
        boundary = minute_floor(now)
        with lock:
            if not starts or starts[-1][0] != boundary:
                starts.append((boundary, []))
                real.append((boundary - shift[0]).timestamp())
            starts[-1][1].append((now - boundary).total_seconds())
            if len(starts) > ticks:
                stop.set()  # ends the wait in progress
                worker.request_stop(15)
        return start_command(spec)

    def wait(seconds: float) -> bool:
        if seconds <= 1.0:
            return stop.wait(seconds)
        # The tick in flight starts its tasks by the clock it began with; then jump ahead.
        began = time.monotonic()
        while starts and len(starts[-1][1]) < due and time.monotonic() - began < 5:
            time.sleep(0.01)
        if stop.wait(0.2):
            return True
        shift[0] += timedelta(seconds=seconds - (time.monotonic() - began) - REAL_LEAD_S)
        return stop.wait(REAL_LEAD_S)

    (root / "state").mkdir(mode=0o700)
    locks = root / "state" / "locks"
    ctx = RunContext(
        state_dir=root / "state",
        lock_dir=locks,
        host="bench",
        env=dict(os.environ),
        coord=open_coordinator(None, locks, host="bench", pid=os.getpid()),
        world=World(start=start),
    )
    worker = Worker(
        load=lambda: load_paths([path]),
        paths=lambda: [path],
        ctx=ctx,
        report=lambda _report: None,
        grace_s=5,
        clock=clock,
        wait=wait,
    )
    load_before = os.getloadavg()
    worker.serve()
    load_after = os.getloadavg()
    steady = starts[1 : ticks + 1]  # the first tick records 1,000 states for the first time
    firsts = [min(v) for _, v in steady]
    every = [x for _, v in steady for x in v]
    rows = [
        ["first tick after start-up", c.ms(min(starts[0][1])), "-", "-"],
        [
            f"first start of each tick ({len(firsts)})",
            c.ms(statistics.median(firsts)),
            c.ms(max(firsts)),
            c.ms(min(firsts)),
        ],
        [
            f"every start ({len(every)})",
            c.ms(statistics.median(every)),
            c.ms(max(every)),
            c.ms(min(every)),
        ],
    ]
    dates = _date_latencies(stamps, due, real[1 : ticks + 1]) if date else []
    if dates:
        rows.append(
            [
                f"every `date` ({len(dates)})",
                c.ms(statistics.median(dates)),
                c.ms(max(dates)),
                c.ms(min(dates)),
            ]
        )
    c.table(
        ("boundary -> start (ms)", "median", "worst", "best"), rows, f"{tasks} tasks, {due} due"
    )
    print(f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    return {
        "benchmark": "work_tick",
        "revision": c.source_revision(),  # of this checkout; the code measured is cronctl_path's
        "cronctl_path": str(Path(cronctl.__file__).parent),
        "python": sys.version.split()[0],
        "load_before": load_before,
        "load_after": load_after,
        "tasks": tasks,
        "due_every_minute": due,
        "first_tick_s": min(starts[0][1]),
        "first_start_s": firsts,
        "every_start_s": every,
        "first_start_median_s": statistics.median(firsts),
        "every_start_median_s": statistics.median(every),
        "date_s": dates,
        "date_median_s": statistics.median(dates) if dates else None,
    }


def _date_latencies(stamps: Path, due: int, boundaries: list[float]) -> list[float]:
    """Each due command's `date` stamp minus its tick's boundary (real clock), in seconds."""
    values = []
    for i in range(due):
        path = stamps / str(i)
        values += [float(x) for x in path.read_text().split()] if path.exists() else []
    return [v - b for b in boundaries for v in values if b <= v < b + REAL_LEAD_S]


if __name__ == "__main__":
    main()
