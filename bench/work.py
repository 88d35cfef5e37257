"""`cronctl work` with 1,000 tasks: memory, and start latency from the minute boundary.

Targets (docs/benchmarks.md): max RSS at most 60 MB; start latency, median at most 15 ms and
worst at most 40 ms over at least 5 minute boundaries.

The schedule holds 1,000 tasks: a few (`--due`, 5) due every minute, whose command's first
instruction is `date +%s.%N` appended to a file of its own; the rest fire at most once a day, each
at a minute of its own. Latency = that timestamp minus the minute boundary (wall clock, the same
clock cron uses). It runs for `--boundaries` + 1 minutes (about 6 minutes by default), then
sends SIGTERM and expects a clean exit.

    /tmp/venv/bin/python bench/work.py [--boundaries 5] [--out DIR]
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _common as c

RSS_LIMIT_MB = 60.0
SKIP_NEAR_START_S = 3.0  # a boundary this soon after start-up is not a steady-state tick


def main() -> None:
    p = c.parser(__doc__.splitlines()[0], runs=None)
    p.add_argument("--boundaries", type=int, default=5, help="minute boundaries to measure (5)")
    p.add_argument("--tasks", type=int, default=1000, help="tasks in the schedule (1000)")
    p.add_argument("--due", type=int, default=5, help="tasks due every minute (5)")
    args = p.parse_args()
    tool = c.Tool.find(args.cronctl)
    with c.Sandbox(args.keep) as box:
        c.write_json(args.out, "work", measure(tool, box, args.tasks, args.due, args.boundaries))


def measure(
    tool: c.Tool, box: c.Sandbox, tasks: int, due: int, boundaries: int
) -> dict[str, object]:
    info = c.machine(tool, box.root)
    c.print_machine(info)
    stamps = box.root / "stamps"
    stamps.mkdir()
    tables = [
        f'[[task]]\nname = "every-minute-{i}"\n'
        f'command = "date +%s.%N >> {stamps}/{i}"\nevery_minute = true\n'
        for i in range(due)
    ]
    tables += [c.rare_task(i, keys=c.SELDOM) for i in range(due, tasks)]
    schedule = c.write_schedule(box.root / "schedules.toml", tables)
    env = box.env()
    c.run_checked([str(tool.cronctl), "check", "-f", str(schedule)], env)

    log = (box.root / "work.log").open("w")
    started = time.time()
    proc = subprocess.Popen(
        [str(tool.cronctl), "work", "-f", str(schedule), "--grace", "10"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    print(
        f"\ncronctl work pid {proc.pid}: {tasks} tasks, {due} due every minute; "
        f"measuring {boundaries} boundaries (about {boundaries + 1} minutes)"
    )
    samples: list[dict[str, object]] = []
    peak = {"VmHWM": 0, "VmRSS": 0}
    try:
        first = (int(started) // 60 + 1) * 60
        if first - started < SKIP_NEAR_START_S:
            first += 60
        last = first + 60 * (boundaries - 1)
        while time.time() < last + 20:
            if proc.poll() is not None:
                sys.exit(
                    f"bench: cronctl work exited {proc.returncode}; see {box.root / 'work.log'}"
                )
            status = c.proc_status_kib(proc.pid)
            peak = {k: max(peak[k], status.get(k, 0)) for k in peak}
            time.sleep(1.0)
        status = c.proc_status_kib(proc.pid)
        peak = {k: max(peak[k], status.get(k, 0)) for k in peak}
        cpu_s = cpu_seconds(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        log.close()
    if code != 0:
        sys.exit(f"bench: cronctl work exited {code} on SIGTERM; see {box.root / 'work.log'}")

    boundary_set = [first + 60 * k for k in range(boundaries)]
    for i in range(due):
        path = stamps / str(i)
        values = [float(x) for x in path.read_text().split()] if path.exists() else []
        for b in boundary_set:
            hits = [v - b for v in values if b <= v < b + 60]
            samples.append({"task": i, "boundary": b, "latency_s": hits[0] if hits else None})
    missing = [s for s in samples if s["latency_s"] is None]
    latencies = [float(s["latency_s"]) for s in samples if s["latency_s"] is not None]  # type: ignore[arg-type]

    rows = []
    for b in boundary_set:
        at = [
            float(s["latency_s"])
            for s in samples
            if s["boundary"] == b and s["latency_s"] is not None
        ]  # type: ignore[arg-type]
        rows.append(
            [
                time.strftime("%H:%M:%S", time.gmtime(b)),
                len(at),
                c.ms(min(at)) if at else "-",
                c.ms(statistics.median(at)) if at else "-",
                c.ms(max(at)) if at else "-",
            ]
        )
    c.table(
        ("boundary (UTC)", "tasks", "first ms", "median ms", "worst ms"),
        rows,
        "Start latency: minute boundary -> the task's first instruction",
    )
    hwm_mb = peak["VmHWM"] / 1024
    ok_rss = hwm_mb <= RSS_LIMIT_MB
    summary = [
        [
            "latency median (all tasks, all boundaries)",
            f"{c.ms(statistics.median(latencies))} ms" if latencies else "-",
        ],
        ["latency worst", f"{c.ms(max(latencies))} ms" if latencies else "-"],
        ["latency best", f"{c.ms(min(latencies))} ms" if latencies else "-"],
        ["runs missing (due, no timestamp)", str(len(missing))],
        ["max RSS of `cronctl work` (VmHWM)", f"{hwm_mb:.1f} MiB"],
        ["RSS at the end (VmRSS)", f"{peak['VmRSS'] / 1024:.1f} MiB"],
        [
            "CPU time of `cronctl work` over the run",
            f"{cpu_s:.2f} s in {time.time() - started:.0f} s",
        ],
    ]
    c.table(("measure", "value"), summary, f"cronctl work, {tasks} tasks")
    print(f"\ntarget: max RSS {hwm_mb:.1f} MiB (limit {RSS_LIMIT_MB:g} MB): {c.verdict(ok_rss)}")
    if missing:
        print(f"warning: {len(missing)} due runs left no timestamp")
    return {
        "benchmark": "work",
        "machine": info,
        "tasks": tasks,
        "due_every_minute": due,
        "boundaries": boundary_set,
        "samples": samples,
        "latency_median_s": statistics.median(latencies) if latencies else None,
        "latency_worst_s": max(latencies) if latencies else None,
        "missing": len(missing),
        "vm_hwm_kib": peak["VmHWM"],
        "vm_rss_kib": peak["VmRSS"],
        "cpu_s": cpu_s,
        "target": {"rss_limit_mb": RSS_LIMIT_MB, "met": ok_rss},
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process (its own, not its children's)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
