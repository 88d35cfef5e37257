"""Schema ``cronctl`` in the coordination store: created on first use, versioned, migrated
under an advisory lock, refused when newer than this cronctl (docs/fleets-postgresql.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cronctl.coord.port import Orphan, PauseInfo
from cronctl.coord.postgres import conn as pgconn
from cronctl.coord.postgres import rows
from cronctl.coord.redact import redact_url
from cronctl.errors import CronctlError

#: The columns of a run record (the output tail aside), as ``runs`` and ``latest`` hold them.
RUN_COLUMNS = ("id", "task", "occurrence", "host", "pid", "outcome", "exit_code", "started",
               "ended", "duration_s", "message", "trigger", "attempt")  # fmt: skip
_RUN_LIST = ", ".join(RUN_COLUMNS)
_LATEST_COLUMNS = """id text NOT NULL, task text NOT NULL, occurrence timestamptz NOT NULL,
    host text NOT NULL, pid integer, outcome text NOT NULL, exit_code integer,
    started timestamptz, ended timestamptz, duration_s double precision, message text,
    trigger text NOT NULL, attempt integer NOT NULL"""
#: A run that has ended (``latest`` holds those only, as `status --fleet` shows them).
FINISHED = "outcome NOT IN ('missed', 'pending', 'running')"
#: Which of a (task, host)'s records is the newest: by occurrence, then start (none: the
#: oldest), then id, so that every machine and the trigger pick the same one.
NEWEST_FIRST = "occurrence DESC, coalesce(started, '-infinity') DESC, id DESC"
_NEW = ", ".join(f"NEW.{c}" for c in RUN_COLUMNS)
_SET = ", ".join(f"{c} = EXCLUDED.{c}" for c in RUN_COLUMNS)
_IS_NEWER = """(EXCLUDED.occurrence, coalesce(EXCLUDED.started, '-infinity'), EXCLUDED.id)
            > (latest.occurrence, coalesce(latest.started, '-infinity'), latest.id)"""
#: Picks a (task, host)'s row of ``latest`` again when the record it held (``gone``) may not.
_PICK_LATEST = f"""CREATE FUNCTION cronctl.pick_latest(pair_task text, pair_host text, gone text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM cronctl.latest WHERE task = pair_task AND host = pair_host AND id = gone;
    IF FOUND THEN
        INSERT INTO cronctl.latest ({_RUN_LIST})
        SELECT {_RUN_LIST} FROM cronctl.runs
        WHERE task = pair_task AND host = pair_host AND {FINISHED}
        ORDER BY {NEWEST_FIRST} LIMIT 1
        ON CONFLICT (task, host) DO UPDATE SET {_SET} WHERE {_IS_NEWER};
    END IF;
END $$"""  # noqa: S608  (constant names)
#: Keeps ``latest`` as ``runs`` changes. Deletes do not fire it: the sweep trims ``latest``.
_KEEP_LATEST = f"""CREATE FUNCTION cronctl.keep_latest() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND ((OLD.task, OLD.host) IS DISTINCT FROM (NEW.task, NEW.host)
            OR NOT (NEW.{FINISHED})) THEN
        PERFORM cronctl.pick_latest(OLD.task, OLD.host, OLD.id);
    END IF;
    IF NEW.{FINISHED} THEN
        INSERT INTO cronctl.latest ({_RUN_LIST}) VALUES ({_NEW})
        ON CONFLICT (task, host) DO UPDATE SET {_SET}
        WHERE latest.id = EXCLUDED.id OR {_IS_NEWER};
    END IF;
    RETURN NULL;
END $$"""  # noqa: S608  (constant names)

_BACKFILL = (
    f"INSERT INTO cronctl.latest ({_RUN_LIST}) SELECT DISTINCT ON (task, host) {_RUN_LIST} "  # noqa: S608
    f"FROM cronctl.runs WHERE {FINISHED} ORDER BY task, host, {NEWEST_FIRST}"
)
#: Whether the session that took advisory lock ``key`` (a claimer's liveness) still lives.
_LEASE_LIVES = """CREATE FUNCTION cronctl.lease_lives(key bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
        AND classid = (key >> 32)::oid AND objid = (key & 4294967295)::oid AND objsubid = 1)
$$"""
#: Claims in the order given until ``want`` are won (NULL: all). A claim still leased whose
#: claimer is gone (its session ended, or its lease ran out) is taken over; a started one never.
_CLAIM_SOME = """CREATE FUNCTION cronctl.claim_some(tasks text[], whens timestamptz[],
    leased boolean[], runs text[], want integer, who text, who_pid integer, who_lease bigint,
    lease_s double precision, oldest timestamptz)
RETURNS TABLE (won_task text, won_occurrence timestamptz) LANGUAGE plpgsql AS $$
DECLARE
    i integer;
    got integer := 0;
    taken integer;
BEGIN
    FOR i IN 1 .. coalesce(array_length(tasks, 1), 0) LOOP
        EXIT WHEN want IS NOT NULL AND got >= want;
        CONTINUE WHEN whens[i] < oldest;
        INSERT INTO cronctl.claims AS c (task, occurrence, host, pid, state, run_id, lease,
                                         expires, started)
        VALUES (tasks[i], whens[i], who, who_pid,
                CASE WHEN leased[i] THEN 'leased' ELSE 'started' END, runs[i], who_lease,
                now() + make_interval(secs => lease_s),
                CASE WHEN leased[i] THEN NULL ELSE now() END)
        ON CONFLICT (task, occurrence) DO UPDATE SET host = EXCLUDED.host,
            pid = EXCLUDED.pid, state = EXCLUDED.state, run_id = EXCLUDED.run_id,
            lease = EXCLUDED.lease, expires = EXCLUDED.expires, started = EXCLUDED.started,
            claimed_at = now()
        WHERE c.state = 'leased'
            AND (c.expires < now() OR c.lease IS NULL OR NOT cronctl.lease_lives(c.lease));
        GET DIAGNOSTICS taken = ROW_COUNT;
        IF taken > 0 THEN
            got := got + 1;
            won_task := tasks[i];
            won_occurrence := whens[i];
            RETURN NEXT;
        END IF;
    END LOOP;
END $$"""
#: claim_some as of schema 8: each claim also says until when its run may still start
#: (``waits``: seconds from now); a claimer gone before then leaves it to the others.
_CLAIM_SOME_8 = (
    _CLAIM_SOME.replace("lease_s double precision,", "lease_s double precision, waits float8[],")
    .replace("expires, started)", "expires, started, wait_until)")
    .replace(
        "CASE WHEN leased[i] THEN NULL ELSE now() END)",
        "CASE WHEN leased[i] THEN NULL ELSE now() END, now() + make_interval(secs => waits[i]))",
    )
    .replace(
        "started = EXCLUDED.started,",
        "started = EXCLUDED.started, wait_until = EXCLUDED.wait_until,",
    )
)  # fmt: skip
#: claim_some as of schema 9: it also returns the claims not won that another machine holds
#: as a lease (``mine`` false), read after the insert waited for a claim made meanwhile: a
#: query of the statement's own snapshot missed those, and they were never asked for again.
_CLAIM_SOME_9 = (
    _CLAIM_SOME_8.replace("timestamptz) LANGUAGE", "timestamptz, mine boolean) LANGUAGE")
    .replace(
        "            RETURN NEXT;\n        END IF;",
        "            mine := true;\n            RETURN NEXT;\n"
        "        ELSIF EXISTS (SELECT FROM cronctl.claims WHERE task = tasks[i] AND state = "
        "'leased'\n                AND occurrence = whens[i] AND lease IS DISTINCT FROM who_lease) "
        "THEN\n            won_task := tasks[i];\n            won_occurrence := whens[i];\n"
        "            mine := false;\n            RETURN NEXT;\n        END IF;",
    )
)  # fmt: skip
#: The unstarted claims whose claimer is gone while their run may still start: read by every
#: machine each minute, with the pauses, and taken over by the first that claims one.
_ORPHANS = """CREATE FUNCTION cronctl.orphans() RETURNS json LANGUAGE sql STABLE AS $$
    SELECT coalesce(json_agg(json_build_array(task, occurrence) ORDER BY occurrence, task),
        '[]'::json) FROM cronctl.claims WHERE state = 'leased' AND wait_until > now()
        AND (expires < now() OR lease IS NULL OR NOT cronctl.lease_lives(lease))
$$"""
#: Records, as of unknown outcome, the started runs of a machine whose session ended before
#: it published them. cronctl.runs is written only when there is something to say: a run's
#: round trip never waits for a lock on it otherwise.
_SETTLE_GONE = """CREATE FUNCTION cronctl.settle_gone() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM cronctl.claims WHERE state = 'started'
               AND NOT cronctl.lease_lives(lease)) THEN
        WITH gone AS (
            UPDATE cronctl.claims SET state = 'done'
            WHERE state = 'started' AND NOT cronctl.lease_lives(lease)
            RETURNING task, occurrence, host, pid, run_id, started)
        INSERT INTO cronctl.runs (id, task, occurrence, host, pid, outcome, started, message)
        SELECT run_id, task, occurrence, host, pid, 'error', started,
               'outcome unknown: ' || host || ' stopped answering'
        FROM gone WHERE run_id IS NOT NULL ON CONFLICT (id) DO NOTHING;
    END IF;
END $$"""
#: A claim whose run's record reached the store is over.
_CLAIM_DONE = """CREATE FUNCTION cronctl.claim_done() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE cronctl.claims SET state = 'done' WHERE run_id = NEW.id AND state <> 'done';
    RETURN NULL;
END $$"""

# The constants above are part of migration 4 (below): a later change of them needs a
# migration of its own that replaces the table's columns or the functions.

#: Entry ``i`` takes the schema from version ``i`` to ``i + 1``. Append only.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE cronctl.claims (
            task text NOT NULL, occurrence timestamptz NOT NULL, host text NOT NULL,
            pid integer, claimed_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (task, occurrence))""",
        "CREATE INDEX claims_by_occurrence ON cronctl.claims (occurrence)",
        """CREATE TABLE cronctl.pauses (
            task text PRIMARY KEY, reason text, since timestamptz, host text, usr text)""",
        """CREATE TABLE cronctl.holders (
            task text PRIMARY KEY, host text NOT NULL, pid integer NOT NULL,
            started timestamptz NOT NULL, backend integer NOT NULL,
            seen timestamptz NOT NULL DEFAULT now(), timeout_s double precision,
            command_pid integer)""",
        """CREATE TABLE cronctl.runs (
            id text PRIMARY KEY, task text NOT NULL, occurrence timestamptz NOT NULL,
            host text NOT NULL, pid integer, outcome text NOT NULL, exit_code integer,
            started timestamptz, ended timestamptz, duration_s double precision, message text,
            published_at timestamptz NOT NULL DEFAULT now())""",
        "CREATE INDEX runs_by_task_host ON cronctl.runs (task, host, occurrence DESC)",
        "CREATE INDEX runs_by_occurrence ON cronctl.runs (occurrence DESC)",
    ),
    # The holder's cronctl and command as (pid, start ticks, boot id): coord/liveness.py.
    (
        "ALTER TABLE cronctl.holders ADD COLUMN boot text, ADD COLUMN pid_start bigint, "
        "ADD COLUMN command_start bigint",
    ),
    # The dashboard's fleet views (docs/dashboard.md): trigger, attempt, output tail; pages
    # keyset-paged on (occurrence, id) under every filter; the hosts' check-ins.
    (
        "ALTER TABLE cronctl.runs ADD COLUMN trigger text NOT NULL DEFAULT 'schedule', "
        "ADD COLUMN attempt integer NOT NULL DEFAULT 1, ADD COLUMN output text",
        "DROP INDEX cronctl.runs_by_occurrence",
        "CREATE INDEX runs_page ON cronctl.runs (occurrence DESC, id DESC)",
        "CREATE INDEX runs_page_by_task ON cronctl.runs (task, occurrence DESC, id DESC)",
        "CREATE INDEX runs_page_by_host ON cronctl.runs (host, occurrence DESC, id DESC)",
        "CREATE INDEX runs_page_by_outcome ON cronctl.runs (outcome, occurrence DESC, id DESC)",
        """CREATE INDEX runs_page_by_task_outcome
            ON cronctl.runs (task, outcome, occurrence DESC, id DESC)""",
        "CREATE INDEX runs_page_by_trigger ON cronctl.runs (trigger, occurrence DESC, id DESC)",
        # Only the few rows with an output: the sweep that clears old ones reads just these.
        "CREATE INDEX runs_with_output ON cronctl.runs (occurrence) WHERE output IS NOT NULL",
        """CREATE TABLE cronctl.hosts (
            project text NOT NULL, host text NOT NULL, version text NOT NULL,
            clock timestamptz NOT NULL, seen timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (project, host))""",
    ),
    # The newest finished run of every (task, host) for the overview (docs/dashboard.md#speed).
    # The trigger is made before the table is filled: it locks runs against writers until
    # the migration commits, so no record published meanwhile is missed.
    (
        f"CREATE TABLE cronctl.latest ({_LATEST_COLUMNS}, PRIMARY KEY (task, host))",
        "CREATE INDEX latest_by_host ON cronctl.latest (host)",
        # Each task's newest ok run, found by one probe (fleet.summary).
        f"CREATE INDEX latest_ok ON cronctl.latest (task, {NEWEST_FIRST}) WHERE outcome = 'ok'",
        _PICK_LATEST,
        _KEEP_LATEST,
        "CREATE TRIGGER runs_keep_latest AFTER INSERT OR UPDATE OF "
        f"{', '.join(RUN_COLUMNS)} ON cronctl.runs "
        "FOR EACH ROW EXECUTE FUNCTION cronctl.keep_latest()",
        _BACKFILL,
    ),
    # fleet.summary reads the first few pairs not ok from this index alone.
    (
        "DROP INDEX cronctl.latest_ok",
        "CREATE INDEX latest_not_ok ON cronctl.latest (task, host) INCLUDE (outcome, id) "
        "WHERE outcome <> 'ok'",
    ),
    # A claim is a lease until its run starts (docs/fleets-postgresql.md#claims-are-leases).
    # Claims made before are over: done. Only open claims are indexed, so the survivors'
    # look for a dead host's started runs reads a handful of rows.
    (
        "ALTER TABLE cronctl.claims ADD COLUMN state text NOT NULL DEFAULT 'done', "
        "ADD COLUMN run_id text, ADD COLUMN lease bigint, ADD COLUMN expires timestamptz, "
        "ADD COLUMN started timestamptz",
        "CREATE INDEX claims_open ON cronctl.claims (run_id) WHERE state <> 'done'",
        _LEASE_LIVES,
        _CLAIM_SOME,
        _SETTLE_GONE,
        _CLAIM_DONE,
        "CREATE TRIGGER runs_settle_claims AFTER INSERT OR UPDATE OF outcome ON cronctl.runs "
        "FOR EACH ROW EXECUTE FUNCTION cronctl.claim_done()",
    ),
    # Chains (docs/chains.md): how each run that other tasks follow ended; a chained run's
    # upstream run ids.
    (
        """CREATE TABLE cronctl.chain_ends (
            task text NOT NULL, occurrence timestamptz NOT NULL, host text NOT NULL,
            outcome text NOT NULL, run_id text NOT NULL, ended timestamptz NOT NULL,
            PRIMARY KEY (task, occurrence, host))""",
        "ALTER TABLE cronctl.runs ADD COLUMN upstream text NOT NULL DEFAULT ''",
    ),
    # An orphaned claim is taken over until its run may no longer start, not only while
    # others still ask for it (docs/fleets-postgresql.md#claims-are-leases).
    (
        "ALTER TABLE cronctl.claims ADD COLUMN wait_until timestamptz",
        "CREATE INDEX claims_leased ON cronctl.claims (wait_until) WHERE state = 'leased'",
        "DROP FUNCTION cronctl.claim_some(text[], timestamptz[], boolean[], text[], integer, "
        "text, integer, bigint, double precision, timestamptz)",
        _CLAIM_SOME_8,
        _ORPHANS,
    ),
    # claim_some says which claims another machine holds, also ones made meanwhile; each
    # orphan says how long its run may still start: a chained task's deadline counts from
    # its upstream's end, which only its claimer saw (docs/fleets-postgresql.md).
    (
        "DROP FUNCTION cronctl.claim_some",
        _CLAIM_SOME_9,
        _ORPHANS.replace("CREATE", "CREATE OR REPLACE").replace(
            "occurrence)",
            "occurrence, extract(epoch FROM least(wait_until, now() + interval '1 year') - now()))",
        ),
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)
# An arbitrary constant: "cronctl migrate" as one bigint advisory lock key.
_MIGRATE_KEY = 0x63726F6E6D696772

#: Every pause, as JSON: its time as text, which rows.pauses checks.
PAUSES = """SELECT coalesce(json_agg(json_build_array(task, reason, since, host, usr)),
    '[]'::json) FROM cronctl.pauses"""
#: Every run and `work` tick reads the pauses: with them, the survivors take over orphaned
#: claims and record gone machines' runs even when none of them claims anything.
READ_PAUSES = f"SELECT ({PAUSES}), cronctl.orphans(), cronctl.settle_gone()"
_STARTUP = f"SELECT version, ({PAUSES}), cronctl.orphans(), cronctl.settle_gone() FROM cronctl.meta"  # noqa: S608


class SchemaRefused(CronctlError):
    """The store's schema version is one this cronctl cannot use: newer, or impossible."""


class NoSchema(Exception):
    """No cronctl schema to read, and none was to be created."""


def ensure_schema(
    conn: Any, url: str, skipped: rows.Skipped, owns: Callable[[str], bool], create: bool
) -> tuple[dict[str, PauseInfo], list[Orphan]]:
    """Check the schema (``create``: create or migrate it; else NoSchema where there is none
    yet); in the same query, the pauses and orphans of ``owns``."""
    import psycopg2.errors

    try:
        found = _startup(conn)
    except (psycopg2.errors.UndefinedTable, psycopg2.errors.InvalidSchemaName):
        found = None
    except psycopg2.errors.UndefinedFunction:  # older than a function it calls: migrated below
        with conn.cursor() as cur:
            cur.execute("SELECT version FROM cronctl.meta")
            found = cur.fetchone()
    if found is None or found[0] != SCHEMA_VERSION:
        _check_version(None if found is None else found[0], url)
        if found is None and not create:
            raise NoSchema  # a reader writes nothing, not even the schema
        if not create:
            why = f", older than this cronctl's {SCHEMA_VERSION}, and a command that only reads "
            why += "migrates none: the next `cronctl run` or `work` of this version migrates it"
            raise _refused(url, found[0], why + " (upgrade a fleet's machines together)")
        _migrate(conn, url)
        found = _startup(conn)
    _, pauses, orphans, _ = found
    return rows.pauses(pauses, skipped, owns), rows.orphans(orphans, skipped, owns)


def _startup(conn: Any) -> Any:
    """The version, pauses and orphans; None when ``meta`` has no row."""
    with conn.cursor() as cur:
        cur.execute(_STARTUP)
        return cur.fetchone()


def _check_version(version: int | None, url: str) -> None:
    if version is not None and version > SCHEMA_VERSION:
        why = f", but this cronctl knows versions up to {SCHEMA_VERSION} only: a newer cronctl "
        why += "wrote it. Upgrade cronctl on this machine (every machine of a fleet must run a "
        raise _refused(url, version, why + "cronctl that knows the store's schema)")
    if version is not None and version < 1:
        raise _refused(url, version, " in cronctl.meta, which no cronctl writes", by_hand=True)


def _refused(url: str, version: object, why: str, by_hand: bool = False) -> SchemaRefused:
    said = f"the coordination store {redact_url(url)} has cronctl schema version {version}{why}"
    if by_hand:
        said += (
            ": it was changed by hand. Nothing was changed; set it back to the version of the "
            f"store's tables (this cronctl writes {SCHEMA_VERSION})"
        )
    return SchemaRefused(said)


def _migrate(conn: Any, url: str) -> None:
    """Machines starting at once migrate one at a time (an advisory lock), each re-reading
    the version after taking the lock."""
    import psycopg2.errors as pg

    conn.autocommit = False
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATE_KEY,))
            # Indexing a large history takes longer than a run's statement may: a migration
            # cut short would be tried, and cut short, by every run.
            cur.execute("SET LOCAL statement_timeout = 0")
            # CREATE SCHEMA checks the right to create schemas even with IF NOT EXISTS; a role
            # given only its own schema (README) must never need it.
            cur.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'cronctl'")
            if cur.fetchone() is None:
                cur.execute("CREATE SCHEMA cronctl")
            cur.execute(
                "CREATE TABLE IF NOT EXISTS cronctl.meta (one boolean PRIMARY KEY DEFAULT true "
                "CHECK (one), version integer NOT NULL)"
            )
            cur.execute("SELECT version FROM cronctl.meta")
            found = cur.fetchone()
            version = found[0] if found else 0
            _check_version(None if found is None else version, url)
            try:
                for statements in MIGRATIONS[version:]:
                    for statement in statements:
                        cur.execute(statement)
            # A version set back by hand meets what a migration makes (or drops) already done.
            except (pg.DuplicateTable, pg.DuplicateObject, pg.DuplicateColumn,
                    pg.DuplicateFunction, pg.UndefinedObject) as exc:  # fmt: skip
                why = f" in cronctl.meta, older than its tables ({pgconn.first_line(url, exc)})"
                raise _refused(url, version, why, by_hand=True) from None
            cur.execute(
                "INSERT INTO cronctl.meta (version) VALUES (%s) "
                "ON CONFLICT (one) DO UPDATE SET version = EXCLUDED.version",
                (SCHEMA_VERSION,),
            )
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    finally:
        conn.autocommit = True
