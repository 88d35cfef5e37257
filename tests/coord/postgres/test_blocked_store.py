"""A store that answers but blocks: another session holds a lock on one of cronctl's tables (a
migration, a stuck transaction). `run` and `work` end in bounded time, say which store, record
every row, act on SIGTERM at once, and start the tasks that need no store on time.
Real processes, a real PostgreSQL, a second session holding ``LOCK TABLE``."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from cronctl.coord.postgres.adapter import PostgresCoordinator
from cronctl.coord.postgres.schema import _MIGRATE_KEY
from tests.coord.postgres.kit import T
from tests.helpers import (
    Cli,
    children,
    history,
    patched_cronctl,
    reaped,
    wait_for,
    write_schedule,
)
from tests.run.test_work import NEAR_BOUNDARY

SECRET = "hunter2-pw"  # noqa: S105  (a test password, to check it is never shown)
# Each task writes when it started (date +%s.%N), to compare with the store's wait.
TASKS = [
    'name = "one"\ncron = "* * * * *"\ncommand = "date +%s.%N > one.mark"\non_one_server = true',
    'name = "solo"\ncron = "* * * * *"\ncommand = "date +%s.%N > solo.mark"\n'
    "without_overlapping = true",
    'name = "plain"\ncron = "* * * * *"\ncommand = "date +%s.%N > plain.mark"',
]
#: Far above the store's own limits (lock 5 s, statement 10 s): only a hang reaches it.
BOUND_S = 30

# cronctl with every wait on the store ten minutes long (the lock and statement timeouts, 5 s
# and 10 s, and the connect timeout): such a wait ends when the test ends it, or a stop does,
# so what goes on meanwhile is seen without a bet on how soon a loaded machine starts a task.
PATIENT = """
from cronctl.coord.postgres import conn
for name, seconds in (("lock", conn.LOCK_TIMEOUT_S), ("statement", conn.STATEMENT_TIMEOUT_S)):
    setting = f"{name}_timeout={seconds * 1000}"
    assert setting in conn._SESSION_OPTIONS, conn._SESSION_OPTIONS
    conn._SESSION_OPTIONS = conn._SESSION_OPTIONS.replace(setting, f"{name}_timeout=600000")
conn.connect.__kwdefaults__["timeout"] = 600
"""
PATIENT_CRONCTL = patched_cronctl(PATIENT)


def _with_password(url: str) -> str:
    """The test URL with a password (the server trusts the socket and ignores it)."""
    return url.replace("postgres@", f"postgres:{SECRET}@", 1)


@pytest.fixture
def store(pg_url: str) -> str:
    """The test's store with cronctl's schema made, as a machine's first run leaves it."""
    coord = PostgresCoordinator(pg_url, host="setup", pid=1)
    try:
        coord.check()
    finally:
        coord.close()
    return pg_url


@contextmanager
def locked(url: str, *statements: str) -> Iterator[Any]:
    """A second session that runs ``statements`` in a transaction left open (its locks held)
    until the block ends."""
    import psycopg2

    holder = psycopg2.connect(url)
    try:
        with holder.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
        yield holder
    finally:
        holder.rollback()
        holder.close()


def _env(tmp_path: Path, url: str) -> dict[str, str]:
    return {"CRONCTL_HOST": "a", "CRONCTL_COORDINATION": _with_password(url),
            "CRONCTL_STATE_DIR": str(tmp_path / "a")}  # fmt: skip


def _outcomes(cli: Cli, tmp_path: Path, url: str) -> dict[str, str]:
    """task -> the outcome `history` shows on machine a."""
    return {str(r["task"]): str(r["outcome"]) for r in history(cli, env=_env(tmp_path, url))}


def _matches(outcomes: dict[str, str], expected: dict[str, Any]) -> bool:
    """Each task's outcome is the one expected, or one of a tuple of them."""
    return outcomes.keys() == expected.keys() and all(
        o == expected[t] or (isinstance(expected[t], tuple) and o in expected[t])
        for t, o in outcomes.items()
    )


def _mark(tmp_path: Path, task: str) -> float | None:
    """When the task's command started (its `date` mark), once the mark is written."""
    path = tmp_path / f"{task}.mark"
    text = path.read_text().strip() if path.exists() else ""  # the shell creates it first
    return float(text) if text else None


def _waiting_since(url: str) -> float | None:
    """When the oldest statement of cronctl that waits for a lock began (epoch), if any."""
    import psycopg2

    conn = psycopg2.connect(url)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT extract(epoch FROM min(query_start)) FROM pg_stat_activity "
                "WHERE application_name = 'cronctl' AND wait_event_type = 'Lock'"
            )
            found = cur.fetchone()[0]
            return float(found) if found is not None else None
    finally:
        conn.close()


class Blocked:
    """A `cronctl` process and when the store first kept one of its statements waiting."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process, self.url = process, url
        self.since: float | None = None

    def watch(self, until: Any = None) -> None:
        """Note when cronctl first waits on the lock, until ``until()`` or the process ends."""

        def done() -> bool:
            if self.since is None:
                self.since = _waiting_since(self.url)
            return self.process.poll() is not None or (until is not None and until())

        # Each look opens a connection: a slower pace than wait_for's own.
        wait_for(done, "cronctl to wait on the lock, or end", BOUND_S, every=0.05)


def _run_while(cli: Cli, tmp_path: Path, url: str, statement: str) -> tuple[Blocked, str, str]:
    """`run --json` while another session holds what ``statement`` locks: the run (watched
    to its end), its stdout and stderr."""
    with locked(url, statement):
        run = cli.popen("run", "--json", "--now", T, env=_env(tmp_path, url))
        with reaped(run):
            blocked = Blocked(run, url)
            blocked.watch()
            out, err = run.communicate(timeout=BOUND_S)
    assert "Traceback" not in err, err
    return blocked, out, err


# Which of cronctl's tables is locked, and what each task then records: a table read by the
# run's first question (the schema version and the pauses) makes every guarded task fail; after
# one statement past its timeout the store counts as unreachable for the rest of the run, so
# with claims locked "solo" fails too unless its lock was taken before the claims timed out.
CASES: dict[str, dict[str, Any]] = {
    "cronctl.claims": {"one": "error", "solo": ("ok", "error"), "plain": "ok"},
    "cronctl.holders": {"one": "ok", "solo": "error", "plain": "ok"},
    "cronctl.pauses": {"one": "error", "solo": "error", "plain": "ok"},
    "cronctl.meta": {"one": "error", "solo": "error", "plain": "ok"},
}


@pytest.mark.parametrize("table", [*CASES, "cronctl.runs"])
def test_a_locked_table_ends_run_in_bounded_time(
    cli: Cli, store: str, tmp_path: Path, table: str
) -> None:
    write_schedule(tmp_path / "schedules.toml", TASKS)
    blocked, out, err = _run_while(
        cli, tmp_path, store, f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"
    )
    run = blocked.process
    outcomes = {r["task"]: r["outcome"] for r in json.loads(out)["runs"]}
    expected = CASES.get(table, {"one": "ok", "solo": "ok", "plain": "ok"})
    assert _matches(outcomes, expected), err
    assert SECRET not in err and SECRET not in out
    if table == "cronctl.runs":
        # The tasks ran; only the fleet record waits (in the outbox) for the next run.
        assert run.returncode == 0, err
        assert "cronctl: warning: coordination store unreachable (postgresql://postgres:***@" in err
        assert "this run's records wait in" in err, err
    else:
        assert run.returncode == 1, err
        assert "coordination store unreachable (postgresql://postgres:***@" in err, err
        assert "did not answer in time" in err, err
    # Nothing left open (that the plain task starts while cronctl waits: below).
    assert _outcomes(cli, tmp_path, store) == outcomes
    assert blocked.since is not None, "cronctl never waited on the lock"


# What keeps cronctl waiting: a table locked (the run's first question, the claims, a lock's
# holder row, the schema check) or the advisory lock of a migration another machine runs.
HOLDS = {
    **{table: f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE" for table in CASES},
    "migration": f"SELECT pg_advisory_lock({_MIGRATE_KEY})",
}


@pytest.mark.parametrize("held", HOLDS)
def test_a_plain_task_starts_while_the_store_keeps_run_waiting(
    cli: Cli, pg_url: str, request: pytest.FixtureRequest, tmp_path: Path, held: str
) -> None:
    # A migration meets a fresh database; a locked table, one with cronctl's schema.
    url = pg_url if held == "migration" else request.getfixturevalue("store")
    write_schedule(tmp_path / "schedules.toml", TASKS)
    with contextlib.ExitStack() as lock:
        lock.enter_context(locked(url, HOLDS[held]))
        env = _env(tmp_path, url)
        with reaped(cli.popen_code(PATIENT_CRONCTL, "run", "--json", "--now", T, env=env)) as run:
            # Before: the plain task waited with the guarded ones for the store's answer.
            wait_for(lambda: _mark(tmp_path, "plain") or run.poll() is not None, "plain", BOUND_S)
            wait_for(lambda: _waiting_since(url) or run.poll() is not None, "a wait", BOUND_S)
            assert run.poll() is None, run.communicate()  # still held: the lock is ours
            lock.close()
            out, err = run.communicate(timeout=BOUND_S)  # the lock released: the run goes on
    assert "Traceback" not in err and SECRET not in err, err
    outcomes = {r["task"]: r["outcome"] for r in json.loads(out)["runs"]}
    assert outcomes["plain"] == "ok", err
    assert _final(_outcomes(cli, tmp_path, url)), err


def _final(history: dict[str, str]) -> bool:
    return not any(o in ("running", "pending") for o in history.values())


# The tasks a locked table does not hold back: they may have ended before the signal came.
NOT_HELD_BACK = {
    "cronctl.pauses": {"plain"},
    "cronctl.claims": {"plain", "solo"},
    "cronctl.holders": {"plain", "one"},
    "cronctl.runs": {"plain", "one", "solo"},
}


# Where `run` waits: its first question (pauses), the claims (before any task), the lock's own
# connection (the guarded task's worker), the fleet records (after every task).
@pytest.mark.parametrize(
    "table", ["cronctl.pauses", "cronctl.claims", "cronctl.holders", "cronctl.runs"]
)
def test_sigterm_is_acted_on_while_run_waits_for_a_locked_table(
    cli: Cli, store: str, tmp_path: Path, table: str
) -> None:
    write_schedule(tmp_path / "schedules.toml", TASKS)
    with locked(store, f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"):
        run = cli.popen_code(
            PATIENT_CRONCTL, "run", "--json", "--now", T, env=_env(tmp_path, store)
        )
        with reaped(run):
            blocked = Blocked(run, store)
            blocked.watch(until=lambda: blocked.since is not None)
            assert blocked.since is not None, "cronctl never waited on the lock"
            run.send_signal(signal.SIGTERM)
            # Before: the signal waited for the lock timeout (here ten minutes), then `run`
            # went on: it ends here with the lock still held, or the bound fails it.
            out, err = run.communicate(timeout=BOUND_S)
    assert "Traceback" not in err, err
    assert run.returncode == 143, err
    outcomes = {r["task"]: r["outcome"] for r in json.loads(out)["runs"]}
    for task, outcome in outcomes.items():
        may_end = task in NOT_HELD_BACK[table]
        assert outcome in (("ok", "interrupted") if may_end else ("interrupted",)), err
    history = _outcomes(cli, tmp_path, store)
    assert history == outcomes and _final(history), history
    assert SECRET not in err


@pytest.mark.parametrize("table", ["cronctl.claims", "cronctl.pauses"])
def test_under_work_a_locked_table_does_not_make_the_tick_late(
    cli: Cli, store: str, tmp_path: Path, table: str
) -> None:
    write_schedule(tmp_path / "schedules.toml", TASKS)
    with contextlib.ExitStack() as lock:
        lock.enter_context(locked(store, f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
        worker = subprocess.Popen(
            [sys.executable, "-c", PATIENT + NEAR_BOUNDARY, "work", "--grace", "10"],
            cwd=tmp_path,
            env={**cli.env, **_env(tmp_path, store)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        with reaped(worker):
            blocked = Blocked(worker, store)
            # The plain task runs while the tick's guarded tasks wait on the store, which holds
            # them for as long as the lock is ours. Before: the whole tick waited behind it.
            blocked.watch(until=lambda: blocked.since is not None and _mark(tmp_path, "plain"))
            assert worker.poll() is None, worker.communicate()
            assert _mark(tmp_path, "plain") is not None, "the plain task waited for the store"
            lock.close()
            # The lock released: the guarded tasks go on, their rows recorded, then stop.
            wait_for(lambda: _final(_outcomes(cli, tmp_path, store)), "every row final", BOUND_S)
            worker.send_signal(signal.SIGTERM)
            _, err = worker.communicate(timeout=BOUND_S)
    assert worker.returncode == 0, err
    history = _outcomes(cli, tmp_path, store)
    assert history["plain"] == "ok", (history, err)
    assert SECRET not in err


def test_a_migration_held_by_another_session_ends_run_in_bounded_time(
    cli: Cli, pg_url: str, tmp_path: Path
) -> None:
    # A fresh database: the run must create the schema, under the advisory lock another
    # machine holds while it migrates (here, for ever).
    write_schedule(tmp_path / "schedules.toml", TASKS)
    blocked, out, err = _run_while(
        cli, tmp_path, pg_url, f"SELECT pg_advisory_lock({_MIGRATE_KEY})"
    )
    run = blocked.process
    outcomes = {r["task"]: r["outcome"] for r in json.loads(out)["runs"]}
    assert outcomes == {"one": "error", "solo": "error", "plain": "ok"}, err
    assert run.returncode == 1, err
    assert "coordination store unreachable (postgresql://postgres:***@" in err, err
    assert "did not answer in time" in err and SECRET not in err, err
    assert _final(_outcomes(cli, tmp_path, pg_url))
    assert blocked.since is not None, err


def test_a_locked_schema_check_is_bounded_in_doctor_and_fleet_views(
    cli: Cli, store: str, tmp_path: Path
) -> None:
    write_schedule(tmp_path / "schedules.toml", TASKS)
    with locked(store, "LOCK TABLE cronctl.meta IN ACCESS EXCLUSIVE MODE"):
        for args in (["doctor"], ["status", "--fleet"], ["pause", "one"]):
            result = cli(*args, env=_env(tmp_path, store), timeout=BOUND_S)
            assert result.returncode != 0, (args, result.stdout, result.stderr)
            said = result.stdout + result.stderr
            assert "postgresql://postgres:***@" in said, (args, said)
            assert "did not answer in time" in said and SECRET not in said, (args, said)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A TCP port that accepts connections and never says a word (a hung proxy, a server
    that cannot start a backend)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[socket.socket] = []
    server.settimeout(0.2)
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    done.set()
    thread.join()
    for conn in accepted:
        conn.close()
    server.close()


def _silent_env(tmp_path: Path, port: int) -> dict[str, str]:
    """Machine a's environment with a store, at ``port``, that never answers."""
    return _env(tmp_path, f"postgresql://postgres:{SECRET}@127.0.0.1:{port}/db?sslmode=disable")


def test_a_store_that_never_answers_the_connect_is_given_its_timeout_only(
    cli: Cli, tmp_path: Path, silent_port: int
) -> None:
    write_schedule(tmp_path / "schedules.toml", TASKS)
    env = _silent_env(tmp_path, silent_port)
    result = cli("run", "--json", "--now", T, env=env, timeout=BOUND_S)
    outcomes = {r["task"]: r["outcome"] for r in json.loads(result.stdout)["runs"]}
    assert outcomes == {"one": "error", "solo": "error", "plain": "ok"}, result.stderr
    assert result.returncode == 1, result.stderr
    where = f"coordination store unreachable (postgresql://postgres:***@127.0.0.1:{silent_port}"
    assert where in result.stderr, result.stderr
    assert "timeout expired" in result.stderr and SECRET not in result.stderr, result.stderr


def test_a_plain_task_starts_while_the_connect_to_a_silent_store_waits(
    cli: Cli, tmp_path: Path, silent_port: int
) -> None:
    write_schedule(tmp_path / "schedules.toml", TASKS)
    env = _silent_env(tmp_path, silent_port)
    with reaped(cli.popen_code(PATIENT_CRONCTL, "run", "--json", "--now", T, env=env)) as run:
        # The plain task waits PAUSES_WAIT_S for the store, not the connect (ten minutes here).
        wait_for(lambda: _mark(tmp_path, "plain") or run.poll() is not None, "plain", BOUND_S)
        # The mark is written before the task's shell exits: a signal then would interrupt it.
        wait_for(lambda: run.poll() is not None or not children(run.pid), "plain's end", BOUND_S)
        assert run.poll() is None, run.communicate()  # the connect still waits
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=BOUND_S)
    assert run.returncode == 143, err
    outcomes = {r["task"]: r["outcome"] for r in json.loads(out)["runs"]}
    assert outcomes["plain"] == "ok" and SECRET not in err, err
