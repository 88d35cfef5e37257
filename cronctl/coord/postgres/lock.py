"""Fleet-wide ``without_overlapping`` on PostgreSQL (docs/fleets-postgresql.md): a session
advisory lock on a connection of its own, whose socket the task inherits (``pass_fds``). When
the session ends under a live task, the ``holders`` row keeps contenders out while the watcher
takes the lock back; on the holder's own machine (boot id with pid namespace, never its host
name) the row's process identities decide instead (coord/liveness.py). The watcher is the
only reader of the socket between queries, and every query on the lock's connection goes
through one mutex: a reply to the run's own query is never taken for the session's end.
"""

from __future__ import annotations

import hashlib
import os
import select
import threading
import time
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from typing import Any

from cronctl.coord.liveness import command_lives
from cronctl.coord.port import HolderInfo, Overlap, StoreUnavailable
from cronctl.coord.postgres import rows
from cronctl.coord.postgres.conn import connect, failure_message, slow_errors
from cronctl.core.process_id import ProcessId
from cronctl.edge.process import procs

HEARTBEAT_S = 5.0
FRESH_S = 15
RESTART_GRACE_S = 30
RETRY_S = 1.0
#: While our own cut session still lets go of the lock: look this often for DYING_S.
DYING_POLL_S = 0.1
DYING_S = 2.0

_TRY = """
WITH got AS (SELECT pg_try_advisory_lock(%(key)s) AS ok)
SELECT got.ok, h.host, h.pid, h.started, h.timeout_s, h.boot, h.pid_start, h.command_pid,
       h.command_start,
       h.backend <> pg_backend_pid() AND (h.seen > now() - make_interval(secs => %(fresh)s)
        OR (h.seen < pg_postmaster_start_time()
            AND now() < pg_postmaster_start_time() + make_interval(secs => %(grace)s))),
       h.backend <> pg_backend_pid()
FROM got LEFT JOIN cronctl.holders h ON h.task = %(task)s"""
_RECORD = """
INSERT INTO cronctl.holders (task, host, pid, started, backend, seen, timeout_s, boot,
                             pid_start)
VALUES (%(task)s, %(host)s, %(pid)s, %(started)s, pg_backend_pid(), now(), %(timeout_s)s,
        %(boot)s, %(pid_start)s)
ON CONFLICT (task) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid,
    started = EXCLUDED.started, backend = EXCLUDED.backend, seen = EXCLUDED.seen,
    timeout_s = EXCLUDED.timeout_s, boot = EXCLUDED.boot, pid_start = EXCLUDED.pid_start,
    command_pid = NULL, command_start = NULL"""
_BEAT = """
UPDATE cronctl.holders SET seen = now()
WHERE task = %(task)s AND backend = pg_backend_pid()"""
_RETAKE = """
SELECT pg_try_advisory_lock(%(key)s) FROM cronctl.holders
WHERE task = %(task)s AND host = %(host)s AND pid = %(pid)s AND started = %(started)s"""
_HOLDER_ROW = """
SELECT host, pid, started, command_pid, command_start, boot FROM cronctl.holders
WHERE task = %(task)s"""
_HOLDERS_OF = """
SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
AND classid = %(hi)s::oid AND objid = %(lo)s::oid AND objsubid = 1"""


def lock_key(task: str) -> int:
    digest = hashlib.sha256(b"cronctl overlap\0" + task.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _holders_of(cur: Any, key: int) -> list[int]:
    """The sessions that hold the advisory lock ``key``."""
    unsigned = key & 0xFFFFFFFFFFFFFFFF
    cur.execute(_HOLDERS_OF, {"hi": unsigned >> 32, "lo": unsigned & 0xFFFFFFFF})
    return [pid for (pid,) in cur.fetchall()]


def is_held(cur: Any, task: str, skipped: rows.Skipped) -> bool:
    """What a real contender here would find (:func:`_attempt`), taking nothing."""
    if _holders_of(cur, lock_key(task)):
        return True
    cur.execute(_HOLDER_ROW, {"task": task})
    host, pid, started, command_pid, command_start, boot = cur.fetchone() or (None,) * 6
    if not (command_pid and command_start is not None and boot):
        return False
    holder = _holder(task, skipped, (host, pid, started, None, command_pid, command_start, boot))
    return holder is not None and command_lives(holder)


def try_lock(
    url: str,
    task: str,
    host: str,
    pid: int,
    skipped: rows.Skipped,
    *,
    lease: timedelta | None,
    now: datetime,
    timeout: timedelta | None = None,
) -> Overlap:
    """A holder row that cannot be read is skipped: the advisory lock decides."""
    import psycopg2

    me = procs.identify(pid)
    params = {"key": lock_key(task), "task": task, "host": host, "pid": pid,
              "started": now.astimezone(UTC), "fresh": FRESH_S,
              "grace": RESTART_GRACE_S,
              "timeout_s": timeout.total_seconds() if timeout else None,
              "boot": procs.boot_id() or None,
              "pid_start": me.start_ticks if me is not None else None}  # fmt: skip
    conn = connect(url)
    try:
        with conn.cursor() as cur:
            ok, holder, fresh = _attempt(cur, params, skipped)
            if ok and not fresh:
                cur.execute(_RECORD, params)
                return Overlap("acquired", PgLock(conn, url, params), None)
            if ok:  # a holder lost its session and is taking the lock back: leave it to it
                cur.execute("SELECT pg_advisory_unlock(%(key)s)", params)
            if holder is not None and lease is not None and now - holder.started > lease:
                return _overtake(conn, cur, url, params, holder)
        conn.close()
        return Overlap("held", None, holder)
    except psycopg2.Error as exc:
        conn.close()
        raise StoreUnavailable(failure_message(url, exc)) from None
    except BaseException:
        conn.close()
        raise


def _attempt(
    cur: Any, params: dict[str, Any], skipped: rows.Skipped
) -> tuple[bool, HolderInfo | None, bool]:
    """(whether this session got the advisory lock, the holder row's holder, whether that
    holder still counts as holding although the advisory lock may be free)."""
    cur.execute(_TRY, params)
    ok, host, pid, started, timeout_s, boot, pid_start, command_pid, command_start, fresh, other = (
        cur.fetchone()
    )
    values = (host, pid, started, timeout_s, command_pid, command_start, boot)
    holder = None if host is None else _holder(params["task"], skipped, values)
    if holder is None:
        return bool(ok), None, False
    # This machine, whatever its host name; an older cronctl's bare boot id never matches.
    if other and boot and boot == procs.boot_id():
        fresh = _lives_here(holder, pid_start, bool(fresh))
    return bool(ok), holder, bool(fresh)


def _holder(task: str, skipped: rows.Skipped, values: tuple[Any, ...]) -> HolderInfo | None:
    """None when a value of the row cannot be used (named once: the advisory lock decides)."""
    host, pid, started, timeout_s, command_pid, command_start, boot = values
    try:
        command = None
        if command_pid and command_start is not None and boot:  # named once it started
            command = ProcessId(
                rows.pid(command_pid, "command_pid") or 0, int(command_start), str(boot)
            )
        seconds = rows.seconds(timeout_s, "timeout_s")
        return HolderInfo(
            rows.name(host, "host"),
            rows.pid(pid, "pid") or 0,
            rows.instant(started, "started"),
            command,
            timedelta(seconds=seconds) if seconds is not None else None,
        )
    except rows.BadRow as problem:
        skipped.skip("holders", task, problem)
        return None


def _lives_here(holder: HolderInfo, pid_start: int | None, fresh: bool) -> bool:
    """Held while the command lives, whatever the row's age (the task may have closed the
    socket and its cronctl died); before it is named, while its cronctl lives and the row is
    fresh. Processes that are gone hold nothing (docs/faults.md)."""
    if holder.command is not None:
        return command_lives(holder)
    if pid_start is None or not holder.pid:
        return fresh
    me = ProcessId(holder.pid, int(pid_start), procs.boot_id())
    return fresh and procs.same_process_alive(me)


def _overtake(conn: Any, cur: Any, url: str, params: dict[str, Any], holder: HolderInfo) -> Overlap:
    """End the session of a holder past its lease and take the lock. The holder row is made
    ours first: the holder's watcher takes its lock back only while the row names it."""
    cur.execute(_RECORD, params)
    for backend in _holders_of(cur, params["key"]):
        cur.execute("SELECT pg_terminate_backend(%s, 5000)", (backend,))
    cur.execute("SELECT pg_try_advisory_lock(%(key)s)", params)
    if not cur.fetchone()[0]:
        conn.close()
        return Overlap("held", None, holder)
    cur.execute(_RECORD, params)
    return Overlap("overtaken", PgLock(conn, url, params), holder)


class PgLock:
    """A held advisory lock; :attr:`fd` is its connection's socket, for ``pass_fds``."""

    def __init__(self, conn: Any, url: str, params: dict[str, Any]) -> None:
        self._conn = conn
        self._fd: int = conn.fileno()
        self._url = url
        self._params = params
        self._stop = threading.Event()
        self._io = threading.Lock()  # one query at a time on the lock's connection
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC)  # release() wakes the watcher
        self._released = False
        self.lost: str | None = None
        self._watcher = threading.Thread(target=self._watch, name="cronctl-pg-lock", daemon=True)
        self._watcher.start()

    @property
    def fd(self) -> int:
        return self._fd

    def record_command(self, pid: int) -> None:
        """Best effort: the row is a second line of defence, never a reason to stop the run."""
        who = procs.identify(pid)
        with suppress(Exception), self._io, self._conn.cursor() as cur:
            cur.execute(
                "UPDATE cronctl.holders SET command_pid = %s, command_start = %s "
                "WHERE task = %s AND backend = pg_backend_pid()",
                (pid, who.start_ticks if who else None, self._params["task"]),
            )

    def release(self) -> None:
        """The socket becomes /dev/null before the close (_close_quietly): the goodbye goes
        nowhere, and a process of the task still holding the socket keeps the session."""
        if self._released:
            return
        self._released = True
        self._stop.set()
        os.write(self._wake_w, b"x")
        self._watcher.join()
        os.close(self._wake_r)
        os.close(self._wake_w)
        with suppress(Exception), self._io, self._conn.cursor() as cur:
            cur.execute(
                "DELETE FROM cronctl.holders WHERE task = %(task)s AND backend = pg_backend_pid()",
                self._params,
            )
        _close_quietly(self._conn)

    def _watch(self) -> None:
        """Refresh ``seen`` every HEARTBEAT_S; a readable socket is checked with the heartbeat.
        A stop is only seen through the select, with the socket in the same call: a stop
        landing while the loop pauses after a spurious wake would otherwise miss a session
        cut just before it (and a stolen lock would go unreported)."""
        while True:
            try:
                readable, _, _ = select.select([self._fd, self._wake_r], [], [], HEARTBEAT_S)
            except (OSError, ValueError):
                readable = [self._fd]
            stopping = self._stop.is_set()
            if stopping and self._fd not in readable:
                return
            state = self._beat()
            if state == "gone":
                self._retake()  # tried once also when stopping: what became of the lock?
            if stopping:
                return
            if state != "gone" and self._fd in readable:
                # Something else woke us (a notice, a reply read meanwhile): never spin.
                self._stop.wait(RETRY_S / 5)

    def _beat(self) -> str:
        """ "busy": the store did not answer in time (the advisory lock is still ours);
        "gone": the connection is lost, or the row names another run (an overtaker)."""
        import psycopg2

        with self._io:
            try:
                with self._conn.cursor() as cur:
                    cur.execute(_BEAT, self._params)
                    return "ok" if cur.rowcount else "gone"
            except psycopg2.Error as exc:
                slow = isinstance(exc, slow_errors()) and not self._conn.closed
                return "busy" if slow else "gone"
            except Exception:
                return "gone"

    def _retake(self) -> None:
        """Take the lock back until it is ours, another run has it, or (released meanwhile)
        once; one connection is kept while the old session lets go (pg_terminate_backend)."""
        old, old_backend = self._conn, None
        with suppress(Exception):  # as libpq remembers it: no round trip
            old_backend = int(old.get_backend_pid())
        conn: Any = None
        tried = False
        dying_until: float | None = None
        while not (tried and self._stop.is_set()):
            tried = True
            try:
                if conn is None:
                    conn = connect(self._url)
                with conn.cursor() as cur:
                    # Only while the holder row still names this run: a lease overtaker
                    # rewrites it before ending this session.
                    cur.execute(_RETAKE, self._params)
                    row = cur.fetchone()
                    dying = row is not None and not row[0]
                    if dying and _held_only_by(cur, self._params["key"], old_backend):
                        now = time.monotonic()
                        dying_until = dying_until or now + DYING_S
                        self._stop.wait(DYING_POLL_S if now < dying_until else RETRY_S)
                        continue
                    if not (row or [False])[0]:
                        _close_quietly(conn)
                        self.lost = "another run took the overlap lock after this one lost it"
                        break
                    cur.execute(_RECORD, self._params)
            except Exception:  # still unreachable: try again in a second
                if conn is not None:
                    _close_quietly(conn)
                conn = None
                self._stop.wait(RETRY_S)
                continue
            with self._io:
                self._conn, self._fd = conn, conn.fileno()
            _close_quietly(old)
            return
        if conn is not None and self.lost is None:
            _close_quietly(conn)
        self._stop.set()
        self.lost = self.lost or "the overlap lock's session was lost"


def _held_only_by(cur: Any, key: int, backend: int | None) -> bool:
    return backend is not None and set(_holders_of(cur, key)) <= {backend}


def _close_quietly(conn: Any) -> None:
    with suppress(Exception):
        fd = conn.fileno()
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        os.dup2(null, fd, inheritable=False)
        os.close(null)
    with suppress(Exception):
        conn.close()
