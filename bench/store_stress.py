"""Stress the state database: a real `cronctl work` for minutes, with readers beside it.

Once, `work` plus a `status` while a task of an earlier minute still ran left
state.db malformed (a descriptor of the file opened and closed inside `work` dropped SQLite's
locks). This runs the real thing with the real clock: `cronctl work` with tasks that outlive
the minute (so ticks' connections overlap inside `work`), while other processes run
`status`, `history` and `run --dry-run` against the same state dir in a loop. Afterwards:

1. PRAGMA integrity_check is ok;
2. every run a task started (its ledger line) is a row of history, finished;
3. no reader failed (exit 0 every time, no traceback);
4. `work` printed no error and lost no tick (no occurrence recorded missed), and exited 0
   on SIGTERM.

Before the fix, a 4-minute run of this script lost a tick to "disk I/O error"
on state.db (4 occurrences then recorded missed).

Exit 0 when all hold, 1 otherwise. It runs the cronctl of this checkout (PYTHONPATH).

    python bench/store_stress.py [--minutes 4] [--out DIR]
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import _common as c

ROOT = Path(__file__).resolve().parents[1]
LEDGER = 'echo "$CRONCTL_RUN_ID" >> "$STRESS_LEDGER"'
# name, seconds it sleeps after its ledger line: two outlive the minute boundary.
TASKS = (("long", 75), ("half", 30), ("quick", 0), ("long-b", 61))
READERS = (["status"], ["history", "--limit", "20"], ["run", "--dry-run"])


def main() -> None:
    p = c.parser(__doc__.splitlines()[0], runs=None)
    p.add_argument("--minutes", type=float, default=4.0, help="how long work runs (4)")
    args = p.parse_args()
    with c.Sandbox(args.keep, prefix="cronctl-store-") as box:
        result = stress(box, args.minutes)
        c.write_json(args.out, "store_stress", result)
    sys.exit(0 if result["ok"] else 1)


def _env(box: c.Sandbox, ledger: Path) -> dict[str, str]:
    return box.env(STRESS_LEDGER=str(ledger), PYTHONPATH=str(ROOT))


def _read_loop(env: dict[str, str], schedule: Path, stop: threading.Event, out: dict) -> None:
    while not stop.is_set():
        for args in READERS:
            done = subprocess.run(
                [sys.executable, "-m", "cronctl", *args, "-f", str(schedule)],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            out["commands"] += 1
            if done.returncode != 0 or "Traceback" in done.stderr:
                out["failures"].append(f"{args[0]}: exit {done.returncode}: {done.stderr[-300:]}")


def stress(box: c.Sandbox, minutes: float) -> dict:
    schedule = c.write_schedule(
        box.root / "schedules.toml",
        [
            f"[[task]]\nname = \"{name}\"\nevery_minute = true\ncommand = '{LEDGER}; sleep {sleep}'"
            for name, sleep in TASKS
        ],
    )
    ledger = box.root / "ledger"
    env = _env(box, ledger)
    work = subprocess.Popen(
        [sys.executable, "-m", "cronctl", "work", "-f", str(schedule), "--grace", "5"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stop = threading.Event()
    reads: dict = {"commands": 0, "failures": []}
    while not ledger.exists():
        if work.poll() is not None:
            sys.exit(f"store_stress: work exited {work.returncode}: {work.communicate()[1]}")
        time.sleep(0.2)
    threads = [
        threading.Thread(target=_read_loop, args=(env, schedule, stop, reads)) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    time.sleep(minutes * 60)
    stop.set()
    for thread in threads:
        thread.join()
    work.send_signal(signal.SIGTERM)
    _, err = work.communicate(timeout=60)
    db = box.root / "state" / "state.db"
    conn = sqlite3.connect(db)
    try:
        integrity = conn.execute("PRAGMA integrity_check").fetchall()
        rows = dict(conn.execute("SELECT id, outcome FROM runs").fetchall())
    finally:
        conn.close()
    ran = ledger.read_text().split() if ledger.exists() else []
    lost = [r for r in ran if r not in rows]
    open_rows = [r for r in ran if rows.get(r) in ("pending", "running")]
    result = {
        "minutes": minutes,
        "runs_started": len(ran),
        "runs_in_history": len(rows),
        "outcomes": {o: list(rows.values()).count(o) for o in sorted(set(rows.values()))},
        "reader_commands": reads["commands"],
        "reader_failures": reads["failures"][:10],
        "integrity": [row[0] for row in integrity],
        "lost": lost[:10],
        "left_open": open_rows[:10],
        "work_exit": work.returncode,
        "work_errors": [line for line in err.splitlines() if "error" in line][:10],
    }
    result["ok"] = (
        result["integrity"] == ["ok"]
        and not lost
        and not open_rows
        and not reads["failures"]
        and work.returncode == 0
        and not result["work_errors"]
        and "missed" not in result["outcomes"]  # a tick lost to a store error misses runs
        and len(ran) > 0
    )
    for key, value in result.items():
        print(f"{key}: {value}")
    return result


if __name__ == "__main__":
    main()
