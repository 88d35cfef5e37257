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
  is marked "running" in a commit of its own before it starts. Each result is committed as
  its run ends (docs/guarantees.md, Records), with those that ended meanwhile: from the 8
  threads, whatever ended while the last commit was under way; from one thread, what one
  `epoll` wake-up found ended;
- per run: the environment with `CRONCTL_*`, a working directory, a new session, stdin from
  /dev/null, a log created `O_EXCL | O_NOFOLLOW` with mode 0600 in the task's own directory,
  the output copied through a pipe (what `max_output` needs), the exit awaited on a pidfd,
  and the log's tail read back;
- 8 workers, as `max_parallel` defaults to: 8 threads, or with `one-thread` a single thread
  keeping 8 commands going from one `epoll` over their pipes and pidfds (a spawner of our
  own, without a thread per command and the GIL handed between them).

    python bench/essential_run.py setup DIR        # a state directory to copy before each run
    python bench/essential_run.py run DIR          # one run of 100 due `sh -c true` tasks
    python bench/essential_run.py one-thread DIR   # the same from one thread
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


class _Run:
    """One run's state, its plan committed: what both ways of running the commands share."""

    def __init__(self, root: pathlib.Path) -> None:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self.root = root
        db = sqlite3.connect(root / "state.db", isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        self.db = db
        now = datetime.datetime.now(datetime.UTC).isoformat()
        self.ids = [f"{time.time_ns()}-{i}" for i in range(TASKS)]
        self.names = [f"due-{i:03d}" for i in range(TASKS)]
        self.db_lock = threading.RLock()
        self.ended: list[tuple[int, str, str]] = []  # results waiting for record_soon's commit
        self.ended_lock = threading.Lock()
        self.marked = set(range(WORKERS))
        with self.db_lock:
            db.execute("BEGIN IMMEDIATE")
            db.executemany(
                "INSERT OR REPLACE INTO task_state VALUES (?, ?)", [(n, now) for n in self.names]
            )
            db.executemany(
                "INSERT INTO runs (id, task, occurrence, outcome) VALUES (?, ?, ?, ?)",
                [
                    (self.ids[i], self.names[i], now, "running" if i in self.marked else "pending")
                    for i in range(TASKS)
                ],
            )
            db.execute("COMMIT")
        self.base_env = dict(os.environ)
        self.devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)

    def mark(self, i: int) -> None:
        """Row i durably "running" before its start, with the rest of its wave."""
        with self.db_lock:
            if i in self.marked:
                return
            wave = [j for j in range(i, min(i + WORKERS, TASKS)) if j not in self.marked]
            self.marked.update(wave)
            self.db.execute("BEGIN IMMEDIATE")
            self.db.executemany(
                "UPDATE runs SET outcome = 'running' WHERE id = ? AND outcome = 'pending'",
                [(self.ids[j],) for j in wave],
            )
            self.db.execute("COMMIT")

    def start(self, i: int) -> tuple[subprocess.Popen[bytes], int, int]:
        """Task i's log created, its row marked, its command started: (child, log, pipe)."""
        env = {**self.base_env, "CRONCTL_TASK": self.names[i], "CRONCTL_RUN_ID": self.ids[i]}
        log_dir = f"{self.root}/logs/{self.names[i]}"  # text, not pathlib: the least it costs
        try:
            os.lstat(log_dir)
        except FileNotFoundError:
            os.mkdir(log_dir, 0o700)  # noqa: PTH102  (text paths here, as above)
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        log = os.open(f"{log_dir}/{self.ids[i]}.log", flags, 0o600)
        self.mark(i)
        read_end, write_end = os.pipe()
        child = subprocess.Popen(
            ["/bin/sh", "-c", "true"],
            stdin=self.devnull,
            stdout=write_end,
            stderr=subprocess.STDOUT,
            cwd=self.root,
            env=env,
            start_new_session=True,
        )
        os.close(write_end)
        return child, log, read_end

    def end(self, i: int, child: subprocess.Popen[bytes], log: int) -> tuple[int, str, str]:
        """The exited command's code and its log's tail."""
        code = child.wait()
        size = os.fstat(log).st_size
        tail = os.pread(log, 4096, max(0, size - 4096)).decode(errors="replace")
        os.close(log)
        return code, tail, self.ids[i]

    def record_soon(self, result: tuple[int, str, str]) -> None:
        """``result`` committed, with every result that ended while the last commit went on
        (whichever thread takes the lock first commits them all)."""
        with self.ended_lock:
            self.ended.append(result)
        with self.db_lock:
            with self.ended_lock:
                batch, self.ended = self.ended, []
            if batch:
                self.record(batch)

    def record(self, results: list[tuple[int, str, str]]) -> None:
        """Results that ended together, in one commit."""
        with self.db_lock:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.executemany(
                "UPDATE runs SET outcome = ?, exit_code = ?, tail = ? WHERE id = ?",
                [("ok" if code == 0 else "failed", code, tail, i) for code, tail, i in results],
            )
            self.db.execute("COMMIT")


def _exit(results: list[tuple[int, str, str]]) -> None:
    """Exit 1 if a command failed."""
    if any(code for code, _, _ in results):
        raise SystemExit(1)


def run(root: pathlib.Path) -> None:
    """Plan, mark, start, copy, wait and record 100 due `sh -c true`, 8 threads at a time."""
    state = _Run(root)

    def one(i: int) -> tuple[int, str, str]:
        child, log, read_end = state.start(i)
        while data := os.read(read_end, 65536):
            os.write(log, data)
        os.close(read_end)
        exited = os.pidfd_open(child.pid)
        poller = select.poll()
        poller.register(exited, select.POLLIN)
        poller.poll()
        os.close(exited)
        result = state.end(i, child, log)
        state.record_soon(result)
        return result

    with ThreadPoolExecutor(WORKERS) as pool:
        _exit(list(pool.map(one, range(TASKS))))


def one_thread(root: pathlib.Path) -> None:
    """The same from one thread: 8 commands at a time, their pipes and pidfds in one epoll."""
    state = _Run(root)
    poll = select.epoll()
    pipes: dict[int, int] = {}  # a command's output pipe -> its task
    exits: dict[int, int] = {}  # a command's pidfd -> its task
    running: dict[int, tuple[subprocess.Popen[bytes], int, int]] = {}  # task -> child, log, open
    results: list[tuple[int, str, str]] = []
    ended: list[tuple[int, str, str]] = []  # since the last wake-up's commit
    started = 0

    def start_next() -> None:
        nonlocal started
        i, started = started, started + 1
        child, log, read_end = state.start(i)
        exited = os.pidfd_open(child.pid)
        running[i] = (child, log, 2)
        pipes[read_end], exits[exited] = i, i
        poll.register(read_end, select.EPOLLIN)
        poll.register(exited, select.EPOLLIN)

    def closed(fd: int, i: int) -> None:
        """One of task i's two descriptors is done with; after both, its result."""
        poll.unregister(fd)
        os.close(fd)
        child, log, left = running[i]
        running[i] = (child, log, left - 1)
        if left == 1:
            del running[i]
            ended.append(state.end(i, child, log))
            if started < TASKS:
                start_next()

    while started < min(WORKERS, TASKS):
        start_next()
    while running:
        for fd, _ in poll.poll():
            if fd in pipes:
                i = pipes[fd]
                if data := os.read(fd, 65536):
                    os.write(running[i][1], data)
                    continue
                del pipes[fd]
            else:
                i = exits.pop(fd)
            closed(fd, i)
        if ended:
            state.record(ended)
            results += ended
            ended.clear()
    _exit(results)


if __name__ == "__main__":
    action, where = sys.argv[1], pathlib.Path(sys.argv[2])
    {"setup": setup, "run": run, "one-thread": one_thread}[action](where)
