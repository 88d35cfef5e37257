"""The least a due `cronctl run` must do, without cronctl: a reference below which no design
that keeps cronctl's guarantees can go.

run_path_ab.py times it beside the bare spawner. It pays for the modules the house style
and the guarantees require, and for the work each run does by design. Nothing is spent on
parsing, planning, guards, locks, rendering or cronctl's own modules:

- the standard-library modules the code is written with: `dataclasses` and `typing`
  (records and Protocols, imported but unused here), `pathlib`, `datetime`, `sqlite3`;
- the child subreaper, set through `ctypes` (docs/guarantees.md: a task's processes that
  leave its group stay in cronctl's tree);
- the state in SQLite with WAL and `synchronous = FULL`. One transaction plans (each
  task's state, a pending row per run, the first wave marked "running"). Each later wave
  is marked "running" in a commit of its own before it starts. One commit at the end
  holds the results;
- per run: the environment with `CRONCTL_*`, a working directory, a new session, stdin from
  /dev/null, a log created `O_EXCL | O_NOFOLLOW` with mode 0600 in the task's own directory,
  the output copied through a pipe (what `max_output` needs), the exit awaited on a pidfd,
  and the log's tail read back;
- 8 workers, as `max_parallel` defaults to.

    python bench/essential_run.py setup DIR   # a state directory to copy before each run
    python bench/essential_run.py run DIR     # one run of 100 due `sh -c true` tasks
"""

import ctypes
import dataclasses  # noqa: F401  (the records' module)
import datetime
import os
import pathlib
import select
import sqlite3
import subprocess
import sys
import threading
import time
import typing  # noqa: F401  (the Protocols' module)
from concurrent.futures import ThreadPoolExecutor

TASKS = 100
WORKERS = 8
_PR_SET_CHILD_SUBREAPER = 36


def setup(root: pathlib.Path) -> None:
    """A state directory with the tables a run writes, and a log directory."""
    (root / "logs").mkdir(parents=True, mode=0o700)
    with sqlite3.connect(root / "state.db") as db:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("CREATE TABLE task_state (name TEXT PRIMARY KEY, last_occurrence TEXT NOT NULL)")
        db.execute(
            "CREATE TABLE runs (id TEXT PRIMARY KEY, task TEXT NOT NULL, occurrence TEXT NOT"
            " NULL, outcome TEXT NOT NULL, exit_code INTEGER, tail TEXT NOT NULL DEFAULT '')"
        )


def run(root: pathlib.Path) -> None:
    """Plan, mark, start, copy, wait and record 100 due `sh -c true`, 8 at a time."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    db = sqlite3.connect(root / "state.db", isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    now = datetime.datetime.now(datetime.UTC).isoformat()
    ids = [f"{time.time_ns()}-{i}" for i in range(TASKS)]
    names = [f"due-{i:03d}" for i in range(TASKS)]
    db_lock = threading.Lock()
    marked = set(range(WORKERS))
    every = range(TASKS)
    with db_lock:
        db.execute("BEGIN IMMEDIATE")
        db.executemany("INSERT OR REPLACE INTO task_state VALUES (?, ?)", [(n, now) for n in names])
        db.executemany(
            "INSERT INTO runs (id, task, occurrence, outcome) VALUES (?, ?, ?, ?)",
            [(ids[i], names[i], now, "running" if i in marked else "pending") for i in every],
        )
        db.execute("COMMIT")
    base_env = dict(os.environ)
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)

    def mark(i: int) -> None:
        """Row i durably "running" before its start, with the rest of its wave."""
        with db_lock:
            if i in marked:
                return
            wave = [j for j in range(i, min(i + WORKERS, TASKS)) if j not in marked]
            marked.update(wave)
            db.execute("BEGIN IMMEDIATE")
            db.executemany(
                "UPDATE runs SET outcome = 'running' WHERE id = ? AND outcome = 'pending'",
                [(ids[j],) for j in wave],
            )
            db.execute("COMMIT")

    def one(i: int) -> tuple[int, str, str]:
        env = {**base_env, "CRONCTL_TASK": names[i], "CRONCTL_RUN_ID": ids[i]}
        log_dir = f"{root}/logs/{names[i]}"  # text, not pathlib: the least it costs
        try:
            os.lstat(log_dir)
        except FileNotFoundError:
            os.mkdir(log_dir, 0o700)  # noqa: PTH102  (text paths here, as above)
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        log = os.open(f"{log_dir}/{ids[i]}.log", flags, 0o600)
        mark(i)
        read_end, write_end = os.pipe()
        child = subprocess.Popen(
            ["/bin/sh", "-c", "true"],
            stdin=devnull,
            stdout=write_end,
            stderr=subprocess.STDOUT,
            cwd=root,
            env=env,
            start_new_session=True,
        )
        os.close(write_end)
        while data := os.read(read_end, 65536):
            os.write(log, data)
        os.close(read_end)
        exited = os.pidfd_open(child.pid)
        poller = select.poll()
        poller.register(exited, select.POLLIN)
        poller.poll()
        os.close(exited)
        code = child.wait()
        size = os.fstat(log).st_size
        tail = os.pread(log, 4096, max(0, size - 4096)).decode(errors="replace")
        os.close(log)
        return code, tail, ids[i]

    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(one, range(TASKS)))
    with db_lock:
        db.execute("BEGIN IMMEDIATE")
        db.executemany(
            "UPDATE runs SET outcome = ?, exit_code = ?, tail = ? WHERE id = ?",
            [("ok" if code == 0 else "failed", code, tail, i) for code, tail, i in results],
        )
        db.execute("COMMIT")
    if any(code for code, _, _ in results):
        raise SystemExit(1)


if __name__ == "__main__":
    action, where = sys.argv[1], pathlib.Path(sys.argv[2])
    {"setup": setup, "run": run}[action](where)
