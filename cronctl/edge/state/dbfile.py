"""The state database file: opened by SQLite alone, checked, migrated, its errors told. It is
inspected by ``lstat`` only: a descriptor of it opened and closed beside a live connection
drops that connection's POSIX locks (another process then deletes the WAL under it)."""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final
from urllib.parse import quote

from cronctl.edge.safefiles import fsync_dir
from cronctl.errors import CronctlError, UnsafeDirectoryError


def _codes(*names: str) -> frozenset[int]:
    return frozenset(getattr(sqlite3, f"SQLITE_{name}") for name in names)


# Failures caused by the file or the machine rather than by cronctl's own SQL.
_ENVIRONMENT_CODES: Final = _codes("PERM", "NOMEM", "READONLY", "IOERR", "CANTOPEN", "PROTOCOL")
# Failures that persist until someone acts on the file: `work` stops on them.
_UNUSABLE_CODES: Final = _codes("CORRUPT", "NOTADB", "PERM", "READONLY", "CANTOPEN")
# Entry i takes the database from user_version i to i + 1. Append only; never edit a released one.
MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    (
        """CREATE TABLE task_state (
            name TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, last_occurrence TEXT NOT NULL,
            missed_total INTEGER NOT NULL DEFAULT 0, done INTEGER NOT NULL DEFAULT 0)""",
        """CREATE TABLE runs (
            id TEXT PRIMARY KEY, task TEXT NOT NULL, occurrence TEXT NOT NULL,
            outcome TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER, exit_code INTEGER,
            started TEXT, ended TEXT, duration_s REAL, log_path TEXT,
            tail TEXT NOT NULL DEFAULT '', message TEXT)""",
        "CREATE INDEX runs_by_task ON runs (task, occurrence DESC, started DESC, id DESC)",
        "CREATE INDEX runs_by_occurrence ON runs (occurrence DESC, started DESC, id DESC)",
        "CREATE INDEX runs_unfinished ON runs (host) WHERE outcome IN ('pending', 'running')",
    ),
    # How a run was started ("schedule" or "manual", by `cronctl exec`) and which attempt of
    # its occurrence it is (retries); rows from before default to a first scheduled run.
    (
        "ALTER TABLE runs ADD COLUMN trigger TEXT NOT NULL DEFAULT 'schedule'",
        "ALTER TABLE runs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1",
    ),
    # The dashboard (docs/dashboard.md) pages history by (occurrence, id) from a cursor: one
    # index per way it is asked, every task's and one task's.
    (
        "CREATE INDEX runs_page ON runs (occurrence DESC, id DESC)",
        "CREATE INDEX runs_page_by_task ON runs (task, occurrence DESC, id DESC)",
    ),
    # A chained run (trigger "after") names the upstream runs it followed (docs/chains.md).
    ("ALTER TABLE runs ADD COLUMN upstream TEXT NOT NULL DEFAULT ''",),
)
SCHEMA_VERSION: Final = len(MIGRATIONS)

_BUSY_TIMEOUT_MS: Final = 30_000
_WAL_FILES: Final = ("-wal", "-shm")
# The columns cronctl reads, with their declared types; a table without them is not ours.
_COLUMNS: Final = {
    table: dict(column.split() for column in columns.split(", "))
    for table, columns in (
        ("task_state", "name TEXT, fingerprint TEXT, last_occurrence TEXT, "
         "missed_total INTEGER, done INTEGER"),
        ("runs", "id TEXT, task TEXT, occurrence TEXT, outcome TEXT, host TEXT, pid INTEGER, "
         "exit_code INTEGER, started TEXT, ended TEXT, duration_s REAL, log_path TEXT, "
         "tail TEXT, message TEXT, trigger TEXT, attempt INTEGER, upstream TEXT"),
    )
}  # fmt: skip


def move_aside(path: Path) -> str:
    return (
        f"Move it aside with its -wal and -shm files (`mkdir {path.parent}/broken && mv {path}* "
        f"{path.parent}/broken/`) and run cronctl again, which starts a new one: the run "
        f"history is lost, and scheduling restarts from now (occurrences missed before "
        f"that are not caught up)."
    )


def _primary_code(exc: sqlite3.Error) -> int | None:
    code: int | None = getattr(exc, "sqlite_errorcode", None)  # None: raised by Python's module
    return None if code is None else code & 0xFF  # SQLITE_IOERR_WRITE -> SQLITE_IOERR


@contextmanager
def translated(path: Path) -> Iterator[None]:
    """What the world did to the file becomes a CronctlError; programming errors pass through."""
    try:
        yield
    except sqlite3.Error as exc:
        code = _primary_code(exc)
        if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
            message = (
                f"the state database is damaged or is not a cronctl database ({exc}). "
                f"{move_aside(path)}"
            )
        elif code == sqlite3.SQLITE_FULL:
            message = (
                f"the disk is full ({exc}); nothing was recorded. Free space on the file system "
                f"that holds {path.parent}."
            )
        elif code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            message = (
                f"the state database stayed locked by another process for "
                f"{_BUSY_TIMEOUT_MS // 1000} s ({exc}); look for a stuck cronctl (`fuser {path}`)."
            )
        elif code in _ENVIRONMENT_CODES:
            message = (
                f"cannot use the state database ({exc}); check that the file and its directory "
                f"belong to the user running cronctl and that the file system is writable."
            )
        else:
            raise
        if code in _UNUSABLE_CODES:
            raise StoreUnusableError(f"{path}: {message}") from exc
        raise CronctlError(f"{path}: {message}") from exc


class StoreUnusableError(CronctlError):
    """Unusable until someone acts (damaged, foreign, newer, unsafe): `work` stops on it
    rather than print it every minute; a full disk or a lock is not this."""


def inspect_file(path: Path) -> bool:
    """Whether the database exists; refuse a link, not a file, or not ours (``lstat`` only)."""
    for name in (path, *(path.with_name(path.name + end) for end in _WAL_FILES)):
        try:
            info = os.lstat(name)
        except FileNotFoundError:
            if name == path:
                return False
            continue
        except OSError as exc:
            message = f"cannot inspect the state database: {exc.strerror}"
            raise StoreUnusableError(f"{name}: {message}") from exc
        _refuse_foreign_file(name, info)
    return True


def _refuse_foreign_file(name: Path, info: os.stat_result) -> None:
    if stat.S_ISLNK(info.st_mode):
        what = "a symbolic link"
    elif not stat.S_ISREG(info.st_mode):
        what = "not a regular file"
    elif info.st_uid != os.geteuid():
        what = f"owned by uid {info.st_uid}, not by the user running cronctl ({os.geteuid()})"
    elif info.st_mode & stat.S_IWOTH:
        what = "writable by every user"
    else:
        return
    raise UnsafeDirectoryError(
        f"{name} is {what}; cronctl never makes it so, so something else did. Check who can "
        f"write to {name.parent}; move the file aside, or run cronctl as its owner.",
        name.parent,
    )


def file_id(path: Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of ``path``, not followed; None: nothing there."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino


def _connect(path: Path, exists: bool) -> sqlite3.Connection:
    """Let SQLite open (or create) the file itself: cronctl never holds a descriptor of it."""
    mode = "rw" if exists else "rwc"  # "rw": a file deleted meanwhile is not silently recreated
    uri = f"file:{quote(str(path))}?mode={mode}"
    # isolation_level=None: we send BEGIN IMMEDIATE/COMMIT ourselves; the module's own
    # deferred transactions would let two read-then-write callers deadlock.
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        # FULL syncs the WAL at every commit; NORMAL only at checkpoints, so a power loss could
        # drop the last commits: a run gone from history, or an occurrence run a second time.
        conn.execute("PRAGMA synchronous = FULL")
        _use_wal(conn, path)
        _migrate(conn, path)
        _check_schema(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def _use_wal(conn: sqlite3.Connection, path: Path) -> None:
    # Switching a new file to WAL (persistent, so a no-op later) upgrades a read lock to a write
    # lock, and SQLite never waits on such an upgrade (it could deadlock): it fails at once with
    # "database is locked" when another cronctl is switching too. So that wait happens here.
    deadline = time.monotonic() + _BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            break
        except sqlite3.OperationalError as exc:
            if _primary_code(exc) != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    if str(mode).lower() != "wal":
        reason = f"SQLite cannot use WAL mode here (it stays in {mode} mode)"
        raise CronctlError(f"{path}: {reason}; put state_dir on a local file system.")


def _refuse_newer(path: Path, version: int) -> None:
    if version < 0:
        raise StoreUnusableError(
            f"{path}: the state database has schema version {version}, which no cronctl "
            f"writes: it is not a cronctl database. {move_aside(path)}"
        )
    if version > SCHEMA_VERSION:
        raise StoreUnusableError(
            f"{path}: the state database has schema version {version}, but this cronctl knows "
            f"versions up to {SCHEMA_VERSION} only: a newer cronctl wrote it. Upgrade "
            f"cronctl on this machine (or move the file aside to start over, losing the history)."
        )


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    _refuse_newer(path, version)
    if version == SCHEMA_VERSION:
        return  # the common case: one read, no write lock
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Again: another process may have migrated meanwhile.
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        _refuse_newer(path, version)
        for target, statements in enumerate(MIGRATIONS[version:], start=version + 1):
            for statement in statements:
                _apply(conn, path, statement)
            conn.execute(f"PRAGMA user_version = {target}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise


def _apply(conn: sqlite3.Connection, path: Path, statement: str) -> None:
    try:
        conn.execute(statement)
    except sqlite3.OperationalError as exc:
        if _primary_code(exc) != sqlite3.SQLITE_ERROR:
            raise  # busy, full, I/O: translated by the caller
        # "table runs already exists": the file holds someone else's tables under our names.
        raise StoreUnusableError(
            f"{path}: cannot bring the state database to cronctl's schema ({exc}): it is not a "
            f"cronctl database. {move_aside(path)}"
        ) from exc


def _check_schema(conn: sqlite3.Connection, path: Path) -> None:
    for table, expected in _COLUMNS.items():
        found = {
            str(row[1]): str(row[2]).upper()
            for row in conn.execute(f"PRAGMA table_info({table})").fetchall()
        }
        wrong = [f"{name} {kind}" for name, kind in expected.items() if found.get(name) != kind]
        if wrong:
            what = "has no table" if not found else "has a table"
            raise StoreUnusableError(
                f"{path}: the state database {what} {table!r} with cronctl's columns (missing "
                f"or of another type: {', '.join(wrong)}); it is not a cronctl database. "
                f"{move_aside(path)}"
            )


def empty_connection(path: Path) -> sqlite3.Connection:
    """An empty database in memory (``path`` names it in messages)."""
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    _migrate(conn, path)
    return conn


def open_connection(path: Path, *, create: bool) -> sqlite3.Connection:
    """Open the database at ``path``, creating it (0600) when ``create``, and migrate it.
    Errors: UnsafeDirectoryError, StoreUnusableError, CronctlError (none there, full, locked)."""
    exists = inspect_file(path)
    if not exists and not create:
        raise CronctlError(
            f"no state here ({path.parent}): nothing has run with this state dir; "
            "check --state-dir (or CRONCTL_STATE_DIR, or state_dir in the schedule file)"
        )
    # 077: the database and the -wal and -shm SQLite gives its mode are 0600 from their first
    # byte; the umask is process-wide, so another thread's file only gets stricter.
    old_umask = None if exists else os.umask(0o077)
    try:
        with translated(path):
            conn = _connect(path, exists)
    finally:
        if old_umask is not None:
            os.umask(old_umask)
    try:
        inspect_file(path)  # what SQLite opened by name is still our private regular file
        if not exists:
            fsync_dir(path.parent)
    except BaseException:
        conn.close()
        raise
    return conn
