"""The PostgreSQL adapter of the coordination port (docs/fleets-postgresql.md), on psycopg2:
the cheapest driver to import (docs/architecture.md#dependencies-and-why), and as a libpq
wrapper it reads passwords and URL parameters as ``psql`` does. One connection per run for
everything but locks and slots, opened on first use; after one failure every call raises
:class:`StoreUnavailable` at once (one timeout per run).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from cronctl.coord import history, port
from cronctl.coord.postgres import conn as pgconn
from cronctl.coord.postgres import fleet, rows, slots
from cronctl.coord.postgres import lock as pg_lock
from cronctl.coord.postgres.schema import READ_PAUSES, SCHEMA_VERSION, NoSchema, ensure_schema
from cronctl.coord.redact import redact_url
from cronctl.core.runs import FAILED, RunRow

T = TypeVar("T")

#: A claim is kept this long; older occurrences can no longer be claimed (see claim()).
CLAIM_RETENTION = timedelta(days=35)
CLAIM_HORIZON = timedelta(days=30)
#: How long a claim whose run has not started is this machine's without a word from it:
#: renewed while its run waits (a group's slot); a machine frozen past it finds the claim
#: taken over and does not start the run (docs/fleets-postgresql.md#claims-are-leases).
CLAIM_LEASE_S = 20.0
_MINE = "WHERE task = %(task)s AND occurrence = %(when)s AND lease = %(lease)s AND state = 'leased'"
#: The fence: a claim's run is marked started only while the claim is still this machine's.
_START = f"UPDATE cronctl.claims SET state = 'started', started = now() {_MINE}"  # noqa: S608
_RENEW = f"UPDATE cronctl.claims SET expires = now() + make_interval(secs => %(lease_s)s) {_MINE}"  # noqa: S608


class PostgresCoordinator:
    """port.Coordinator and history.FleetHistory in one PostgreSQL database."""

    may_be_unreachable = True

    def __init__(
        self,
        url: str,
        *,
        host: str,
        pid: int,
        project: str | None = None,
        clock: Callable[[], datetime] | None = None,
        reads_only: bool = False,
    ) -> None:
        """Nothing connects until the first call; ``clock`` is what the check-in records;
        ``reads_only``: only the calls that write create or migrate the schema (_read)."""
        self.url = url
        self.reads_only = reads_only
        self.clock = clock or (lambda: datetime.now(UTC))
        self.host = host
        self.pid = pid
        self.scope = fleet.Scope(project)
        self._conn: Any = None
        self._ready = False  # the schema checked (created, migrated) on this connection
        self._failure: str | None = None
        self._pauses: dict[str, port.PauseInfo] | None = None
        self._orphans: list[port.Orphan] = []  # read with the pauses (orphans())
        self._mutex = threading.Lock()  # worker threads share the run's connection
        self._idle: list[Any] = []  # connections that tried a group's slots and hold none
        self.skipped = rows.Skipped()
        # Liveness of this process's claims: a session advisory lock key held by the run's
        # connection while a claim is open (run ids not yet published): close() keeps it.
        self._lease = secrets.randbits(62) or 1
        self._lease_conn: Any = None
        self._open: set[str] = set()
        self._kept = False  # see close()

    @property
    def fleet(self) -> PostgresCoordinator:
        return self

    @property
    def skipped_rows(self) -> int:
        return self.skipped.count

    def describe(self) -> str:
        return redact_url(self.url)

    def _read(self, work: Callable[[Any], T], empty: T) -> T:
        """``empty`` while the database holds no cronctl schema, when reads create none."""
        try:
            return self._call(work, create=not self.reads_only)
        except NoSchema:
            return empty

    def _call(self, work: Callable[[Any], T], create: bool = True) -> T:
        """Run ``work(cursor)`` on the run's connection, the schema created or migrated first
        (``create``); a lost store becomes StoreUnavailable."""
        psycopg2 = pgconn.driver(self.url)

        with self._mutex:
            if self._failure is not None:
                raise port.StoreUnavailable(self._failure)
            # A connection that worked before may have been cut (a server restart, a network
            # blip) while the tasks ran: one fresh connection is tried before giving up.
            retry = self._conn is not None
            while True:
                try:
                    if self._conn is None:
                        self._conn = pgconn.connect(self.url)
                        if self._open:
                            # A new session after a lost one: the open claims' liveness,
                            # before the schema check records gone claimers' runs.
                            with self._conn.cursor() as cur:
                                cur.execute(self._liveness(cur))
                    if not self._ready:
                        self._pauses, self._orphans = ensure_schema(
                            self._conn, self.url, self.skipped, self.scope.owns, create
                        )
                        self._ready = True
                    with self._conn.cursor() as cur:
                        return work(cur)
                except port.StoreUnavailable as exc:
                    self._failure = str(exc)
                    raise
                except psycopg2.Error as exc:
                    if isinstance(exc, pgconn.slow_errors()):
                        # Answering but blocked past the lock or statement timeout: another
                        # try would wait as long again. Unreachable for this run.
                        self._failure = pgconn.failure_message(self.url, exc)
                        raise port.StoreUnavailable(self._failure) from None
                    # A lost server shows as OperationalError, or as a bare DatabaseError
                    # ("server closed the connection unexpectedly") with the connection closed.
                    lost = isinstance(exc, psycopg2.OperationalError | psycopg2.InterfaceError)
                    lost = lost or type(exc) is psycopg2.DatabaseError
                    if not lost and not (self._conn is None or self._conn.closed):
                        # Reachable but refusing (permissions, a damaged schema): the same
                        # handling as unreachable, with what the server said.
                        first = pgconn.first_line(self.url, exc)
                        self._failure = f"coordination store error ({self.describe()}): {first}"
                        # A kept session (close()) is not reused: the next run's connect
                        # checks the schema afresh (another machine may have migrated it).
                        if not self._open:
                            self._drop()
                        raise port.StoreUnavailable(self._failure) from None
                    self._drop()
                    if retry:
                        retry = False
                        continue
                    self._failure = pgconn.unreachable(self.url, exc)
                    raise port.StoreUnavailable(self._failure) from None

    def _drop(self) -> None:
        conn, self._conn, self._ready = self._conn, None, False
        if conn is not None:
            with suppress(Exception):  # a broken connection may fail to close; it is gone
                conn.close()

    def stop_waiting(self) -> None:
        pgconn.stop_waiting()

    def close(self) -> None:
        """Closes the run's connection the first time only: `work`'s coordinator keeps its
        session, so a minute costs no connection (one lost meanwhile is replaced by _call)."""
        with self._mutex:
            if not (self._open or self._kept):  # open claims: their session is the liveness
                self._drop()
            self._kept = True
            self._failure = None
            self._pauses = None
            self._orphans = []
            idle, self._idle = self._idle, []
        for conn in idle:
            with suppress(Exception):
                conn.close()

    def _one(self, sql: str, params: Any = None) -> Any:
        def fetch(cur: Any) -> Any:
            cur.execute(sql, params)
            return cur.fetchone()

        return self._read(fetch, None)

    def check(self) -> port.StoreCheck:
        pgconn.driver(self.url)  # imported first, so "connect" times the connection only
        start = time.perf_counter()
        found = int(self._one("SELECT version FROM cronctl.meta")[0])  # connects, migrates
        connected = time.perf_counter() - start
        before = time.time()
        server = self._one("SELECT now()")[0]  # in UTC, as every instant read (rows.register)
        after = time.time()
        local = datetime.fromtimestamp((before + after) / 2, UTC)
        return port.StoreCheck(connected, after - before, server, local, found, SCHEMA_VERSION)

    def claim(
        self,
        claims: Sequence[port.Claim],
        *,
        now: datetime,
        limit: int | None = None,
        runs: Mapping[port.Claim, str] | None = None,
        leased: AbstractSet[port.Claim] = frozenset(),
        held: set[port.Claim] | None = None,
        until: Mapping[port.Claim, datetime] | None = None,
    ) -> set[port.Claim]:
        """One round trip (cronctl.claim_some). An occurrence older than CLAIM_HORIZON is
        never won: its claim may have been swept, so winning it could run it twice. The
        check-in rides along: a machine that only ever loses its claims is still seen."""
        if not claims or limit == 0:
            return set()
        runs, until = runs or {}, until or {}
        tasks = [self.scope.key(task) for task, _ in claims]
        whens = [when.astimezone(UTC) for _, when in claims]

        def insert(cur: Any) -> set[port.Claim]:
            cur.execute(
                self._check_in(cur)
                + b"; "
                + self._liveness(cur)
                + b"SELECT cronctl.settle_gone(); "
                + cur.mogrify(
                    "SELECT * FROM cronctl.claim_some(%(tasks)s::text[], "
                    "%(whens)s::timestamptz[], %(leased)s::boolean[], %(runs)s::text[], "
                    "%(limit)s, %(host)s, %(pid)s, %(lease)s, %(lease_s)s, %(waits)s::float8[], "
                    "%(now)s::timestamptz - %(horizon)s::interval)",
                    {"tasks": tasks, "whens": whens, "leased": [c in leased for c in claims],
                     "runs": [runs.get(c) for c in claims], "limit": limit, "host": self.host,
                     "pid": self.pid, "lease": self._lease, "lease_s": CLAIM_LEASE_S,
                     "now": now, "horizon": CLAIM_HORIZON,
                     "waits": [(until.get(c, now) - now).total_seconds() for c in claims]},
                )
            )  # fmt: skip
            found = [(self.scope.name(t), w, mine) for t, w, mine in cur.fetchall()]
            won = {(task, when) for task, when, mine in found if mine}
            if held is not None:
                held.update((task, when) for task, when, mine in found if not mine)
            self._open.update(runs[c] for c in won if c in runs)
            return won

        return self._call(insert)

    def keep_claim(self, claim: port.Claim, *, started: bool) -> bool:
        task, when = claim

        def update(cur: Any) -> bool:
            cur.execute(
                self._liveness(cur)
                + cur.mogrify(
                    _START if started else _RENEW,
                    {"task": self.scope.key(task), "when": when.astimezone(UTC),
                     "lease": self._lease, "lease_s": CLAIM_LEASE_S},
                )
            )  # fmt: skip
            return bool(cur.rowcount)

        return self._call(update)

    def orphans(self) -> list[port.Orphan]:
        """As the last read of the pauses found them: no round trip."""
        return [(self.scope.name(t), when, left) for t, when, left in self._orphans]

    def _liveness(self, cur: Any) -> bytes:
        """The statement that makes this session hold the lease key, if it does not yet."""
        if self._lease_conn is self._conn:
            return b""
        self._lease_conn = self._conn
        return bytes(cur.mogrify("SELECT pg_advisory_lock(%s); ", (self._lease,)))

    def claimed(self, task: str, occurrence: datetime) -> bool:
        sql = "SELECT 1 FROM cronctl.claims WHERE task = %s AND occurrence = %s"
        return self._one(sql, (self.scope.key(task), occurrence)) is not None

    def record_end(self, end: port.ChainEnd) -> None:
        self._call(
            lambda cur: cur.execute(
                "INSERT INTO cronctl.chain_ends (task, occurrence, host, outcome, run_id, ended) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (task, occurrence, host) DO UPDATE "
                "SET outcome = EXCLUDED.outcome, run_id = EXCLUDED.run_id, ended = EXCLUDED.ended",
                (self.scope.key(end.task), end.occurrence, end.host, end.outcome, end.run_id,
                 end.ended),
            )
        )  # fmt: skip

    def chain_ends(self, tasks: AbstractSet[str], since: datetime) -> list[port.ChainEnd]:
        if not tasks:
            return []

        def query(cur: Any) -> list[port.ChainEnd]:
            cur.execute(
                "SELECT task, occurrence, host, outcome, run_id, ended FROM cronctl.chain_ends "
                "WHERE task = ANY(%s) AND occurrence >= %s ORDER BY occurrence, ended, task, host",
                ([self.scope.key(t) for t in sorted(tasks)], since),
            )
            return self.skipped.keep(
                cur.fetchall(),
                lambda row: rows.chain_end(row, self.scope.name(str(row[0]))),
                "chain_ends",
                lambda row: f"{row[0]} {row[2]} {row[4]}",  # task, host, run id: text
            )

        return self._read(query, [])

    def try_overlap(
        self, task: str, *, lease: timedelta | None, now: datetime, timeout: timedelta | None = None
    ) -> port.Overlap:
        # The run's connection first: it creates the schema and fails fast when unreachable.
        self._call(lambda cur: None)
        try:
            mine = (self.url, self.scope.key(task), self.host, self.pid, self.skipped)
            return pg_lock.try_lock(*mine, lease=lease, now=now, timeout=timeout)
        except port.StoreUnavailable as exc:
            raise self._lost(str(exc)) from None

    def try_group_slot(self, group: str, size: int) -> slots.PgSlot | None:
        """A connection that found every slot held is kept for the next try."""
        psycopg2 = pgconn.driver(self.url)
        self._call(lambda cur: None)  # the schema, and a store already lost fails at once
        with self._mutex:
            conn = self._idle.pop() if self._idle else None
        try:
            if conn is None:
                conn = pgconn.connect(self.url)
            number = slots.take(conn, self.scope.key(group), size)
        except (port.StoreUnavailable, psycopg2.Error) as exc:
            if conn is not None:
                with suppress(Exception):
                    conn.close()
            said = isinstance(exc, port.StoreUnavailable)
            raise self._lost(str(exc) if said else pgconn.failure_message(self.url, exc)) from None
        if number is None:
            with self._mutex:
                self._idle.append(conn)
            return None
        return slots.PgSlot(conn, number)

    def _lost(self, message: str) -> port.StoreUnavailable:
        with self._mutex:
            self._failure = message
        return port.StoreUnavailable(message)

    def overlap_held(self, task: str) -> bool:
        key = self.scope.key(task)
        return self._read(lambda cur: pg_lock.is_held(cur, key, self.skipped), False)

    def paused_tasks(self) -> dict[str, port.PauseInfo]:
        """Read with the schema check when the run connects: no extra round trip."""

        def query(cur: Any) -> dict[str, port.PauseInfo]:
            if self._pauses is not None:
                return self.scope.ours(self._pauses)
            cur.execute(READ_PAUSES)
            pauses, orphans, _ = cur.fetchone()
            self._orphans = rows.orphans(orphans, self.skipped, self.scope.owns)
            return self.scope.ours(rows.pauses(pauses, self.skipped, self.scope.owns))

        return self._read(query, {})

    def set_pause(self, task: str, *, reason: str | None, now: datetime, user: str) -> None:
        self._call(
            lambda cur: cur.execute(
                "INSERT INTO cronctl.pauses (task, reason, since, host, usr) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (task) DO UPDATE SET "
                "reason = EXCLUDED.reason, since = EXCLUDED.since, host = EXCLUDED.host, "
                "usr = EXCLUDED.usr",
                (self.scope.key(task), reason, now, self.host, user),
            )
        )
        self._pauses = None  # read afresh after the change

    def clear_pause(self, task: str) -> bool:
        def delete(cur: Any) -> bool:
            cur.execute("DELETE FROM cronctl.pauses WHERE task = %s", (self.scope.key(task),))
            return bool(cur.rowcount)

        cleared = self._call(delete)
        self._pauses = None  # read afresh after the change
        return cleared

    def publish(self, rows: Sequence[RunRow]) -> None:
        if not rows:
            return
        stored = [self.scope.stored(row) for row in rows]
        self._call(lambda cur: fleet.publish(cur, stored, self._check_in(cur)))
        self._open.difference_update(row.id for row in rows)

    def _check_in(self, cur: Any) -> bytes:
        return fleet.check_in(cur, self.scope, self.host, self.clock())

    def fleet_latest(self, task: str | None = None, host: str | None = None) -> list[RunRow]:
        return self._read(lambda cur: fleet.latest(cur, self.scope, self.skipped, task, host), [])

    def fleet_summary(self, failing: Sequence[str]) -> list[history.TaskLatest]:
        return self._read(lambda cur: fleet.summary(cur, self.scope, self.skipped, failing), [])

    def fleet_host_summary(self, failing: Sequence[str]) -> list[history.HostLatest]:
        summary = fleet.host_summary
        return self._read(lambda cur: summary(cur, self.scope, self.skipped, failing), [])

    def fleet_history(
        self,
        task: str | None,
        host: str | None,
        limit: int,
        *,
        failed: bool = False,
        since: datetime | None = None,
    ) -> list[RunRow]:
        args = (task, host, limit, sorted(FAILED) if failed else None, since)
        return self._read(lambda cur: fleet.history(cur, self.scope, self.skipped, *args), [])

    def fleet_page(self, query: history.RunQuery) -> list[RunRow]:
        return self._read(lambda cur: fleet.page(cur, self.scope, self.skipped, query), [])

    def fleet_run(self, run_id: str) -> RunRow | None:
        return self._read(lambda cur: fleet.one(cur, self.scope, self.skipped, run_id), None)

    def fleet_hosts(self) -> list[history.HostSeen]:
        return self._read(lambda cur: fleet.hosts(cur, self.scope, self.skipped), [])

    def sweep(self, now: datetime) -> None:
        """Also the rows of an occurrence no reader can use (infinity, year 20000: rows.py),
        which no age would ever reach."""
        self._call(
            lambda cur: cur.execute(
                "DELETE FROM cronctl.claims WHERE occurrence < %(now)s - %(keep)s::interval "  # noqa: S608
                f"OR NOT occurrence {rows.IN_RANGE}; "
                "DELETE FROM cronctl.chain_ends WHERE occurrence < %(now)s - %(keep)s::interval "
                f"OR NOT occurrence {rows.IN_RANGE}; "
                "DELETE FROM cronctl.runs WHERE occurrence < %(now)s - interval '90 days' "
                f"OR NOT occurrence {rows.IN_RANGE}; "
                "DELETE FROM cronctl.latest WHERE occurrence < %(now)s - interval '90 days' "
                f"OR NOT occurrence {rows.IN_RANGE}; "
                "UPDATE cronctl.runs SET output = NULL WHERE output IS NOT NULL "
                "AND occurrence < %(now)s - make_interval(days => %(output_days)s)",
                {"now": now, "keep": CLAIM_RETENTION, "output_days": fleet.OUTPUT_RETENTION_DAYS},
            )
        )
