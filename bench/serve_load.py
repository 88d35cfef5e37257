"""Many viewers of one dashboard at once (docs/dashboard.md#speed).

    python bench/serve_load.py [--clients 50] [--seconds 30] [--think 0]
                               [--tasks 10000] [--runs 1000000] [--hosts 50] [--state DIR]

Starts a real `cronctl serve` (this interpreter's cronctl) on a free local port against the
state of bench/_serve_state.py, then CLIENTS threads, each with its own keep-alive
connection, ask for pages in turn for SECONDS seconds, waiting THINK seconds between two:
the overview, a task page deep in its history, a run page, a page of /api/runs and the
machine page. Prints, per kind of page, how many answered, how many failed (a status other
than 200, a timeout, a dropped connection) and the latency percentiles."""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

from _serve_state import START, build

from cronctl.core.model import format_utc

TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(where: object, port: int, now: str) -> subprocess.Popen[bytes]:
    state = where.state  # type: ignore[attr-defined]
    command = [sys.executable, "-m", "cronctl", "serve", "--listen", f"127.0.0.1:{port}",
               "--file", str(where.schedule), "--state-dir", str(state),  # type: ignore[attr-defined]
               "--lock-dir", str(where.locks), "--now", now]  # type: ignore[attr-defined]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONCTL_")}
    proc = subprocess.Popen(command, env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        if proc.poll() is not None:
            raise SystemExit(f"serve did not start: {proc.communicate()[1].decode()}")
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("serve did not start listening within 60 s")


class Tally:
    """Latencies and failures per kind of page, from every client thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.took: dict[str, list[float]] = {}
        self.failed: dict[str, list[str]] = {}

    def add(self, kind: str, seconds: float, failure: str | None) -> None:
        with self.lock:
            if failure is None:
                self.took.setdefault(kind, []).append(seconds)
            else:
                self.failed.setdefault(kind, []).append(failure)


def client(port: int, targets: list[tuple[str, str]], offset: int, until: float,
           think: float, tally: Tally) -> None:  # fmt: skip
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    i = offset
    while time.monotonic() < until:
        kind, target = targets[i % len(targets)]
        i += 1
        t0 = time.perf_counter()
        failure = None
        try:
            conn.request("GET", target)
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                failure = f"HTTP {response.status}"
        except (OSError, http.client.HTTPException) as exc:
            failure = type(exc).__name__
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        tally.add(kind, time.perf_counter() - t0, failure)
        if think:
            time.sleep(think)
    conn.close()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--think", type=float, default=0.0, help="seconds between two pages")
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--state", type=Path, help="build the state here once, and reuse it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = build(args.state or Path(tmp), args.tasks, args.runs, args.hosts)
        port = free_port()
        proc = start_server(where, port, format_utc(where.now))
        deep = f"{format_utc(START + timedelta(minutes=args.runs // 2))}~r"
        task = f"t{7 % args.tasks:05d}"
        targets = [
            ("overview /", "/"),
            ("task page, deep", f"/tasks/{task}?before={deep}"),
            ("run page", f"/runs/r{args.runs // 2:08d}"),
            ("history /api/runs, deep", f"/api/runs?before={deep}"),
            ("machine /fleet", "/fleet"),
        ]
        tally = Tally()
        load = os.getloadavg()
        t0 = time.monotonic()
        until = t0 + args.seconds
        threads = [
            threading.Thread(target=client, args=(port, targets, i, until, args.think, tally))
            for i in range(args.clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - t0
        proc.terminate()
        proc.communicate(timeout=30)
        print(f"{args.clients} clients, {args.seconds:.0f} s, think {args.think} s, "
              f"{elapsed:.1f} s with the last answers; load average before "
              f"{' '.join(f'{x:.2f}' for x in load)}, after "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
        print(f"{'page':<26}{'answered':>9}{'failed':>8}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}")
        total = failed = 0
        for kind, _ in targets:
            took = tally.took.get(kind, [])
            bad = tally.failed.get(kind, [])
            total += len(took)
            failed += len(bad)
            if took:
                p50 = statistics.median(took) * 1000
                p95, top = percentile(took, 0.95) * 1000, max(took) * 1000
                print(f"{kind:<26}{len(took):>9}{len(bad):>8}{p50:>9.0f}{p95:>9.0f}{top:>9.0f}")
            else:
                print(f"{kind:<26}{0:>9}{len(bad):>8}")
            if bad:
                print(f"  failures: {sorted(set(bad))}")
        print(f"all: {total} answered 200, {failed} failed, {total / elapsed:.1f} pages/s")


if __name__ == "__main__":
    main()
