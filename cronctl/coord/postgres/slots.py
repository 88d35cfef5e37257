"""A ``[[group]]``'s slots across the fleet: session advisory locks (docs/fleets-postgresql.md).

Slot N of a group is the two-key advisory lock (hash of the group's stored name, N), held by
a connection of its own for one task's run. The connection stays cronctl's (close-on-exec,
never handed to the task), so the slot is freed when that cronctl lets go, and when it dies:
a killed process's socket is closed by its kernel at once, and a dead machine's session ends
through the TCP keepalives on both ends (about 90 s, docs/fleets-postgresql.md). A release
unlocks before it closes, so the next machine's try finds the slot free. The lock is
only tried, never waited for, and the session's statement and lock timeouts bound every
query, so a blocked store never holds a run longer than those.

The two-key form (``objsubid = 2`` in ``pg_locks``) never meets an overlap lock, which uses
the one-key form.
"""

from __future__ import annotations

import hashlib
from contextlib import suppress
from typing import Any

__all__ = ["PgSlot", "group_key", "take"]

# Slots are tried in order and the first free one is kept: the scan stops at the first row
# the condition lets through (LIMIT over a plain function scan, no ORDER BY or join that
# would make PostgreSQL evaluate the condition on more rows than it returns).
_TAKE = """
SELECT s FROM generate_series(0, %(size)s - 1) AS s
WHERE pg_try_advisory_lock(%(key)s, s) LIMIT 1"""


def group_key(stored: str) -> int:
    """A signed 32-bit key for a group's stored name (``PROJECT/GROUP``)."""
    digest = hashlib.sha256(b"cronctl group\0" + stored.encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


class PgSlot:
    """A held slot: the connection whose session holds its advisory lock."""

    def __init__(self, conn: Any, number: int) -> None:
        self._conn: Any = conn
        self.number = number

    def release(self) -> None:
        """Unlock the slot, then end the session; idempotent.

        The unlock is what frees the slot at once: a closed session's locks are freed by the
        server a moment after the client has gone, and another machine trying the slot in
        that moment would find it still held."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        # A lost connection has freed the slot already.
        with suppress(Exception), conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock_all()")
        with suppress(Exception):
            conn.close()


def take(conn: Any, stored: str, size: int) -> int | None:
    """Take the first free slot of the group on ``conn``: its number, or None when all are
    held (``conn`` then holds nothing and can try again later)."""
    with conn.cursor() as cur:
        cur.execute(_TAKE, {"key": group_key(stored), "size": size})
        row = cur.fetchone()
    return None if row is None else int(row[0])
