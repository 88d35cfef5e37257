"""`cronctl run` start-up: 100 tasks, nothing due, state present, against `python -c pass`.

Target (docs/benchmarks.md): the median wall time of `cronctl run` at most 3x the median of a
bare `python -c pass` on the same interpreter, measured in the same run (it was 4x at first).

Each timed `run` finds the state of the minute before (restored, untimed, before every run), so
it does a real tick: read 100 tasks, open the database, plan the window (T-1m, T], find nothing
due, write the new window, exit. Then `python -X importtime` shows where the time goes.

    /tmp/venv/bin/python bench/startup.py [--runs 30] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import _common as c

NOW = "2026-08-03T12:34:00Z"  # a Monday; no task of the mix fires at 12:33 or 12:34 UTC
BEFORE = "2026-08-03T12:33:00Z"
TASKS = 100
TARGET_RATIO = 3.0

# Phases of one `run`, in process: argv = SCHEDULE ENTRY_MODULE ENTRY_FUNCTION MODULES...
# (the console script's own entry point, and every cronctl module `run` imports).
PROBE = """
import sys, time
schedule_path, module, function, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
t0 = time.perf_counter()
for name in names:
    __import__(name)
import cronctl
# `entry` leaves with os._exit, so nothing after it would run: time `main`, the same command.
function = "main" if function == "entry" else function
entry = getattr(__import__(module, fromlist=[function]), function)
t1 = time.perf_counter()
schedule = cronctl.load(schedule_path)
t2 = time.perf_counter()
sys.argv = ["cronctl", "run", "-f", schedule_path, "--now", "NOW"]
try:
    entry()
except SystemExit as exc:
    assert not exc.code, exc.code
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
""".replace("NOW", NOW)


def _importable(code: str) -> bool:
    """Whether the `import X` line can run here (optional reference modules may be absent)."""
    import importlib.util

    names = code.removeprefix("import ").split(", ")
    return all(importlib.util.find_spec(name.split(".")[0]) is not None for name in names)


def entry_point(script: Path) -> tuple[str, str]:
    """(module, function) the console script calls, from its `from M import F` line."""
    for line in script.read_text().splitlines():
        m = re.match(r"from (\S+) import (\w+)$", line.strip())
        if m:
            return m.group(1), m.group(2)
    sys.exit(f"bench: cannot find the entry point in {script}")


def main() -> None:
    args = c.parser(__doc__.splitlines()[0], runs=30, warmup=5).parse_args()
    tool = c.Tool.find(args.cronctl)
    with c.Sandbox(args.keep) as box:
        results = measure(tool, box, args)
        c.write_json(args.out, "startup", results)


def measure(tool: c.Tool, box: c.Sandbox, args: argparse.Namespace) -> dict[str, object]:
    runs, warmup, hyper = args.runs, args.warmup, not args.no_hyperfine
    info = c.machine(tool, box.root)
    c.print_machine(info)

    schedule = c.write_schedule(box.root / "schedules.toml", [c.rare_task(i) for i in range(TASKS)])
    template, state = box.root / "state-template", box.root / "state"
    env = box.env(state=template)
    first = [str(tool.cronctl), "run", "-f", str(schedule), "--now", BEFORE, "--json"]
    c.run_checked(first, env)  # first sight of every task: the state the timed runs start from
    env = box.env(state=state)
    restore = ["sh", "-c", f"rm -rf {shlex.quote(str(state))} && cp -a {template} {state}"]
    run = [str(tool.cronctl), "run", "-f", str(schedule), "--now", NOW]
    check_nothing_due(run, env, restore)

    floor_cmd = [str(tool.python), "-c", "pass"]
    commands = [
        ("python -c pass (floor)", floor_cmd),
        ("cronctl --version", [str(tool.cronctl), "--version"]),
        ("cronctl run (100 tasks, nothing due)", run),
    ]
    system = Path("/usr/bin/python3")
    if system.exists() and system.resolve() != tool.python.resolve():
        commands.append(
            ("/usr/bin/python3 -c pass (system, reference)", [str(system), "-c", "pass"])
        )
    cold = ["env", "-u", "PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE=1", *run]
    commands.append(("cronctl run, no bytecode for cronctl's own modules", cold))
    timings = c.time_commands(commands, env, runs, warmup, prepare=restore, use_hyperfine=hyper)
    floor, tick = timings[0], timings[2]
    c.table(c.TIMING_HEADERS, c.timing_rows(timings, floor), "Start-up (wall time, whole process)")
    ratio = tick.median / floor.median
    ok = ratio <= TARGET_RATIO
    print(
        f"\ntarget: run median <= {TARGET_RATIO:g}x floor: {ms(tick.median)} ms = {ratio:.2f}x "
        f"{ms(floor.median)} ms (limit {ms(floor.median * TARGET_RATIO)} ms): {c.verdict(ok)}"
    )
    fastest = f"{ms(tick.min)} ms = {tick.min / floor.min:.2f}x {ms(floor.min)} ms"
    print(f"        (fastest runs: {fastest})")

    run_imports = c.importtime(tool.python, [str(tool.cronctl), *run[1:]], env, restore)
    version_imports = c.importtime(tool.python, [str(tool.cronctl), "--version"], env)
    floor_imports = c.importtime(tool.python, ["-c", "pass"], env)
    floor_names = {line.name for line in floor_imports}
    report_imports("cronctl run", run_imports, floor_names)
    report_imports("cronctl --version", version_imports, floor_names)

    ours = sorted({line.name for line in run_imports if line.name.startswith("cronctl")})
    attribution = attribute(tool, env, floor_cmd, ours, runs, warmup, hyper)
    phases = probe_phases(tool, env, schedule, ours, restore, runs)

    return {
        "benchmark": "startup",
        "machine": info,
        "tasks": TASKS,
        "now": NOW,
        "timings": [t.summary() for t in timings],
        "target": {"ratio_limit": TARGET_RATIO, "ratio": ratio, "met": ok},
        "attribution": [t.summary() for t in attribution],
        "phases_ms": phases,
        "importtime": {
            "run": [line_json(x) for x in run_imports],
            "version": [line_json(x) for x in version_imports],
            "floor": [line_json(x) for x in floor_imports],
        },
    }


def check_nothing_due(run: list[str], env: dict[str, str], restore: list[str]) -> None:
    """The timed command must be the tick we claim: exit 0, nothing run."""
    subprocess.run(restore, check=True)
    done = c.run_checked([*run, "--json"], env)
    runs = json.loads(done.stdout)["runs"]
    if runs:
        sys.exit(f"bench: expected nothing due at {NOW}, got {[r['task'] for r in runs]}")


def report_imports(title: str, lines: list[c.ImportLine], floor: set[str]) -> None:
    """Top cumulative imports, self time per package, and what cronctl pulls in from outside."""
    new = [x for x in lines if x.name not in floor]
    total = sum(x.self_us for x in new)
    print(
        f"\n{title}: python -X importtime (median of 5 warm runs): {len(new)} modules beyond the "
        f"floor's {len(floor)}, {total / 1000:.1f} ms of import time (importtime inflates it)"
    )
    rows = [
        [f"{'  ' * x.depth}{x.name}", f"{x.cumulative_us / 1000:.1f}", f"{x.self_us / 1000:.1f}"]
        for x in c.top_cumulative(new, 25)
    ]
    c.table(
        ("module (indent = depth)", "cumulative ms", "self ms"), rows, f"{title}: top 25 cumulative"
    )
    packages = [[name, n, f"{us / 1000:.1f}"] for name, n, us in c.self_by_package(new)[:12]]
    c.table(
        ("top-level package", "modules", "self ms (sum)"),
        packages,
        f"{title}: self time by package",
    )
    foreign = c.foreign_children(new, "cronctl", 300)
    if foreign:
        rows = [[imp, mod, f"{us / 1000:.1f}"] for imp, mod, us in foreign]
        c.table(
            ("imported by", "module", "cumulative ms"),
            rows,
            f"{title}: what cronctl's modules import from outside cronctl (>= 0.3 ms)",
        )


def attribute(
    tool: c.Tool,
    env: dict[str, str],
    floor_cmd: list[str],
    ours: list[str],
    runs: int,
    warmup: int,
    hyper: bool,
) -> list[c.Timing]:
    """Real (not importtime) wall cost of importing each suspect, over the floor."""
    py = str(tool.python)
    suspects = [
        ("typer", "import typer"),
        ("cronctl (library API)", "import cronctl"),
        ("cronctl.cli.app", "import cronctl.cli.app"),
        ("every cronctl module `run` imports", "import " + ", ".join(ours)),
        ("dataclasses", "import dataclasses"),
        ("secrets", "import secrets"),
        ("concurrent.futures", "import concurrent.futures"),
        ("subprocess", "import subprocess"),
        ("sqlite3", "import sqlite3"),
        ("tomllib", "import tomllib"),
        ("json", "import json"),
        # filelock is no longer a dependency (the overlap lock is fcntl.flock): a reference row.
        ("filelock", "import filelock"),
    ]
    suspects = [(label, code) for label, code in suspects if _importable(code)]
    commands = [("python -c pass (floor)", floor_cmd)]
    commands += [(label, [py, "-c", code]) for label, code in suspects]
    timings = c.time_commands(commands, env, runs, warmup, use_hyperfine=hyper)
    floor = timings[0]
    rows = [
        [
            t.label,
            c.ms(t.median),
            f"{c.ms(t.median - floor.median)}",
            c.ms(t.min),
            f"{c.ms(t.min - floor.min)}",
        ]
        for t in timings
    ]
    c.table(
        ("python -c 'import X'", "median ms", "median over floor", "min ms", "min over floor"),
        rows,
        "Import cost, measured as whole processes (not additive: modules are shared)",
    )
    return timings


def probe_phases(
    tool: c.Tool,
    env: dict[str, str],
    schedule: Path,
    ours: list[str],
    restore: list[str],
    runs: int,
) -> dict[str, float]:
    """In one process: imports, loading 100 tasks, and the whole `main()` of `run`."""
    samples: list[list[float]] = []
    for i in range(runs + 2):
        subprocess.run(restore, check=True)
        argv = [str(tool.python), "-c", PROBE, str(schedule), *entry_point(tool.cronctl), *ours]
        out = c.run_checked(argv, env).stdout
        if i >= 2:
            samples.append([float(x) for x in out.split()])
    med = [sorted(col)[len(col) // 2] * 1000 for col in zip(*samples, strict=True)]
    phases = {"imports": med[0], "load_100_tasks": med[1], "main_run": med[2]}
    rows = [
        ["import every cronctl module `run` imports", f"{med[0]:.1f}"],
        ["cronctl.load(): read + validate 100 tasks", f"{med[1]:.1f}"],
        ["entry point: parse argv + load again + state + plan + exit", f"{med[2]:.1f}"],
    ]
    c.table(("phase (in process, median)", "ms"), rows, "Where a `run` spends its time")
    return phases


def line_json(line: c.ImportLine) -> dict[str, object]:
    return {
        "name": line.name,
        "depth": line.depth,
        "self_us": line.self_us,
        "cum_us": line.cumulative_us,
    }


ms = c.ms

if __name__ == "__main__":
    main()
