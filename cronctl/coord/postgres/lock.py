"""Fleet-wide ``without_overlapping`` on PostgreSQL (docs/fleets-postgresql.md).

The lock is a session advisory lock on a connection of its own. Its socket is handed to the
task (``pass_fds``), so the session, and the lock, lives as long as any of the task's
processes holds the descriptor, also after cronctl is ``kill -9``ed; when the last one exits
the server sees the socket close and frees the lock. A dead machine's session ends through
the server-side TCP keepalives set on the connection (90 s).

A session can also end under a live task: the server restarted, an operator ran
``pg_terminate_backend``, a network cut. Then the advisory lock is gone while the task runs.
Two things keep a contender out meanwhile:

- the row in ``cronctl.holders`` (host, pid, start, backend, ``seen``): the holder's cronctl
  refreshes ``seen`` every few seconds while it waits for the task, and watches the socket;
  when the session is lost it takes the lock again on a new connection;
- a contender that gets the advisory lock but finds a holder row seen within FRESH_S, or seen
  before a server restart that happened less than RESTART_GRACE_S ago (however long the server
  was down), treats the lock as held: the holder is given that long to take its lock back.

What remains: a lost session while cronctl itself is dead (two faults at once) leaves the task
unguarded; see README "Fleets without a shared file system".
"""

from __future__ import annotations

import hashlib
import os
import select
import threading
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from typing import Any

from cronctl.coord.port import HolderInfo, Overlap, StoreUnavailable
from cronctl.coord.postgres.conn import connect, holder_from_row

HEARTBEAT_S = 5.0
FRESH_S = 15
RESTART_GRACE_S = 30
RETRY_S = 1.0

_TRY = """
WITH got AS (SELECT pg_try_advisory_lock(%(key)s) AS ok)
SELECT got.ok, h.host, h.pid, h.started, h.timeout_s,
       h.backend <> pg_backend_pid() AND (h.seen > now() - make_interval(secs => %(fresh)s)
        OR (h.seen < pg_postmaster_start_time()
            AND now() < pg_postmaster_start_time() + make_interval(secs => %(grace)s)))
FROM got LEFT JOIN cronctl.holders h ON h.task = %(task)s"""
_RECORD = """
INSERT INTO cronctl.holders (task, host, pid, started, backend, seen, timeout_s)
VALUES (%(task)s, %(host)s, %(pid)s, %(started)s, pg_backend_pid(), now(), %(timeout_s)s)
ON CONFLICT (task) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid,
    started = EXCLUDED.started, backend = EXCLUDED.backend, seen = EXCLUDED.seen,
    timeout_s = EXCLUDED.timeout_s, command_pid = NULL"""
_RETAKE = """
SELECT pg_try_advisory_lock(%(key)s) FROM cronctl.holders
WHERE task = %(task)s AND host = %(host)s AND pid = %(pid)s AND started = %(started)s"""
_HOLDERS_OF = """
SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
AND classid = %(hi)s::oid AND objid = %(lo)s::oid AND objsubid = 1"""


def lock_key(task: str) -> int:
    """A signed 64-bit advisory lock key for the task (sha256: collisions are negligible)."""
    digest = hashlib.sha256(b"cronctl overlap\0" + task.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _key_parts(key: int) -> dict[str, int]:
    unsigned = key & 0xFFFFFFFFFFFFFFFF
    return {"hi": unsigned >> 32, "lo": unsigned & 0xFFFFFFFF}


def is_held(cur: Any, task: str) -> bool:
    """Whether any session holds the task's advisory lock now."""
    cur.execute(_HOLDERS_OF, _key_parts(lock_key(task)))
    return cur.fetchone() is not None


def try_lock(
    url: str,
    task: str,
    *,
    lease: timedelta | None,
    now: datetime,
    host: str,
    pid: int,
    timeout: timedelta | None = None,
) -> Overlap:
    """Take the task's lock on a new connection, without waiting."""
    import psycopg2

    params = {"key": lock_key(task), "task": task, "host": host, "pid": pid,
              "started": now.astimezone(UTC), "fresh": FRESH_S,
              "grace": RESTART_GRACE_S,
              "timeout_s": timeout.total_seconds() if timeout else None}  # fmt: skip
    conn = connect(url)
    try:
        with conn.cursor() as cur:
            ok, holder, fresh = _attempt(cur, params)
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
        raise StoreUnavailable(f"coordination store unreachable: {exc}".strip()) from None
    except BaseException:
        conn.close()
        raise


def _attempt(cur: Any, params: dict[str, Any]) -> tuple[bool, HolderInfo | None, bool]:
    cur.execute(_TRY, params)
    ok, host, pid, started, timeout_s, fresh = cur.fetchone()
    holder = holder_from_row(host, pid, started, timeout_s) if host is not None else None
    return bool(ok), holder, bool(fresh)


def _overtake(conn: Any, cur: Any, url: str, params: dict[str, Any], holder: HolderInfo) -> Overlap:
    """The holder ran past its lease: end its session (its processes keep running, as with a
    file lock's orphaned inode) and take the lock.

    The holder row is made ours first: the stuck holder's watcher takes its lock back only
    while the row still names it, so it cannot win the lock back in the gap."""
    cur.execute(_RECORD, params)
    cur.execute(_HOLDERS_OF, _key_parts(params["key"]))
    for (backend,) in cur.fetchall():
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
        """Keep ``conn`` (holding the lock) fresh in a watcher thread until released."""
        self._conn = conn
        self._fd: int = conn.fileno()
        self._url = url
        self._params = params
        self._stop = threading.Event()
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC)  # release() wakes the watcher
        self._released = False
        self.lost: str | None = None
        self._watcher = threading.Thread(target=self._watch, name="cronctl-pg-lock", daemon=True)
        self._watcher.start()

    @property
    def fd(self) -> int:
        """The socket whose session holds the lock."""
        return self._fd

    def record_command(self, pid: int) -> None:
        """Note the command's pid in the holder row (for operators; best effort: the row is a
        second line of defence, never a reason to stop the run)."""
        with suppress(Exception), self._conn.cursor() as cur:
            cur.execute(
                "UPDATE cronctl.holders SET command_pid = %s "
                "WHERE task = %s AND backend = pg_backend_pid()",
                (pid, self._params["task"]),
            )

    def release(self) -> None:
        """Forget the holder row and drop cronctl's reference to the socket, idempotently.

        The socket is first replaced by /dev/null (dup2), so closing the connection sends its
        goodbye nowhere: a process of the task still holding the socket keeps the session.
        """
        if self._released:
            return
        self._released = True
        self._stop.set()
        os.write(self._wake_w, b"x")
        self._watcher.join()
        os.close(self._wake_r)
        os.close(self._wake_w)
        with suppress(Exception), self._conn.cursor() as cur:
            cur.execute(
                "DELETE FROM cronctl.holders WHERE task = %(task)s AND backend = pg_backend_pid()",
                self._params,
            )
        _close_quietly(self._conn)

    def _watch(self) -> None:
        """Refresh ``seen``; take the lock back on a new connection if the session is lost."""
        while not self._stop.is_set():
            try:
                readable, _, _ = select.select([self._fd, self._wake_r], [], [], HEARTBEAT_S)
            except (OSError, ValueError):
                readable = [self._fd]
            if self._stop.is_set():
                if self._fd in readable:  # the session ended as the task did: what of the lock?
                    self._retake()
                return
            if not readable and self._beat():
                continue
            self._retake()

    def _beat(self) -> bool:
        try:
            with self._conn.cursor() as cur:
                cur.execute(
                    "UPDATE cronctl.holders SET seen = now() "
                    "WHERE task = %(task)s AND backend = pg_backend_pid()",
                    self._params,
                )
                return bool(cur.rowcount)
        except Exception:
            return False

    def _retake(self) -> None:
        """The session is gone (or answers no more): keep trying until it is ours again.

        Tried once even when the task has just ended (release() stopped the watcher as the
        session went): whether another run took the lock meanwhile is then still reported.
        """
        old = self._conn
        old_backend = _backend_pid(old)
        tried = False
        # At once, then every RETRY_S: every moment without the lock lets a contender in.
        while not (tried and self._stop.is_set()):
            tried = True
            conn = None
            try:
                conn = connect(self._url)
                with conn.cursor() as cur:
                    # Only while the holder row still names this run: a lease overtaker
                    # rewrites it before ending this session.
                    cur.execute(_RETAKE, self._params)
                    row = cur.fetchone()
                    dying = row is not None and not row[0]
                    if dying and _held_only_by(cur, self._params["key"], old_backend):
                        # Our own session is still dying (pg_terminate_backend returns before
                        # the backend has let go): its lock is ours to take back in a moment.
                        _close_quietly(conn)
                        self._stop.wait(RETRY_S / 10)
                        continue
                    if not (row or [False])[0]:
                        conn.close()
                        self.lost = "another run took the overlap lock after this one lost it"
                        break
                    cur.execute(_RECORD, self._params)
            except Exception:  # still unreachable: try again in a second
                if conn is not None:
                    _close_quietly(conn)
                self._stop.wait(RETRY_S)
                continue
            self._conn, self._fd = conn, conn.fileno()
            _close_quietly(old)
            return
        self._stop.set()
        self.lost = self.lost or "the overlap lock's session was lost"


def _backend_pid(conn: Any) -> int | None:
    """The server process of ``conn``'s session, as libpq remembers it (no round trip)."""
    try:
        return int(conn.get_backend_pid())
    except Exception:
        return None


def _held_only_by(cur: Any, key: int, backend: int | None) -> bool:
    """Whether the advisory lock ``key`` is held by ``backend`` alone (or by nobody any more)."""
    if backend is None:
        return False
    cur.execute(_HOLDERS_OF, _key_parts(key))
    holders = {pid for (pid,) in cur.fetchall()}
    return holders <= {backend}


def _close_quietly(conn: Any) -> None:
    with suppress(Exception):
        fd = conn.fileno()
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        os.dup2(null, fd, inheritable=False)
        os.close(null)
    with suppress(Exception):
        conn.close()
