"""Which PostgreSQL driver for cronctl: the whole-process cost of importing each one.

`cronctl run` starts 1,440 times a day on every machine, so the driver's import is paid every
minute when coordination is configured. For each driver installed in the interpreter given, this
times `python -c "import DRIVER"` against `python -c pass` (median of --runs, bytecode cached),
then shows where psycopg 3's import time goes (`python -X importtime`, the biggest subtrees).

    python bench/pg_import.py [--python /path/to/python] [--runs 30] [--out DIR]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import _common as c

DRIVERS = {
    "baseline (python -c pass)": "pass",
    "psycopg2-binary 2.9": "import psycopg2",
    "pg8000 1.31": "import pg8000",
    "psycopg 3 (binary)": "import psycopg",
    "psycopg 3: psycopg.pq only": "import psycopg.pq",
}


def _time(python: str, code: str, runs: int) -> float | None:
    """Median wall time of a whole process running `code`; None when the import fails."""
    if subprocess.run([python, "-c", code], capture_output=True).returncode != 0:
        return None
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([python, "-c", code], check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _importtime(python: str, module: str, top: int) -> list[tuple[str, float]]:
    """The biggest cumulative import subtrees (ms) of `import module`, two levels deep."""
    out = subprocess.run(
        [python, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True
    ).stderr
    rows = []
    for line in out.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.split("|")
        depth = (len(name) - len(name.lstrip())) // 2
        if depth <= 2:
            rows.append((name.strip(), int(cumulative) / 1000))
    return sorted(rows, key=lambda r: -r[1])[:top]


def main() -> None:
    """Print the table and write the results."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--runs", type=int, default=30)
    c.add_out(p)
    args = p.parse_args()
    results: dict[str, float | None] = {}
    for label, code in DRIVERS.items():
        results[label] = _time(args.python, code, args.runs)
    base = results["baseline (python -c pass)"] or 0.0
    print(f"{'driver':32} {'median ms':>10} {'over pass':>10}")
    for label, value in results.items():
        if value is None:
            print(f"{label:32} {'not installed':>21}")
            continue
        print(f"{label:32} {value * 1000:10.1f} {(value - base) * 1000:+10.1f}")
    breakdown = []
    if results["psycopg 3 (binary)"] is not None:
        breakdown = _importtime(args.python, "psycopg", 14)
        print("\nwhere `import psycopg` spends its time (cumulative ms, two levels deep):")
        for name, ms in breakdown:
            print(f"  {ms:7.1f}  {name}")
    payload = {"python": args.python, "runs": args.runs, "median_s": results,
               "psycopg_importtime_ms": breakdown}  # fmt: skip
    c.write_json(args.out, "pg_import", payload)


if __name__ == "__main__":
    main()
