"""The dashboard benchmarks' state (bench/serve_pages.py, bench/serve_load.py): a schedule of
TASKS tasks over 60 hourly expressions and a local state of RUNS runs, one a minute, spread
over HOSTS host names, every ninth one failed.

Building a million rows takes a while: with ``--state DIR`` it is built there once and
reused while the sizes match (``sizes.json`` says which)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cronctl.core.runs import RunRow
from cronctl.edge.state.store import Store

START = datetime(2024, 1, 1, tzinfo=UTC)
_BATCH = 100_000


@dataclass(frozen=True, slots=True)
class BenchState:
    """Where the generated schedule, state and locks are, and the instant to view them at."""

    schedule: Path
    state: Path
    locks: Path
    now: datetime


def build(root: Path, tasks: int, runs: int, hosts: int) -> BenchState:
    """The schedule and state under ``root``, built unless already there with these sizes."""
    sizes = {"tasks": tasks, "runs": runs, "hosts": hosts}
    made = root / "sizes.json"
    found = BenchState(root / "schedules.toml", root / "state", root / "locks",
                       START + timedelta(minutes=runs))  # fmt: skip
    if made.exists() and json.loads(made.read_text()) == sizes:
        print(f"reusing the state in {root}")
        return found
    root.mkdir(parents=True, exist_ok=True)
    for old in (found.state / "state.db", found.state / "state.db-wal", made):
        old.unlink(missing_ok=True)
    found.schedule.write_text(
        "".join(
            f'[[task]]\nname = "t{i:05d}"\ncron = "{i % 60} * * * *"\ncommand = "true"\n'
            for i in range(tasks)
        )
    )
    found.state.mkdir(mode=0o700, exist_ok=True)
    found.locks.mkdir(mode=0o700, exist_ok=True)
    t0 = time.perf_counter()
    with Store.open(found.state) as store:
        for first in range(0, runs, _BATCH):
            with store.transaction() as txn:
                txn.add_runs(
                    [
                        RunRow(
                            f"r{i:08d}",
                            f"t{i % tasks:05d}",
                            START + timedelta(minutes=i),
                            "ok" if i % 9 else "failed",
                            f"h{i % hosts:02d}",
                            exit_code=0,
                            duration_s=1.0,
                        )
                        for i in range(first, min(first + _BATCH, runs))
                    ]
                )
    print(f"built {runs} runs in {time.perf_counter() - t0:.1f} s")
    made.write_text(json.dumps(sizes))
    return found
