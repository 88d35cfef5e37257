"""Soak with real processes: one simulated day of `cronctl run --now T` on two machines.

The slow variant of the soak test in tests/soak, with real processes. Two "machines" (two state
dirs, one shared lock dir, `lock_dir_shared = true`) run 10 tasks mixing on_one_server,
without_overlapping and the three misfire policies. The simulated clock walks through one day
(1,440 minutes; 2026-03-29, the day Europe/Berlin springs forward) in random steps; at each step
both machines start `cronctl run --now T` at the same time. Some ticks are late (T + seconds),
doubled (the same T twice), or step back a few minutes; machine B is down for three hours; and
some cronctl processes are killed with SIGKILL at a random moment of their run.

Each task's command appends "$CRONCTL_TASK $CRONCTL_OCCURRENCE $CRONCTL_RUN_ID" to its machine's
ledger first, then may sleep. Afterwards, from the ledgers and each machine's state.db:

1. no on_one_server occurrence ran twice across machines;
2. no occurrence ran twice on one machine;
3. every ledger run id is a row of that machine's history, for the same task and occurrence;
4. every run recorded `ok` left its ledger line (nothing recorded as run that did not run);
5. both databases pass PRAGMA integrity_check.

Exit 0 when all hold, 1 otherwise.

`--postgresql`: the same day with coordination on a PostgreSQL the script starts (as
tests/coord does): each machine has its own, unshared lock_dir, so only the store keeps them
apart, and the store itself is crashed and restarted (`pg_ctl restart -m immediate`) at
random steps while runs are in flight.

    /tmp/venv/bin/python bench/soak_processes.py [--seed 6] [--postgresql] [--out DIR]
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import _common as c

DAY = datetime(2026, 3, 29, tzinfo=UTC)
LEDGER = 'echo "$CRONCTL_TASK $CRONCTL_OCCURRENCE $CRONCTL_RUN_ID" >> "$SOAK_LEDGER"'

# name, schedule, guards and policy, sleep after the ledger line (s)
TASKS = (
    ("claim-every-minute", "every_minute = true", "on_one_server = true", 0.0),
    ("claim-catch-up-5m", "every_minutes = 5", 'on_one_server = true\nmisfire = "catch-up"', 0.0),
    (
        "overlap-skip-3m",
        'cron = "*/3 * * * *"',
        'without_overlapping = true\nmisfire = "skip"',
        0.4,
    ),
    (
        "both-guards-hourly",
        "hourly_at = 7",
        'on_one_server = true\nwithout_overlapping = true\nmisfire = "catch-up"',
        0.2,
    ),
    (
        "overlap-every-minute",
        "every_minute = true",
        'without_overlapping = "2m"\nmisfire = "skip"',
        0.3,
    ),
    (
        "berlin-daily",
        'daily_at = "02:30"\ntimezone = "Europe/Berlin"',
        "on_one_server = true",
        0.0,
    ),
    ("local-every-2m", 'cron = "*/2 * * * *"', "", 0.0),
    (
        "grace-catch-up-10m",
        "every_minutes = 10",
        'misfire = "catch-up"\nmisfire_grace = "20m"',
        0.0,
    ),
    ("claim-skip-twice", "twice_daily = [6, 18]", 'on_one_server = true\nmisfire = "skip"', 0.0),
    (
        "claim-overlap-catch-up",
        "every_minute = true",
        'on_one_server = true\nwithout_overlapping = true\nmisfire = "catch-up"',
        0.1,
    ),
)
ON_ONE_SERVER = {name for name, _, guards, _ in TASKS if "on_one_server" in guards}
DOWN = (DAY + timedelta(hours=8), DAY + timedelta(hours=11))  # machine B is off


def schedule_file(path: Path) -> Path:
    tables = []
    for name, when, guards, sleep in TASKS:
        command = LEDGER + (f"; sleep {sleep}" if sleep else "")
        tables.append(
            f"[[task]]\nname = \"{name}\"\ncommand = '{command}'\n{when}\n{guards}\n".replace(
                "\n\n", "\n"
            )
        )
    return c.write_schedule(path, tables, "[cronctl]\nlock_dir_shared = true\n\n")


def main() -> None:
    p = c.parser(__doc__.splitlines()[0], runs=None)
    p.add_argument("--seed", type=int, default=6)
    p.add_argument("--mean-step", type=float, default=4.0, help="mean minutes between ticks (4)")
    p.add_argument("--kill-rate", type=float, default=0.1, help="share of runs killed (0.1)")
    p.add_argument("--postgresql", action="store_true", help="coordinate on a PostgreSQL")
    p.add_argument("--restart-rate", type=float, default=0.03, help="store crashes per step")
    args = p.parse_args()
    tool = c.Tool.find(args.cronctl)
    with c.Sandbox(args.keep, prefix="cronctl-soak-") as box:
        store = _start_store(box) if args.postgresql else None
        try:
            result = soak(tool, box, args.seed, args.mean_step, args.kill_rate,
                          store, args.restart_rate)  # fmt: skip
        finally:
            if store is not None:
                store.stop("immediate")
        c.write_json(args.out, "soak_processes_pg" if args.postgresql else "soak_processes", result)
    sys.exit(0 if result["ok"] else 1)


def _start_store(box: c.Sandbox) -> Any:
    """A PostgreSQL in the sandbox, as the tests start theirs (tests/coord/conftest.py)."""
    import os
    import shutil

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "coord"))
    from conftest import PgServer, _bindir

    bindir = _bindir()
    if bindir is None:
        sys.exit("soak: --postgresql needs PostgreSQL installed (initdb not found)")
    root = box.root / "pg"
    root.mkdir()
    if os.geteuid() == 0:
        shutil.chown(box.root, "postgres")  # the server must reach its directory
        shutil.chown(root, "postgres", "postgres")
    server = PgServer(bindir, root, durable=True)
    server.init()
    server.start()
    return server


def soak(
    tool: c.Tool,
    box: c.Sandbox,
    seed: int,
    mean_step: float,
    kill_rate: float,
    store: Any = None,
    restart_rate: float = 0.0,
) -> dict:
    info = c.machine(tool, box.root)
    c.print_machine(info)
    rng = random.Random(seed)
    schedule = schedule_file(box.root / "schedules.toml")
    c.run_checked([str(tool.cronctl), "check", "-f", str(schedule)], box.env())
    locks = box.root / "locks"
    coordination = {"CRONCTL_COORDINATION": store.url()} if store is not None else {}
    restarts = 0
    machines = {
        name: {
            "state": box.root / f"state-{name}",
            "ledger": box.root / f"ledger-{name}.txt",
            "ticks": 0,
            "killed": 0,
            "exit_codes": Counter(),
        }
        for name in ("A", "B")
    }
    for m in machines.values():
        m["ledger"].touch()

    started = time.monotonic()
    minute = DAY
    steps = 0
    print(f"\nseed {seed}: simulating {DAY:%Y-%m-%d} on machines A and B ...")
    while minute < DAY + timedelta(days=1):
        steps += 1
        procs = []
        for name, m in machines.items():
            if name == "B" and DOWN[0] <= minute < DOWN[1]:
                continue
            at = minute
            roll = rng.random()
            if roll < 0.15:
                at += timedelta(seconds=rng.randint(1, 59))  # late tick
            elif roll < 0.18:
                at -= timedelta(minutes=rng.randint(1, 3))  # clock stepped back
            repeats = 2 if rng.random() < 0.08 else 1  # doubled tick
            # With a store, each machine's lock_dir is its own: only the store keeps them apart.
            lock_dir = box.root / f"locks-{name}" if store is not None else locks
            for _ in range(repeats):
                procs.append(
                    (name, at, start_run(tool, box, schedule, m, lock_dir, at, coordination))
                )
        if store is not None and rng.random() < restart_rate:
            time.sleep(rng.uniform(0.0, 0.3))  # while the runs are in flight
            store.restart_immediate()
            restarts += 1
        kill_at = {
            i: time.monotonic() + rng.uniform(0.05, 0.6)
            for i in range(len(procs))
            if rng.random() < kill_rate
        }
        while any(p.poll() is None for _, _, p in procs):
            now = time.monotonic()
            for i, deadline in list(kill_at.items()):
                if now >= deadline:
                    proc = procs[i][2]
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGKILL)
                        machines[procs[i][0]]["killed"] += 1
                    del kill_at[i]
            time.sleep(0.01)
        for name, _, proc in procs:
            machines[name]["ticks"] += 1
            machines[name]["exit_codes"][proc.returncode] += 1
        minute += timedelta(minutes=max(1, round(rng.expovariate(1 / mean_step))))
        if steps % 50 == 0:
            elapsed = time.monotonic() - started
            print(f"  {minute:%H:%M} simulated after {elapsed:.0f} s, {steps} steps")
    time.sleep(1.0)  # tasks orphaned by a killed cronctl finish their sleep
    elapsed = time.monotonic() - started
    result = check_invariants(info, machines, seed, steps, elapsed)
    if store is not None:
        result["postgresql"] = {"store_restarts": restarts}
        print(f"store: PostgreSQL, crashed and restarted {restarts} times")
    return result


def start_run(
    tool: c.Tool,
    box: c.Sandbox,
    schedule: Path,
    m: dict,
    locks: Path,
    at: datetime,
    extra: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    env = box.env(state=m["state"], locks=locks, SOAK_LEDGER=str(m["ledger"]), **(extra or {}))
    now = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    return subprocess.Popen(
        [str(tool.cronctl), "run", "-f", str(schedule), "--now", now],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def read_ledger(path: Path) -> list[tuple[str, str, str]]:
    entries = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            entries.append((parts[0], parts[1], parts[2]))
    return entries


def check_invariants(info: dict, machines: dict, seed: int, steps: int, elapsed: float) -> dict:
    failures: list[tuple[str, str]] = []  # (invariant, what broke it)
    ledgers = {name: read_ledger(m["ledger"]) for name, m in machines.items()}
    outcomes: dict[str, Counter[str]] = {}

    # 1. on_one_server: at most once across machines
    across = Counter(
        (t, o) for entries in ledgers.values() for t, o, _ in entries if t in ON_ONE_SERVER
    )
    twice = [k for k, n in across.items() if n > 1]
    if twice:
        failures.append(("cross", f"on_one_server occurrences run more than once: {twice[:5]}"))
    for name, m in machines.items():
        entries = ledgers[name]
        # 2. at most once per machine
        per = Counter((t, o) for t, o, _ in entries)
        dup = [k for k, n in per.items() if n > 1]
        if dup:
            failures.append(("dup", f"machine {name}: occurrences run more than once: {dup[:5]}"))
        db = m["state"] / "state.db"
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
            rows = {
                r[0]: (r[1], r[2], r[3])
                for r in conn.execute("SELECT id, task, occurrence, outcome FROM runs")
            }
        finally:
            conn.close()
        # 5. integrity
        if integrity != "ok":
            failures.append(("integrity", f"machine {name}: PRAGMA integrity_check: {integrity}"))
        # 3. every ledger run id is in history, for the same task and occurrence
        for task, occurrence, run_id in entries:
            row = rows.get(run_id)
            if row is None:
                failures.append(("history", f"machine {name}: ledger run {run_id} not in history"))
            elif (row[0], row[1]) != (task, occurrence):
                said = f"ledger says {task} {occurrence}"
                failures.append(("history", f"machine {name}: run {run_id} is {row[:2]}, {said}"))
        # 4. every ok run left its ledger line
        ran = {run_id for _, _, run_id in entries}
        ok_without = [i for i, r in rows.items() if r[2] == "ok" and i not in ran]
        if ok_without:
            count = len(ok_without)
            failures.append(("ok-ledger", f"machine {name}: {count} ok runs left no ledger line"))
        outcomes[name] = Counter(r[2] for r in rows.values())
        # Ran, but the cronctl that started it was killed: recovered as an unknown outcome.
        m["ran_unknown"] = sum(1 for i in ran if rows.get(i, ("", "", ""))[2] == "error")

    rows_out = []
    for name, m in machines.items():
        o = outcomes[name]
        rows_out.append(
            [
                name,
                m["ticks"],
                m["killed"],
                dict(sorted(m["exit_codes"].items())),
                len(ledgers[name]),
                o.get("ok", 0),
                o.get("missed", 0),
                sum(v for k, v in o.items() if k.startswith("skipped")),
                o.get("error", 0),
                m["ran_unknown"],
                sum(o.values()),
            ]
        )
    c.table(
        (
            "machine",
            "runs of cronctl",
            "killed -9",
            "exit codes",
            "ledger lines",
            "ok",
            "missed",
            "skipped",
            "error (recovered)",
            "of which ran",
            "history rows",
        ),
        rows_out,
        f"One simulated day, seed {seed}, {steps} clock steps, {elapsed:.0f} s",
    )
    skipped = {
        name: {k: v for k, v in outcomes[name].items() if k.startswith("skipped")}
        for name in machines
    }
    print(f"\nskips: {skipped}")
    broken = {kind for kind, _ in failures}
    checks = [
        ("no on_one_server occurrence ran twice across machines", "cross" not in broken),
        ("no occurrence ran twice on one machine", "dup" not in broken),
        (
            "every ledger run id is in that machine's history (same task, occurrence)",
            "history" not in broken,
        ),
        ("every run recorded ok left its ledger line", "ok-ledger" not in broken),
        ("PRAGMA integrity_check ok on both databases", "integrity" not in broken),
    ]
    c.table(
        ("invariant", "holds"), [[text, "yes" if ok else "NO"] for text, ok in checks], "Invariants"
    )
    for _, failure in failures[:20]:
        print(f"FAIL: {failure}")
    return {
        "benchmark": "soak_processes",
        "machine": info,
        "seed": seed,
        "steps": steps,
        "elapsed_s": elapsed,
        "machines": {
            name: {
                "runs": m["ticks"],
                "killed": m["killed"],
                "exit_codes": {str(k): v for k, v in m["exit_codes"].items()},
                "ledger_lines": len(ledgers[name]),
                "ran_outcome_unknown": m["ran_unknown"],
                "outcomes": dict(outcomes[name]),
            }
            for name, m in machines.items()
        },
        "invariants": {text: ok for text, ok in checks},
        "failures": [text for _, text in failures],
        "ok": not failures,
    }


if __name__ == "__main__":
    main()
