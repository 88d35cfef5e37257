"""`cronctl run` with 100 due tasks that each run `true`, against shell loops starting them.

The first target (docs/benchmarks.md): the median wall time of `cronctl run` at most 3x a shell
loop that starts the same 100 commands, measured in the same run; it is now stated against the
bare Python spawner this script also times (run_path_ab.py measures it).

Before every timed run the state of the minute before is restored (untimed), so each `run` finds
all 100 every-minute tasks due: it plans, records, starts 100 `/bin/sh -c true` in their own
process groups with captured output, waits, records each outcome (two committed transactions per
run: `running`, then the result), and exits 0.

    /tmp/venv/bin/python bench/run_due.py [--runs 15] [--out DIR]
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import _common as c

NOW = "2026-08-03T12:34:00Z"
BEFORE = "2026-08-03T12:33:00Z"
TASKS = 100
TARGET_RATIO = 3.0

# What any Python scheduler pays for the same work: 100 `sh -c true`, each in its own session with
# its output in a log file, 8 at a time; no state, no history. The floor for a Python `run`.
SPAWNER = """
import os, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
logs = sys.argv[1]
def one(i):
    fd = os.open(f"{logs}/{i}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    p = subprocess.Popen(["/bin/sh", "-c", "true"], stdin=subprocess.DEVNULL, stdout=fd,
                         stderr=fd, start_new_session=True)
    os.close(fd)
    return p.wait()
with ThreadPoolExecutor(int(sys.argv[2])) as pool:
    assert not any(pool.map(one, range(100)))
"""


def schedule(
    path: Path, max_parallel: int | None, overlap: bool = False, tasks: int = TASKS
) -> Path:
    header = f"[cronctl]\nmax_parallel = {max_parallel}\n\n" if max_parallel else ""
    guard = "without_overlapping = true\n" if overlap else ""
    tables = [
        f'[[task]]\nname = "due-{i:03d}"\ncommand = "true"\nevery_minute = true\n{guard}'
        for i in range(tasks)
    ]
    return c.write_schedule(path, tables, header)


def main() -> None:
    args = c.parser(__doc__.splitlines()[0], runs=15, warmup=2).parse_args()
    tool = c.Tool.find(args.cronctl)
    with c.Sandbox(args.keep) as box:
        c.write_json(
            args.out, "run_due", measure(tool, box, args.runs, args.warmup, not args.no_hyperfine)
        )


def measure(tool: c.Tool, box: c.Sandbox, runs: int, warmup: int, hyper: bool) -> dict[str, object]:
    info = c.machine(tool, box.root)
    c.print_machine(info)
    variants = {
        "default": schedule(box.root / "default.toml", None),
        "parallel100": schedule(box.root / "parallel100.toml", 100),
        "overlap": schedule(box.root / "overlap.toml", None, overlap=True),
    }
    state, locks = box.root / "state", box.root / "locks"
    env = box.env(state=state, locks=locks)
    templates: dict[str, Path] = {}
    for name, path in variants.items():
        templates[name] = box.root / f"template-{name}"
        # First sight at T-1m: every task runs once; the timed runs start from this state.
        c.run_checked(
            [str(tool.cronctl), "run", "-f", str(path), "--now", BEFORE],
            box.env(state=templates[name], locks=locks),
        )

    def restore(name: str) -> list[str]:
        return ["sh", "-c", f"rm -rf {shlex.quote(str(state))} && cp -a {templates[name]} {state}"]

    def run(name: str) -> list[str]:
        return [str(tool.cronctl), "run", "-f", str(variants[name]), "--now", NOW]

    for name in variants:
        check_all_ran(run(name), env, restore(name))

    loops = [
        ("sh loop: `true &` x100, wait", "for i in $(seq 100); do true & done; wait"),
        ("sh loop: `sh -c true &` x100, wait", "for i in $(seq 100); do sh -c true & done; wait"),
        ("sh loop: `sh -c true` x100, sequential", "for i in $(seq 100); do sh -c true; done"),
        ("sh loop: `true` x100, sequential (builtin)", "for i in $(seq 100); do true; done"),
    ]
    floor = c.time_commands(
        [("python -c pass (floor)", [str(tool.python), "-c", "pass"])],
        env,
        runs,
        warmup,
        use_hyperfine=hyper,
    )
    shells = c.time_commands(
        [(label, ["sh", "-c", script]) for label, script in loops],
        env,
        runs,
        warmup,
        use_hyperfine=hyper,
    )
    spawn_logs = box.root / "spawner-logs"
    spawn_logs.mkdir()
    spawner = c.time_commands(
        [
            (
                f"python: 100x Popen(sh -c true), {n} threads, log files (no cronctl)",
                [str(tool.python), "-c", SPAWNER, str(spawn_logs), str(n)],
            )
            for n in (8, 100)
        ],
        env,
        runs,
        warmup,
        use_hyperfine=hyper,
    )
    labels = {
        "default": "cronctl run, 100 due, max_parallel 8 (default)",
        "parallel100": "cronctl run, 100 due, max_parallel 100",
        "overlap": "cronctl run, 100 due, max_parallel 8, without_overlapping",
    }
    ours = []
    for name, label in labels.items():
        ours += c.time_commands(
            [(label, run(name))], env, runs, warmup, prepare=restore(name), use_hyperfine=hyper
        )
    base = shells[0]
    same = shells[1]
    timings = [*floor, *shells, *spawner, *ours]
    c.table(
        c.TIMING_HEADERS, c.timing_rows(timings, base), "100 due tasks (ratio to `true &` loop)"
    )
    verdicts = []
    print()
    for t in ours[:2]:
        r1, r2 = t.median / base.median, t.median / same.median
        ok1, ok2 = r1 <= TARGET_RATIO, r2 <= TARGET_RATIO
        verdicts.append(
            {
                "label": t.label,
                "ratio_true_loop": r1,
                "ratio_sh_c_loop": r2,
                "met_true_loop": ok1,
                "met_sh_c_loop": ok2,
            }
        )
        print(
            f"target: {t.label}: {c.ms(t.median)} ms = {r1:.2f}x the `true &` loop "
            f"({c.verdict(ok1)}), {r2:.2f}x the `sh -c true &` loop ({c.verdict(ok2)}); "
            f"limit {TARGET_RATIO:g}x"
        )
    per_task = (ours[0].median - floor[0].median) / TASKS
    print(
        f"\ncronctl run (default) over the interpreter floor, per due task: {per_task * 1e3:.2f} ms"
    )
    syscalls = count_syscalls(run("default"), env, restore("default"))
    return {
        "benchmark": "run_due",
        "syscalls_one_run": syscalls,
        "machine": info,
        "tasks": TASKS,
        "timings": [t.summary() for t in timings],
        "targets": verdicts,
        "per_task_ms_over_floor": per_task * 1000,
    }


def count_syscalls(run: list[str], env: dict[str, str], restore: list[str]) -> dict[str, int]:
    """One `run` under `strace -f -c`: how many syncs, process starts and lock waits it makes."""
    if shutil.which("strace") is None:
        print("\n(strace not installed: no system call counts)")
        return {}
    subprocess.run(restore, check=True)
    with tempfile.NamedTemporaryFile(suffix=".txt") as out:
        c.run_checked(["strace", "-f", "-c", "-o", out.name, *run], env)
        text = Path(out.name).read_text()
    counts = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[-1].isidentifier() and parts[3].isdigit():
            counts[parts[-1]] = int(parts[3])
    wanted = (
        "fdatasync",
        "fsync",
        "vfork",
        "clone",
        "clone3",
        "execve",
        "wait4",
        "futex",
        "openat",
    )
    rows = [[name, counts[name]] for name in wanted if name in counts]
    c.table(("system call", "calls"), rows, "One `cronctl run` with 100 due tasks (strace -f -c)")
    return counts


def check_all_ran(run: list[str], env: dict[str, str], restore: list[str]) -> None:
    """The timed command must do what we claim: 100 runs, all ok."""
    subprocess.run(restore, check=True)
    done = c.run_checked([*run, "--json"], env)
    runs = json.loads(done.stdout)["runs"]
    outcomes = {r["outcome"] for r in runs}
    if len(runs) != TASKS or outcomes != {"ok"}:
        sys.exit(f"bench: expected {TASKS} ok runs, got {len(runs)} with {outcomes}")


if __name__ == "__main__":
    main()
