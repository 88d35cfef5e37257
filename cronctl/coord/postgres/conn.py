"""Connections to the coordination store: the driver, its waits, keepalives and timeouts."""

from __future__ import annotations

import select
import threading
import time
from typing import Any

from cronctl.coord.port import UNREACHABLE, StoreUnavailable
from cronctl.coord.postgres import rows
from cronctl.coord.redact import redact_text, redact_url
from cronctl.errors import CronctlError

CONNECT_TIMEOUT_S = 5
#: No statement of cronctl's waits longer for a lock than this, nor runs longer than
#: STATEMENT_TIMEOUT_S: a store that answers but blocks (a migration's LOCK TABLE, a stuck
#: transaction) is a store that did not answer, handled as unreachable for this run.
LOCK_TIMEOUT_S = 5
STATEMENT_TIMEOUT_S = 10
# Server side: a dead client's session (and its advisory lock) ends after 30 + 10 * 6 = 90 s
# (docs/fleets-postgresql.md). Set per session: no role or database setting is needed.
_SESSION_OPTIONS = (
    "-c tcp_keepalives_idle=30 -c tcp_keepalives_interval=10 -c tcp_keepalives_count=6 "
    f"-c lock_timeout={LOCK_TIMEOUT_S * 1000} -c statement_timeout={STATEMENT_TIMEOUT_S * 1000} "
    f"-c idle_in_transaction_session_timeout={STATEMENT_TIMEOUT_S * 3 * 1000}"
)

#: Once cronctl is told to stop, no answer of the store is waited for longer than this.
STOP_WAIT_S = 0.5
_TICK_S = 0.1  # how often a wait looks at the clock
_connecting = threading.local()  # .deadline: the monotonic time a connect in progress gives up
_stopped_at: list[float] = []  # when cronctl was told to stop (monotonic), once it was
NOT_WAITED = "not waited for: cronctl was told to stop"


def stop_waiting() -> None:
    """Called from a signal handler: it only appends to a list."""
    if not _stopped_at:
        _stopped_at.append(time.monotonic())


def _wait(conn: Any) -> None:
    """psycopg2's wait callback: libpq's waits done in Python, so that a signal is handled at
    once (SIGTERM to a `run` that waits for a locked table), a connect keeps its timeout
    (libpq leaves that to the caller of an asynchronous connect) and a stop cuts a wait short."""
    import psycopg2
    import psycopg2.extensions as ext

    started = time.monotonic()
    deadline = getattr(_connecting, "deadline", None)
    cancelled = False
    while (state := conn.poll()) != ext.POLL_OK:
        now = time.monotonic()
        if deadline is not None and now > deadline:
            raise psycopg2.OperationalError("timeout expired")
        if _stopped_at and now > max(_stopped_at[0], started) + STOP_WAIT_S:
            if deadline is not None or cancelled:
                raise psycopg2.OperationalError(NOT_WAITED)
            conn.cancel()  # the statement ends with QueryCanceled; its answer is read next
            cancelled, started = True, now
        fd = conn.fileno()
        if state == ext.POLL_READ:
            select.select([fd], [], [], _TICK_S)
        elif state == ext.POLL_WRITE:
            select.select([], [fd], [], _TICK_S)
        else:
            raise psycopg2.OperationalError(f"unexpected state {state} of the connection")


def connect(url: str, *, timeout: int = CONNECT_TIMEOUT_S) -> Any:
    """An autocommit connection with keepalives on both ends, or StoreUnavailable."""
    psycopg2 = driver(url)

    _connecting.deadline = time.monotonic() + timeout
    try:
        conn = psycopg2.connect(
            url,
            connect_timeout=timeout,
            application_name="cronctl",
            keepalives=1,
            keepalives_idle=30,
            keepalives_interval=10,
            keepalives_count=6,
            options=_SESSION_OPTIONS,
        )
    except psycopg2.Error as exc:
        raise StoreUnavailable(unreachable(url, exc)) from None
    finally:
        _connecting.deadline = None
    conn.autocommit = True
    rows.register(conn)
    return conn


def driver(url: str) -> Any:
    """The psycopg2 module, its waits made by :func:`_wait`."""
    try:
        import psycopg2  # here, not at the top: without the extra, this clear error
        import psycopg2.extensions
    except ImportError:
        raise CronctlError(
            f"coordination is set ({redact_url(url)}) but the PostgreSQL driver is not "
            "installed: pip install 'cronctl[postgres]' (psycopg2-binary) on this machine"
        ) from None
    if psycopg2.extensions.get_wait_callback() is not _wait:
        psycopg2.extensions.set_wait_callback(_wait)
    return psycopg2


def first_line(url: str, exc: BaseException) -> str:
    """The first line of a driver's error, without the URL's password (libpq may echo it)."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return redact_text(first, url)


def unreachable(url: str, exc: BaseException) -> str:
    return f"{UNREACHABLE} ({redact_url(url)}): {first_line(url, exc)}"


def failure_message(url: str, exc: BaseException) -> str:
    if _stopped_at:
        return f"{UNREACHABLE} ({redact_url(url)}): {NOT_WAITED}"
    if isinstance(exc, slow_errors()):
        return (
            f"{UNREACHABLE} ({redact_url(url)}): it did not answer in time "
            f"({first_line(url, exc)}); a lock on cronctl's tables held by another session "
            "(a migration, a stuck transaction) makes it wait"
        )
    return unreachable(url, exc)


def slow_errors() -> tuple[type[BaseException], ...]:
    """A session that lives but waited too long (statement or lock timeout)."""
    import psycopg2.errors

    return (psycopg2.errors.QueryCanceled, psycopg2.errors.LockNotAvailable)
