"""Coordination on PostgreSQL against the file store, side by side in one run, and at scale.

1. `cronctl run`, 100 tasks, nothing due: files vs --coordination (target: at most 2x).
2. `cronctl run`, 100 due on_one_server tasks running `true`: files vs coordination (<= 2x).
   Every timed run is a new minute, so it finds its window open and claims 100 fresh
   occurrences (files: 100 O_EXCL files, fsynced; PostgreSQL: one INSERT ... RETURNING).
3. Scale: M simulated machines (threads, each with its own connection, as real machines
   would have) x N on_one_server tasks due in the same minute, for several minutes against one
   server: each machine makes one claim round trip for its N claims, then one round trip to
   publish the records it won. Claims/s, p50/p99 of a machine's claim round trip, and the
   server's CPU (utime+stime of every postgres process, /proc).

It starts its own PostgreSQL (initdb in a temporary directory, a Unix socket, as the postgres
user when run as root), so it needs PostgreSQL installed and psycopg2 in the interpreter.

    python bench/pg_coord.py [--runs 15] [--machines 50] [--tasks 1000] [--minutes 5]
                             [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import _common as c

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "coord"))

from conftest import PgServer, _bindir  # noqa: E402  (the tests' server, reused)

T0 = datetime(2026, 8, 3, 12, 0, tzinfo=UTC)


def _schedule(path: Path, tasks: int, cron: str, guards: str) -> Path:
    # The file store's lock_dir is local here: say it is shared, so no warning is printed.
    body = "[cronctl]\nlock_dir_shared = true\n" + "".join(
        f'\n[[task]]\nname = "t{i:03d}"\ncron = "{cron}"\ncommand = "true"\n{guards}\n'
        for i in range(tasks)
    )
    path.write_text(body)
    return path


def _time_runs(schedule: Path, state: Path, runs: int, extra: list[str], start: int) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CRONCTL_STATE_DIR": str(state),
           "CRONCTL_HOST": "bench"}  # fmt: skip
    samples = []
    for i in range(runs + 2):  # two warm-up runs
        now = (T0 + timedelta(minutes=start + i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        began = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "cronctl", "run", "-f", str(schedule), "--now", now, *extra],
            env=env, check=True,
        )  # fmt: skip
        if i >= 2:
            samples.append(time.perf_counter() - began)
    return samples


def side_by_side(server: PgServer, work: Path, runs: int) -> dict[str, object]:
    """Sections 1 and 2: files and PostgreSQL alternating minute by minute in one run."""
    server.sql("CREATE DATABASE side")
    url = server.url("side")
    results: dict[str, object] = {}
    cases = {
        "nothing due": (_schedule(work / "idle.toml", 100, "30 3 * * *", ""), 0),
        "100 due on_one_server": (
            _schedule(work / "due.toml", 100, "* * * * *", "on_one_server = true\n"), 1000),
    }  # fmt: skip
    for label, (schedule, start) in cases.items():
        files = _time_runs(schedule, work / f"files-{start}", runs, ["--lock-dir",
                           str(work / f"locks-{start}")], start)  # fmt: skip
        pg = _time_runs(schedule, work / f"pg-{start}", runs, ["--coordination", url], start)
        f_med, p_med = statistics.median(files), statistics.median(pg)
        results[label] = {"files_median_s": f_med, "postgresql_median_s": p_med,
                          "ratio": p_med / f_med}  # fmt: skip
        print(f"{label:24} files {f_med * 1000:7.1f} ms   postgresql {p_med * 1000:7.1f} ms"
              f"   ratio {p_med / f_med:.2f} (target <= 2)")  # fmt: skip
    return results


def _server_cpu(server: PgServer) -> float:
    """CPU seconds of every process of the cluster: live ones, and children reaped so far."""
    tick = os.sysconf("SC_CLK_TCK")
    postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry.name), int(fields[1])
        if pid == postmaster or ppid == postmaster:
            total += int(fields[11]) + int(fields[12])  # utime, stime
            if pid == postmaster:
                total += int(fields[13]) + int(fields[14])  # cutime, cstime (exited backends)
    return total / tick


def scale(server: PgServer, machines: int, tasks: int, minutes: int) -> dict[str, object]:
    """Section 3: the whole fleet's claims of each minute at once against one server."""
    from cronctl.coord.postgres.adapter import PostgresCoordinator
    from cronctl.core.runs import RunRow

    server.sql("CREATE DATABASE scale")
    url = server.url("scale")
    PostgresCoordinator(url, host="m0", pid=0).paused_tasks()  # create the schema once
    coords = [PostgresCoordinator(url, host=f"m{i}", pid=i) for i in range(machines)]
    # A run's connection (a new backend: fork, authentication, startup query), per machine:
    # outside the claim timing, but its server CPU is measured too.
    cpu_connect = _server_cpu(server)
    connect_began = time.perf_counter()
    for coord in coords:
        coord.paused_tasks()
    connect_wall = time.perf_counter() - connect_began
    cpu_connect = _server_cpu(server) - cpu_connect
    names = [f"t{i:04d}" for i in range(tasks)]
    claim_s: list[float] = []
    publish_s: list[float] = []
    won_total = 0
    guard = threading.Lock()

    def machine(i: int, when: datetime, barrier: threading.Barrier) -> None:
        nonlocal won_total
        coord = coords[i]
        barrier.wait()
        began = time.perf_counter()
        won = coord.claim([(n, when) for n in names], now=when)
        claimed = time.perf_counter()
        rows = [RunRow(id=f"{when:%Y%m%dT%H%MZ}-{task}", task=task, occurrence=when, outcome="ok",
                       host=f"m{i}", started=when, ended=when, duration_s=0.01)
                for task, _ in won]  # fmt: skip
        coord.publish(rows)
        done = time.perf_counter()
        with guard:
            claim_s.append(claimed - began)
            if rows:
                publish_s.append(done - claimed)
            won_total += len(won)

    cpu_before = _server_cpu(server)
    began = time.perf_counter()
    for minute in range(minutes):
        when = T0 + timedelta(minutes=minute)
        barrier = threading.Barrier(machines)
        threads = [
            threading.Thread(target=machine, args=(i, when, barrier)) for i in range(machines)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    wall = time.perf_counter() - began
    for coord in coords:
        coord.close()
    time.sleep(0.5)  # let the backends exit, so the postmaster has reaped their CPU time
    cpu = _server_cpu(server) - cpu_before
    attempts = machines * tasks * minutes
    claim_s.sort()
    result = {
        "machines": machines, "tasks": tasks, "minutes": minutes,
        "claims_attempted": attempts, "claims_won": won_total,
        "wall_s": wall, "claims_per_s": attempts / wall,
        "claim_round_trip_p50_ms": 1000 * claim_s[len(claim_s) // 2],
        "claim_round_trip_p99_ms": 1000 * claim_s[min(len(claim_s) - 1, int(len(claim_s) * 0.99))],
        "publish_p50_ms_winners": 1000 * statistics.median(publish_s or [0.0]),
        "server_cpu_s": cpu, "server_cpu_per_minute_s": cpu / minutes,
        "connect_ms_each": 1000 * connect_wall / machines,
        "server_cpu_per_connect_ms": 1000 * cpu_connect / machines,
    }  # fmt: skip
    print(f"\nscale: {machines} machines x {tasks} on_one_server tasks x {minutes} minutes")
    for key, value in result.items():
        print(f"  {key:28} {value:.3f}" if isinstance(value, float) else f"  {key:28} {value}")
    assert won_total == tasks * minutes, "every occurrence must be won exactly once"
    return result


def main() -> None:
    """Run the three sections; print them; write the results."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--machines", type=int, default=50)
    p.add_argument("--tasks", type=int, default=1000)
    p.add_argument("--minutes", type=int, default=5)
    c.add_out(p)
    args = p.parse_args()
    bindir = _bindir()
    if bindir is None:
        sys.exit("bench: PostgreSQL is not installed (initdb not found)")
    root = Path(tempfile.mkdtemp(prefix="cronctl-pgbench-"))
    work = Path(tempfile.mkdtemp(prefix="cronctl-pgbench-work-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    server = PgServer(bindir, root, durable=True)
    server.init()
    server.start()
    try:
        results = {"side_by_side": side_by_side(server, work, args.runs),
                   "scale": scale(server, args.machines, args.tasks, args.minutes)}  # fmt: skip
    finally:
        server.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    results["machine"] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    c.write_json(args.out, "pg_coord", results)


if __name__ == "__main__":
    main()
