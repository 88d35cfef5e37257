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
  On the holder's own machine the row's process identities decide instead (coord/liveness.py):
  held while the command lives (also when it closed its descriptors and its cronctl died),
  or, before the command is named, while the holder's cronctl lives and the row is fresh; a
  row whose processes are gone holds nothing, however fresh. "Own machine" is the row's
  boot id with its pid namespace, never its host name (``CRONCTL_HOST`` may give a machine
  two). A row of an older cronctl has a bare boot id, which cannot say which namespace its
  pids count in: it is judged as another machine's, by the advisory lock and its freshness.

The watcher is the only reader of the socket between queries, and every query on the lock's
connection goes through one mutex: a reply to a query of the run's own thread (naming the
command) is never taken for the session's end. A readable socket is checked with the
heartbeat itself; only a connection that is really gone is taken back.

What remains: a lost session while cronctl itself is dead (two faults at once) leaves the task
unguarded; see README "Fleets without a shared file system".
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
from cronctl.coord.postgres.conn import connect, failure_message, holder_from_row
from cronctl.core.process_id import ProcessId
from cronctl.edge.process import procs

HEARTBEAT_S = 5.0
FRESH_S = 15
RESTART_GRACE_S = 30
RETRY_S = 1.0
#: While our own cut session is still letting go of the lock, look again this often, on one
#: connection, for at most DYING_S; then every RETRY_S.
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
    """A signed 64-bit advisory lock key for the task (sha256: collisions are negligible)."""
    digest = hashlib.sha256(b"cronctl overlap\0" + task.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _key_parts(key: int) -> dict[str, int]:
    unsigned = key & 0xFFFFFFFFFFFFFFFF
    return {"hi": unsigned >> 32, "lo": unsigned & 0xFFFFFFFF}


def is_held(cur: Any, task: str, skipped: rows.Skipped) -> bool:
    """Whether any session holds the task's advisory lock now, or the holder row names a
    command of this machine that still runs (it closed the lock's socket and its cronctl
    died): what a real contender here would find (:func:`_attempt`)."""
    cur.execute(_HOLDERS_OF, _key_parts(lock_key(task)))
    if cur.fetchone() is not None:
        return True
    cur.execute(_HOLDER_ROW, {"task": task})
    row = cur.fetchone()
    if row is None:
        return False
    host, pid, started, command_pid, command_start, boot = row
    if not (command_pid and command_start is not None and boot):
        return False
    try:
        command = _command(command_pid, command_start, boot)
        holder = holder_from_row(host, pid, started, None, command)
    except rows.BadRow as problem:
        skipped.skip("holders", task, problem)
        return False
    return command_lives(holder)


def try_lock(
    url: str,
    task: str,
    *,
    lease: timedelta | None,
    now: datetime,
    host: str,
    pid: int,
    skipped: rows.Skipped,
    timeout: timedelta | None = None,
) -> Overlap:
    """Take the task's lock on a new connection, without waiting; a holder row that cannot
    be read is skipped (named once), as if there were none: the advisory lock decides."""
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
    if host is None:
        return bool(ok), None, False
    try:
        command = _command(command_pid, command_start, boot)
        holder = holder_from_row(host, pid, started, timeout_s, command)
    except rows.BadRow as problem:
        skipped.skip("holders", params["task"], problem)
        return bool(ok), None, False
    if other and boot and boot == procs.boot_id():  # this machine, whatever its host name
        fresh = _lives_here(holder, pid_start, bool(fresh))
    return bool(ok), holder, bool(fresh)


def _command(pid: Any, start: Any, boot: Any) -> ProcessId | None:
    """The holder row's command, once it is named (its pid checked: a contender looks it up)."""
    if not (pid and start is not None and boot):
        return None
    return ProcessId(rows.pid(pid, "command_pid") or 0, int(start), str(boot))


def _lives_here(holder: HolderInfo, pid_start: int | None, fresh: bool) -> bool:
    """A holder of this machine counts as holding while its command lives (whatever the
    row's age: the task may have closed the lock's socket and its cronctl died), or, before
    the command is named, while its cronctl lives and the row is fresh. Processes that are
    gone hold nothing (a row a store restart left behind: docs/faults.md)."""
    if holder.command is not None:
        return command_lives(holder)
    boot = procs.boot_id()
    if pid_start is None or not holder.pid:
        return fresh
    return fresh and procs.same_process_alive(ProcessId(holder.pid, int(pid_start), boot))


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
        self._io = threading.Lock()  # one query at a time on the lock's connection
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
        """Note the command's identity in the holder row (pid, start time; the row has the
        boot), so that a contender on this machine sees it alive even when the task closed
        the lock's socket and cronctl died. Best effort: the row is a second line of
        defence, never a reason to stop the run."""
        who = procs.identify(pid)
        with suppress(Exception), self._io, self._conn.cursor() as cur:
            cur.execute(
                "UPDATE cronctl.holders SET command_pid = %s, command_start = %s "
                "WHERE task = %s AND backend = pg_backend_pid()",
                (pid, who.start_ticks if who else None, self._params["task"]),
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
        with suppress(Exception), self._io, self._conn.cursor() as cur:
            cur.execute(
                "DELETE FROM cronctl.holders WHERE task = %(task)s AND backend = pg_backend_pid()",
                self._params,
            )
        _close_quietly(self._conn)

    def _watch(self) -> None:
        """Refresh ``seen`` every HEARTBEAT_S; when the socket turns readable, ask the
        session (the heartbeat) whether it is gone, and only then take the lock back.

        A stop is only ever seen through the select (the wake pipe), with the socket looked
        at in the same call: a stop that lands while the loop pauses after a spurious wake
        would otherwise end the watcher without noticing a session cut just before it (and
        a stolen lock would go unreported)."""
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
        """ "ok": the session lives and the row names it; "busy": the session lives but the
        store did not answer in time (a lock on ``holders``: the advisory lock is still
        ours); "gone": the connection is lost, or the row names another run (an overtaker,
        which ends this session next)."""
        import psycopg2

        with self._io:
            try:
                with self._conn.cursor() as cur:
                    cur.execute(_BEAT, self._params)
                    return "ok" if cur.rowcount else "gone"
            except psycopg2.Error as exc:
                if self._conn.closed or not isinstance(exc, slow_errors()):
                    return "gone"
                return "busy"
            except Exception:
                return "gone"

    def _retake(self) -> None:
        """The session is gone: take the lock back on a new connection, trying again until
        it is ours, another run has it, or (released meanwhile) once.

        One connection is kept while the old session is still letting go of the lock
        (pg_terminate_backend returns before the backend has): looked at every DYING_POLL_S
        for DYING_S, then every RETRY_S, never a connection a try.
        """
        old = self._conn
        old_backend = _backend_pid(old)
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


def slow_errors() -> tuple[type[BaseException], ...]:
    """The errors of a session that lives but waited too long (statement or lock timeout)."""
    import psycopg2.errors

    return (psycopg2.errors.QueryCanceled, psycopg2.errors.LockNotAvailable)


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
