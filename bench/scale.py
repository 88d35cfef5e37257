"""`cronctl check` and `cronctl list` at 10, 100, 1,000 and 10,000 tasks.

Targets (docs/benchmarks.md): 10,000 tasks within 3 s; cost linear (10,000 at most 12x 1,000).

The tasks mix ten schedule keys (cron, daily_at, hourly_at, weekly_on, monthly_on, twice_daily,
yearly, every_minutes, weekdays ...) and six time zones (UTC, a fixed offset and four IANA zones
with daylight saving, so `check` has DST warnings to find and report).

    /tmp/venv/bin/python bench/scale.py [--runs 10] [--out DIR]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import _common as c

NOW = "2026-08-03T12:34:00Z"
SIZES = (10, 100, 1_000, 10_000)
LIMIT_S = 3.0
LINEAR_LIMIT = 12.0


def main() -> None:
    args = c.parser(__doc__.splitlines()[0], runs=10, warmup=1).parse_args()
    tool = c.Tool.find(args.cronctl)
    with c.Sandbox(args.keep) as box:
        c.write_json(
            args.out, "scale", measure(tool, box, args.runs, args.warmup, not args.no_hyperfine)
        )


def measure(tool: c.Tool, box: c.Sandbox, runs: int, warmup: int, hyper: bool) -> dict[str, object]:
    info = c.machine(tool, box.root)
    c.print_machine(info)
    env = box.env()
    files = {}
    for n in SIZES:
        files[n] = c.write_schedule(
            box.root / f"tasks-{n}.toml", [c.rare_task(i) for i in range(n)]
        )
        warnings = count_problems(tool, files[n], env)
        print(f"{n:>6} tasks: {files[n].stat().st_size:>9,} bytes, check finds {warnings} warnings")

    commands = [("python -c pass (floor)", [str(tool.python), "-c", "pass"])]
    for command in ("check", "list"):
        for n in SIZES:
            argv = [str(tool.cronctl), command, "-f", str(files[n]), "--now", NOW]
            commands.append((f"{command} {n}", argv))
    timings = c.time_commands(commands, env, runs, warmup, use_hyperfine=hyper)
    by_label = {t.label: t for t in timings}
    rss = {t.label: c.max_rss_kib(commands[i][1], env) for i, t in enumerate(timings) if i}

    rows = [
        [
            t.label,
            c.ms(t.median),
            c.ms(t.min),
            c.ms(t.max),
            len(t.times),
            f"{rss[t.label] / 1024:.1f}" if t.label in rss else "-",
        ]
        for t in timings
    ]
    c.table(
        ("command", "median ms", "min ms", "max ms", "runs", "max RSS MiB"),
        rows,
        "check and list at scale",
    )

    targets = []
    print()
    for command in ("check", "list"):
        big, mid = by_label[f"{command} 10000"], by_label[f"{command} 1000"]
        growth = big.median / mid.median
        ok_time, ok_growth = big.median <= LIMIT_S, growth <= LINEAR_LIMIT
        per_task_ms = (big.median - mid.median) / 9_000 * 1000
        targets.append(
            {
                "command": command,
                "median_10000_s": big.median,
                "growth_1000_to_10000": growth,
                "met_time": ok_time,
                "met_growth": ok_growth,
                "marginal_ms_per_task": per_task_ms,
            }
        )
        print(
            f"target: {command} 10,000 tasks in {big.median:.2f} s (limit {LIMIT_S:g} s): "
            f"{c.verdict(ok_time)}; "
            f"10,000 / 1,000 = {growth:.1f}x (limit {LINEAR_LIMIT:g}x): {c.verdict(ok_growth)}; "
            f"{per_task_ms:.3f} ms per extra task"
        )
    return {
        "benchmark": "scale",
        "machine": info,
        "now": NOW,
        "timings": [t.summary() for t in timings],
        "max_rss_kib": rss,
        "targets": targets,
    }


def count_problems(tool: c.Tool, path: Path, env: dict[str, str]) -> int:
    """The file must be valid (warnings allowed): a benchmark of error messages is not this one."""
    done = c.run_checked(
        [str(tool.cronctl), "check", "-f", str(path), "--now", NOW, "--format", "json"], env
    )
    data = json.loads(done.stdout)
    errors = [p for p in data["problems"] if p["severity"] == "error"]
    if errors:
        sys.exit(f"bench: {path} has errors: {errors[:3]}")
    return len(data["problems"])


if __name__ == "__main__":
    main()
