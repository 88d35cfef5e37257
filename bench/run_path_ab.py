"""Two cronctl revisions side by side on the run path, interleaved run by run.

On a shared 2-core VM the load changes from minute to minute, so measuring one revision after
the other compares the load, not the code. Here every round times each command once, in a
fresh order, so a burst of load falls on both revisions alike:

- the floor (`python -c pass`) and the bare Python spawner of run_due.py (100 x
  `Popen(sh -c true)`, 8 threads, log files);
- essential_run.py: the least a due run must do by design (the modules and guarantees it
  keeps: state, durable marks, logs, pipes, tails), without cronctl; and the same from one
  thread (a spawner of our own: one epoll over the commands' pipes and pidfds);
- per revision: `run` with 100 due `true` tasks, and with 10; the 100 all
  `without_overlapping`; and `run` with 100 tasks nothing due (startup.py's mix); for the
  newer revision also the due and quiet runs with `CRONCTL_CACHE_DIR=off` (the schedule
  parsed every time: what the cache saves; an older cronctl ignores the variable).

Both revisions must be installed with `pip install DIR` (not `-e`): an editable install's
finder runs in every Python start, `python -c pass` included, and flatters every ratio.

Each sample is the wall time and the CPU time of the whole process tree (the command and
every process it waited for), and each of `run`'s figures is also given as the difference
after - before round by round. To measure one device, install the same revision twice, the
device removed from one by a patch.

Before each timed `run` the state of the minute before is restored (untimed), as in
run_due.py and startup.py.

    python bench/run_path_ab.py --before OLD/cronctl --after NEW/cronctl [--rounds 15]
        [--out DIR]
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import statistics
import subprocess
import time
from pathlib import Path

import _common as c
import run_due
import startup

ESSENTIAL = "essential: the least a due run does (essential_run.py)"
ESSENTIAL_ONE = "essential, one thread: the same from one epoll (essential_run.py)"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", type=Path, required=True, help="the older cronctl script")
    p.add_argument("--after", type=Path, required=True, help="the newer cronctl script")
    p.add_argument("--rounds", type=int, default=15)
    c.add_out(p)
    p.add_argument("--keep", action="store_true")
    p.add_argument(
        "--allow-editable",
        action="store_true",
        help="measure editable installs anyway (their floor is inflated by the finder)",
    )
    args = p.parse_args()
    tools = {"before": c.Tool.find(args.before), "after": c.Tool.find(args.after)}
    with c.Sandbox(args.keep) as box:
        c.write_json(args.out, "run_path_ab", measure(tools, box, args.rounds, args.allow_editable))


def measure(
    tools: dict[str, c.Tool], box: c.Sandbox, rounds: int, allow_editable: bool = False
) -> dict[str, object]:
    info = c.machine(tools["after"], box.root)
    c.print_machine(info)
    before = c.machine(tools["before"], box.root)
    if (info["editable_install"] or before["editable_install"]) and not allow_editable:
        raise SystemExit(
            "bench: an editable install flatters the ratios to `python -c pass` (its finder"
            " runs in every Python start); install each revision with `pip install DIR` into its"
            " own venv, or pass --allow-editable"
        )
    schedules = {
        "due": run_due.schedule(box.root / "due.toml", None),
        "10 due": run_due.schedule(box.root / "due10.toml", None, tasks=10),
        "overlap": run_due.schedule(box.root / "overlap.toml", None, overlap=True),
        "quiet": c.write_schedule(
            box.root / "quiet.toml", [c.rare_task(i) for i in range(startup.TASKS)]
        ),
    }
    befores = {name: startup.BEFORE if name == "quiet" else run_due.BEFORE for name in schedules}
    nows = {name: startup.NOW if name == "quiet" else run_due.NOW for name in schedules}
    commands: dict[str, tuple[list[str], dict[str, str], Path | None, Path | None]] = {}
    python = str(tools["after"].python)
    spawn_logs = box.root / "spawner-logs"
    spawn_logs.mkdir()
    env0 = box.env()
    commands["floor: python -c pass"] = ([python, "-c", "pass"], env0, None, None)
    commands["spawner: 100x Popen(sh -c true), 8 threads"] = (
        [python, "-c", run_due.SPAWNER, str(spawn_logs), "8"],
        env0,
        None,
        None,
    )
    # The least a due run must do (essential_run.py), its state restored like cronctl's.
    essential = Path(__file__).resolve().parent / "essential_run.py"
    template, state = box.root / "template-essential", box.root / "state-essential"
    c.run_checked([python, str(essential), "setup", str(template)], env0)
    commands[ESSENTIAL] = ([python, str(essential), "run", str(state)], env0, template, state)
    commands[ESSENTIAL_ONE] = (
        [python, str(essential), "one-thread", str(state)],
        env0,
        template,
        state,
    )
    for rev, tool in tools.items():
        # A cache directory of each revision's own: an entry is named by the schedule's path,
        # so two revisions with the same cache (both keeping a quiet-minute hint) would
        # replace each other's entries, and each run would find the other's.
        cache = box.root / f"cache-{rev}"
        for name, path in schedules.items():
            template = box.root / f"template-{rev}-{name}"
            state = box.root / f"state-{rev}-{name}"
            locks = box.root / f"locks-{rev}-{name}"
            c.run_checked(
                [str(tool.cronctl), "run", "-f", str(path), "--now", befores[name]],
                box.env(state=template, locks=locks, CRONCTL_CACHE_DIR=str(cache)),
            )
            argv = [str(tool.cronctl), "run", "-f", str(path), "--now", nows[name]]
            env = box.env(state=state, locks=locks, CRONCTL_CACHE_DIR=str(cache))
            commands[f"{rev}: {name}"] = (argv, env, template, state)
            if rev == "after" and name in ("due", "quiet"):
                # The schedule cache's share: the same run parsing its file every time.
                env = box.env(state=state, locks=locks, CRONCTL_CACHE_DIR="off")
                commands[f"{rev}: {name}, no cache"] = (argv, env, template, state)
    times: dict[str, list[float]] = {label: [] for label in commands}
    # CPU time of the whole process tree (the command and what it waited for): on a loaded
    # machine it holds still where wall times do not.
    cpus: dict[str, list[float]] = {label: [] for label in commands}
    order = list(commands)
    for _ in range(rounds + 1):  # the first round warms caches and is not kept
        random.shuffle(order)
        for label in order:
            argv, env, template, state = commands[label]
            if template is not None and state is not None:
                shutil.rmtree(state, ignore_errors=True)
                shutil.copytree(template, state, symlinks=True)
            r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=False)
            elapsed, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus[label].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
            if done.returncode != 0:
                raise SystemExit(f"bench: {label} exited {done.returncode}")
            times[label].append(elapsed)
    for label in times:
        times[label], cpus[label] = times[label][1:], cpus[label][1:]
    floor = statistics.median(times["floor: python -c pass"])
    spawner = statistics.median(times["spawner: 100x Popen(sh -c true), 8 threads"])
    least = statistics.median(times[ESSENTIAL])
    rows = []
    print("\n| command | median ms | min ms | max ms | vs floor | vs spawner | vs essential "
          "| CPU ms |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for label, samples in times.items():
        med = statistics.median(samples)
        rows.append(
            {
                "label": label,
                "median_s": med,
                "min_s": min(samples),
                "max_s": max(samples),
                "times_s": samples,
                "vs_floor": med / floor,
                "vs_spawner": med / spawner,
                "vs_essential": med / least,
                "cpu_median_s": statistics.median(cpus[label]),
                "cpu_s": cpus[label],
            }
        )
        print(
            f"| {label} | {med * 1000:.1f} | {min(samples) * 1000:.1f} | "
            f"{max(samples) * 1000:.1f} | {med / floor:.2f}x | {med / spawner:.2f}x | "
            f"{med / least:.2f}x | {statistics.median(cpus[label]) * 1000:.1f} |"
        )
    print("\nafter - before, paired round by round: median (quartiles), ms")
    for name in schedules:
        pairs = list(zip(times[f"after: {name}"], times[f"before: {name}"], strict=True))
        cpu_pairs = list(zip(cpus[f"after: {name}"], cpus[f"before: {name}"], strict=True))
        print(f"  {name}: wall {_spread([a - b for a, b in pairs])}, "
              f"CPU {_spread([a - b for a, b in cpu_pairs])}")  # fmt: skip
    info["revisions"] = {rev: str(tool.cronctl) for rev, tool in tools.items()}
    return {"benchmark": "run_path_ab", "machine": info, "rounds": rounds, "timings": rows}


def _spread(diffs: list[float]) -> str:
    q1, med, q3 = statistics.quantiles(diffs) if len(diffs) > 1 else diffs * 3
    return f"{med * 1000:+.1f} ({q1 * 1000:+.1f}, {q3 * 1000:+.1f})"


if __name__ == "__main__":
    main()
