"""A ``[[group]]``'s slots across the fleet (docs/fleets-postgresql.md#groups-across-the-fleet).

Slot N is the two-key advisory lock (hash of the group's stored name, N), held by a
connection of cronctl's own (close-on-exec) for one task's run. The two-key form
(``objsubid = 2``) never meets an overlap lock, which uses the one-key form.
"""

from __future__ import annotations

import hashlib
from contextlib import suppress
from typing import Any

# The first free slot: LIMIT over a plain function scan stops at the first row the condition
# lets through (an ORDER BY or join would make PostgreSQL try the locks on more rows).
_TAKE = """
SELECT s FROM generate_series(0, %(size)s - 1) AS s
WHERE pg_try_advisory_lock(%(key)s, s) LIMIT 1"""


def group_key(stored: str) -> int:
    digest = hashlib.sha256(b"cronctl group\0" + stored.encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


class PgSlot:
    def __init__(self, conn: Any, number: int) -> None:
        self._conn: Any = conn
        self.number = number

    def release(self) -> None:
        """Unlock, then close: a closed session's locks are freed a moment after the client
        has gone, and another machine trying the slot then would find it still held."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        # A lost connection has freed the slot already.
        with suppress(Exception), conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock_all()")
        with suppress(Exception):
            conn.close()


def take(conn: Any, stored: str, size: int) -> int | None:
    """The first free slot's number, or None (``conn`` then holds nothing)."""
    with conn.cursor() as cur:
        cur.execute(_TAKE, {"key": group_key(stored), "size": size})
        row = cur.fetchone()
    return None if row is None else int(row[0])
