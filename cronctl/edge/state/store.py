"""Per-machine state (``task_state``) and run history (``runs``) in ``STATE_DIR/state.db``.

Several processes share the file and any may be killed: WAL (a killed writer's half is
ignored), every write a ``BEGIN IMMEDIATE`` transaction (a read-modify-write is never
overtaken), a 30 s busy timeout. Times are aware UTC, stored as fixed-width ISO 8601 text so
text order is time order. A lock serialises the threads of one process.
"""

from __future__ import annotations

import operator
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, TypeAlias

from cronctl.core.runs import FAILED, FINISHED, OUTCOMES, UNFINISHED, RunRow
from cronctl.edge.state.dbfile import (
    SCHEMA_VERSION,
    StoreUnusableError,
    empty_connection,
    file_id,
    inspect_file,
    move_aside,
    open_connection,
    translated,
)

__all__ = ["SCHEMA_VERSION", "StoreUnusableError"]


def _listed(outcomes: Collection[str]) -> str:
    # Sorted: a partial index serves only a query repeating its WHERE text (runs_unfinished).
    return "(" + ", ".join(f"'{o}'" for o in sorted(outcomes)) + ")"


DB_NAME: Final = "state.db"
_ORDER: Final = "ORDER BY occurrence DESC, started DESC, id DESC"
_UNFINISHED: Final = f"outcome IN {_listed(UNFINISHED)}"
# A row that dealt with its occurrence: not one closed as never started (by its message).
_DEALT: Final = "AND NOT (outcome = 'error' AND coalesce(substr(message, 1, length(?)), '') = ?)"
_STATE_COLUMNS: Final = "name, fingerprint, last_occurrence, missed_total, done"
_INSERT_STATE: Final = f"INSERT INTO task_state ({_STATE_COLUMNS}) VALUES (?, ?, ?, ?, ?) "  # noqa: S608
_PUT_STATE: Final = (
    f"{_INSERT_STATE}ON CONFLICT (name) DO UPDATE SET fingerprint = excluded.fingerprint, "
    "last_occurrence = excluded.last_occurrence, missed_total = excluded.missed_total, "
    "done = excluded.done"
)
# A first window, written only where the task has no row yet (never over one another process
# wrote meanwhile): the compare-and-set of a row read as absent.
_ADD_STATE: Final = f"{_INSERT_STATE}ON CONFLICT (name) DO NOTHING"
# A compare-and-set: the window moves only if the row is still exactly as it was read.
_ADVANCE_STATE: Final = (
    "UPDATE task_state SET last_occurrence = ? WHERE name = ? AND fingerprint = ? "
    "AND last_occurrence = ? AND missed_total = ? AND done = ?"
)
StoredState: TypeAlias = "tuple[Any, ...]"

_RUN_FIELDS: Final = tuple(f.name for f in fields(RunRow))
_RUN_COLUMNS: Final = ", ".join(_RUN_FIELDS)
_LATEST_COLUMNS: Final = ", ".join(f"r.{name}" for name in _RUN_FIELDS)
_RUN_PLACES: Final = ", ".join("?" * len(_RUN_FIELDS))
_ADD_RUN: Final = f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES ({_RUN_PLACES})"  # noqa: S608
_UPDATABLE: Final = frozenset(_RUN_FIELDS) - {"id"}
# The kind of value each RunRow field must hold when read back (a foreign file may hold anything).
_RUN_KINDS: Final[dict[str, type | tuple[type, ...]]] = {
    **dict.fromkeys(("id", "task", "outcome", "host", "tail", "upstream"), str),
    **dict.fromkeys(("pid", "exit_code"), (int, type(None))),
    **dict.fromkeys(("log_path", "message"), (str, type(None))),
    "duration_s": (float, int, type(None)),
}
_CONVERTED: Final = ("occurrence", "started", "ended", "outcome")
_RUN_GETTER: Final = operator.attrgetter(*_RUN_FIELDS)
# Where each checked field is in a row of _RUN_COLUMNS: reading a row by position is half the
# cost of a dict of it, and the dashboard's overview reads one row per task.
_AT: Final = {name: i for i, name in enumerate(_RUN_FIELDS)}
_TIMES_AT: Final = (_AT["started"], _AT["ended"])
_KINDS_AT: Final = tuple((_AT[name], name, kinds) for name, kinds in _RUN_KINDS.items())
_ALL_STATES = f"SELECT {_STATE_COLUMNS} FROM task_state"  # noqa: S608


@dataclass(frozen=True, slots=True)
class TaskState:
    name: str
    fingerprint: str  # schedule identity; a change restarts the window
    last_occurrence: datetime  # the last occurrence this machine has dealt with
    missed_total: int = 0
    done: bool = False  # a one-shot `at` task that has been dealt with for good


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class TaskFacts:
    last_run: RunRow | None  # the newest row neither missed nor pending
    anchor: datetime  # the newest ok occurrence, else the first one (overdue counts from it)
    consecutive_failures: int


def _utc(value: datetime, what: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be an aware datetime, got naive {value.isoformat()}")
    return value.astimezone(UTC)


def _occurrence_text(value: datetime, what: str) -> str:
    value = _utc(value, what)
    if value.microsecond:
        raise ValueError(f"{what} must be a whole second, got {value.isoformat()}")
    return value.isoformat(timespec="seconds")[:19] + "Z"  # strftime's text, for less


def parse_time(text: str) -> datetime:
    value = datetime.fromisoformat(text)  # TypeError/ValueError: not a time cronctl wrote
    if value.tzinfo is None:
        raise ValueError(f"time without an offset: {text!r}")
    return value.astimezone(UTC)


def _run_column(name: str, value: object) -> object:
    if name == "occurrence":
        if not isinstance(value, datetime):
            raise TypeError(f"occurrence must be a datetime, got {value!r}")
        return _occurrence_text(value, name)
    if name in ("started", "ended"):
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"{name} must be a datetime or None, got {value!r}")
        return _utc(value, name).isoformat(timespec="microseconds")[:26] + "Z"
    if name == "outcome" and value not in OUTCOMES:
        raise ValueError(f"unknown outcome {value!r}; expected one of {sorted(OUTCOMES)}")
    return value


def _run_values(run: RunRow) -> tuple[object, ...]:
    # Not dataclasses.astuple, which deep-copies every field (docs/benchmarks.md); one
    # attrgetter, not a getattr per field.
    values = list(_RUN_GETTER(run))
    for name in _CONVERTED:
        values[_AT[name]] = _run_column(name, values[_AT[name]])
    return tuple(values)


def _row_to_run(row: tuple[Any, ...]) -> RunRow:
    if len(row) != len(_RUN_FIELDS):
        raise ValueError(f"a run row of {len(row)} columns, not {len(_RUN_FIELDS)}")
    values = list(row)
    values[_AT["occurrence"]] = parse_time(values[_AT["occurrence"]])
    for i in _TIMES_AT:
        if values[i] is not None:
            values[i] = parse_time(values[i])
    for i, name, kinds in _KINDS_AT:
        if not isinstance(values[i], kinds):
            raise ValueError(f"runs.{name} holds {values[i]!r}")
    if values[_AT["outcome"]] not in OUTCOMES:
        raise ValueError(f"runs.outcome holds {values[_AT['outcome']]!r}")
    return RunRow(*values)


def _window_text(texts: dict[datetime, str], when: datetime) -> str:
    # Most windows move to the same minute: formatting once per instant halves the write.
    text = texts.get(when)
    if text is None:
        text = texts[when] = _occurrence_text(when, "last_occurrence")
    return text


def _row_to_state(row: tuple[Any, ...]) -> TaskState:
    name, fingerprint, last, missed, done = row
    if not (isinstance(name, str) and isinstance(fingerprint, str) and isinstance(missed, int)):
        raise ValueError(f"task_state holds {row!r}")
    return TaskState(name, fingerprint, parse_time(last), missed, bool(done))


@contextmanager
def _own_values(path: Path) -> Iterator[None]:
    try:
        yield
    except (ValueError, TypeError, OverflowError) as exc:
        raise StoreUnusableError(
            f"{path}: the state database holds a value cronctl did not write ({exc}); it is "
            f"not a cronctl database, or was edited by hand. {move_aside(path)}"
        ) from exc


class _StateReads:
    _path: Path

    def _select(self, sql: str, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def states(self) -> dict[str, TaskState]:
        rows = self._select(_ALL_STATES, ())
        with _own_values(self._path):
            return {row[0]: _row_to_state(row) for row in rows}

    def stored_states(self) -> dict[str, StoredState]:
        """Every task state as stored, unparsed: cheap to compare with an earlier read."""
        return {row[0]: row for row in self._select(_ALL_STATES, ())}

    def parse_state(self, row: StoredState) -> TaskState:
        with _own_values(self._path):
            return _row_to_state(row)


class Txn(_StateReads):
    """Reads and writes inside one ``BEGIN IMMEDIATE`` transaction (:meth:`Store.transaction`)."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn: sqlite3.Connection | None = conn
        self._path = path

    def _execute(self, sql: str, params: tuple[object, ...]) -> sqlite3.Cursor:
        with translated(self._path):
            return self._live().execute(sql, params)

    def _executemany(self, sql: str, rows: Sequence[tuple[object, ...]]) -> sqlite3.Cursor:
        with translated(self._path):
            return self._live().executemany(sql, rows)

    def _select(self, sql: str, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
        return self._execute(sql, params).fetchall()

    def _live(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("this transaction has ended; use it only inside its `with` block")
        return self._conn

    def _end(self) -> None:
        self._conn = None

    def get_state(self, name: str) -> TaskState | None:
        sql = f"SELECT {_STATE_COLUMNS} FROM task_state WHERE name = ?"  # noqa: S608
        row = self._execute(sql, (name,)).fetchone()
        with _own_values(self._path):
            return None if row is None else _row_to_state(row)

    def any_unfinished(self) -> bool:
        sql = f"SELECT 1 FROM runs INDEXED BY runs_unfinished WHERE {_UNFINISHED} LIMIT 1"  # noqa: S608
        return self._execute(sql, ()).fetchone() is not None

    def data_version(self) -> int:
        """Unchanged since an earlier read on this connection (:meth:`Store.snapshot`) only if
        no other connection committed since (a checkpoint may change it too)."""
        (version,) = self._execute("PRAGMA data_version", ()).fetchone()
        return int(version)

    def advance_states(self, moves: list[tuple[StoredState, datetime]]) -> int:
        """Move each row's window where the row is still exactly as read (compare-and-set: a
        late write never moves a window back nor overwrites another's); how many moved."""
        if not moves:
            return 0
        texts: dict[datetime, str] = {}
        rows = [
            (_window_text(texts, when), name, fingerprint, last, missed, done)
            for (name, fingerprint, last, missed, done), when in moves
        ]
        return int(self._executemany(_ADVANCE_STATE, rows).rowcount)

    def add_states(self, states: list[TaskState]) -> int:
        if not states:
            return 0
        return int(self._write_states(_ADD_STATE, states).rowcount)

    def put_state(self, state: TaskState) -> None:
        self.put_states([state])

    def put_states(self, states: list[TaskState]) -> None:
        self._write_states(_PUT_STATE, states)

    def _write_states(self, sql: str, states: list[TaskState]) -> sqlite3.Cursor:
        texts: dict[datetime, str] = {}
        rows = [
            (
                state.name,
                state.fingerprint,
                _window_text(texts, state.last_occurrence),
                int(state.missed_total),
                int(state.done),
            )
            for state in states
        ]
        return self._executemany(sql, rows)

    def add_first(self, run: RunRow, unless: str) -> bool:
        """Record ``run`` unless a row of its task, trigger and occurrence exists, other than
        one whose message starts with ``unless`` (never started): a chained run may be reached
        by its upstream's end and by a catch-up. Whether it was recorded."""
        sql = f"SELECT 1 FROM runs WHERE task = ? AND trigger = ? AND occurrence = ? {_DEALT}"  # noqa: S608
        when = _occurrence_text(run.occurrence, "occurrence")
        found = self._execute(sql, (run.task, run.trigger, when, unless, unless)).fetchone()
        if found is not None:
            return False
        self.add_run(run)
        return True

    def add_run(self, run: RunRow) -> None:
        """:raises ValueError: a row with ``run.id`` exists, or ``run.outcome`` is unknown."""
        try:
            self._execute(_ADD_RUN, _run_values(run))
        except sqlite3.IntegrityError as exc:
            raise ValueError(f"run {run.id!r} is already recorded") from exc

    def add_runs(self, runs: Sequence[RunRow]) -> None:
        """Record new rows in one ``executemany``; errors as :meth:`add_run`'s."""
        if len(runs) < 2:
            for run in runs:
                self.add_run(run)
            return
        values = [_run_values(run) for run in runs]
        conn = self._live()
        with translated(self._path):
            conn.execute("SAVEPOINT add_runs")
            try:
                conn.executemany(_ADD_RUN, values)
            except sqlite3.IntegrityError:
                conn.execute("ROLLBACK TO add_runs")
                conn.execute("RELEASE add_runs")
                for run in runs:  # one by one, to name the id that is taken
                    self.add_run(run)
                raise
            conn.execute("RELEASE add_runs")

    def update_run(self, run_id: str, **fields: object) -> None:
        """:raises ValueError: not a RunRow field (or ``id``). :raises KeyError: no such row."""
        _check_updatable(fields)
        if not fields:
            return
        if self._update(run_id, fields, "") == 0:
            raise KeyError(run_id)

    def _update(self, run_id: str, fields: dict[str, object], condition: str, *more: object) -> int:
        assignments = ", ".join(f"{name} = ?" for name in fields)
        values = [_run_column(k, v) if k in _CONVERTED else v for k, v in fields.items()]
        sql = f"UPDATE runs SET {assignments} WHERE id = ? {condition}"  # noqa: S608 (names checked)
        return int(self._execute(sql, (*values, run_id, *more)).rowcount)


def _check_updatable(fields: dict[str, object]) -> None:
    unknown = sorted(set(fields) - _UPDATABLE)
    if unknown:
        raise ValueError(f"cannot update run fields {unknown}; allowed: {sorted(_UPDATABLE)}")


@dataclass(slots=True, eq=False, repr=False)
class _Update:
    run_id: str
    fields: dict[str, object]
    done: bool = False
    error: BaseException | None = None


class Store(_StateReads):
    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self._path = path
        self._lock = threading.RLock()
        # Group commit of update_run (see there): the queue, and whether a thread commits it.
        self._group = threading.Condition(threading.Lock())
        self._queue: list[_Update] = []
        self._leading = False

    @property
    def path(self) -> Path:
        return self._path

    @classmethod
    def open(cls, state_dir: Path, *, create: bool = True) -> Store:
        """``state_dir/state.db`` (checked by the caller); errors as ``open_connection``'s."""
        path = Path(state_dir) / DB_NAME
        return cls(open_connection(path, create=create), path)

    @classmethod
    def empty(cls, state_dir: Path) -> Store:
        """An empty store in memory: every task never ran; nothing is created on disk."""
        path = Path(state_dir) / DB_NAME
        return cls(empty_connection(path), path)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[Txn]:
        """One ``BEGIN IMMEDIATE`` transaction, committed at the end, rolled back if it raises."""
        with self._lock:
            if self._conn.in_transaction:
                raise RuntimeError("a transaction is already open on this store; use its Txn")
            with translated(self._path):
                self._conn.execute("BEGIN IMMEDIATE")
            txn = Txn(self._conn, self._path)
            try:
                yield txn
                with translated(self._path):
                    self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    with suppress(sqlite3.Error):
                        self._conn.execute("ROLLBACK")
                raise
            finally:
                txn._end()

    def update_run(self, run_id: str, **fields: object) -> None:
        """Change fields of run ``run_id``, durable when this returns; errors as Txn's.

        Group commit: updates other threads queue while a commit is under way share the next
        transaction (one ``fdatasync`` for N); each caller still waits for and hears its own.
        """
        (error,) = self.update_runs([(run_id, fields)])
        if error is not None:
            raise error

    def update_runs(
        self, updates: list[tuple[str, dict[str, object]]]
    ) -> list[BaseException | None]:
        """update_run of each, all in one commit, durable when this returns; each one's error
        (a failed commit: every one's)."""
        for _, changed in updates:
            _check_updatable(changed)
        items = [_Update(run_id, changed) for run_id, changed in updates]
        with self._group:
            self._queue += [item for item in items if item.fields]
            self._drive(lambda: all(item.done or not item.fields for item in items))
        return [item.error for item in items]

    def _drive(self, done: Callable[[], bool]) -> None:
        # Holding self._group: the thread that finds no commit under way leads the next one.
        while not done():
            if self._leading or not self._queue:
                self._group.wait()
                continue
            self._leading = True
            batch, self._queue = self._queue, []
            self._group.release()
            try:
                self._commit(batch)
            finally:
                self._group.acquire()
                self._leading = False
                self._group.notify_all()

    def _commit(self, batch: list[_Update]) -> None:
        try:
            with self.transaction() as txn:
                for item in batch:  # fields checked by update_runs
                    if txn._update(item.run_id, item.fields, "") == 0:  # pruned: only this one
                        item.error = KeyError(item.run_id)
        except BaseException as exc:
            for item in batch:
                item.error = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            for item in batch:
                item.done = True

    def _select(self, sql: str, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
        with self._lock, translated(self._path):
            return self._conn.execute(sql, params).fetchall()

    def get_run(self, run_id: str) -> RunRow | None:
        rows = self._select(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))  # noqa: S608
        return self._runs(rows[:1])[0] if rows else None

    def runs_between(
        self, task: str, start: datetime, end: datetime, limit: int = 200
    ) -> list[RunRow]:
        """Up to ``limit`` rows of ``task`` with occurrence in [start, end), newest first."""
        sql = (
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE task = ? "  # noqa: S608
            f"AND occurrence >= ? AND occurrence < ? {_ORDER} LIMIT ?"
        )
        params = (task, _occurrence_text(start, "start"), _occurrence_text(end, "end"), limit)
        return self._runs(self._select(sql, params))

    def occurrences_of(
        self, task: str, trigger: str, since: datetime, unless: str
    ) -> set[datetime]:
        """Occurrences from ``since`` with a row of ``trigger``, as :meth:`Txn.add_first`."""
        sql = (
            "SELECT occurrence FROM runs WHERE task = ? AND trigger = ? "  # noqa: S608
            f"AND occurrence >= ? {_DEALT}"
        )
        found = self._select(sql, (task, trigger, _occurrence_text(since, "since"), unless, unless))
        return {parse_time(row[0]) for row in found}

    def history(
        self,
        task: str | None = None,
        limit: int = 50,
        among: Sequence[str] | None = None,
        *,
        host: str | None = None,
        outcomes: Collection[str] | None = None,
        since: datetime | None = None,
    ) -> list[RunRow]:
        """Up to ``limit`` rows newest first (occurrence, start, id), filtered by whichever
        of ``task`` (else ``among``), ``host``, ``outcomes``, ``since`` are given."""
        terms: list[str] = []
        params: list[object] = []
        if task is not None:
            terms.append("task = ?")
            params.append(task)
        elif among is not None:
            # One JSON parameter, not one per name: a schedule of any size stays one query.
            # json here, not at the top: a quiet minute imports this module, never history.
            import json

            terms.append("task IN (SELECT value FROM json_each(?))")
            params.append(json.dumps(among))
        if host is not None:
            terms.append("host = ?")
            params.append(host)
        if outcomes is not None:
            terms.append(f"outcome IN ({', '.join('?' * len(outcomes))})")
            params += list(outcomes)
        if since is not None:
            terms.append("occurrence >= ?")
            params.append(_occurrence_text(since.replace(microsecond=0), "since"))
        return self._filtered(terms, params, _ORDER, limit)

    def history_page(
        self,
        *,
        task: str | None = None,
        host: str | None = None,
        outcome: str | None = None,
        trigger: str | None = None,
        before: tuple[datetime, str] | None = None,
        limit: int = 50,
    ) -> list[RunRow]:
        """Keyset paging on ``runs_page``: up to ``limit`` rows newest first by (occurrence,
        id) strictly before ``before``, so the millionth row costs what the first does."""
        terms: list[str] = []
        params: list[object] = []
        for column, value in (("task", task), ("host", host), ("outcome", outcome),
                              ("trigger", trigger)):  # fmt: skip
            if value is not None:
                terms.append(f"{column} = ?")
                params.append(value)
        if before is not None:
            terms.append("(occurrence, id) < (?, ?)")
            params += [_occurrence_text(before[0], "before"), before[1]]
        return self._filtered(terms, params, "ORDER BY occurrence DESC, id DESC", limit)

    def _filtered(
        self, terms: list[str], params: list[object], order: str, limit: int
    ) -> list[RunRow]:
        if limit < 0:
            raise ValueError(f"limit must be 0 or more, got {limit}")
        where = f"WHERE {' AND '.join(terms)}" if terms else ""
        sql = f"SELECT {_RUN_COLUMNS} FROM runs {where} {order} LIMIT ?"  # noqa: S608
        return self._runs(self._select(sql, (*params, limit)))

    def last_run(self, task: str) -> RunRow | None:
        return self._newest(task, "NOT IN ('missed', 'pending')")

    def consecutive_failures(self, task: str) -> int:
        """``task``'s failing occurrences back to its latest ``ok``: other outcomes neither
        count nor interrupt; the retries of one occurrence count once."""
        sql = f"SELECT outcome, occurrence FROM runs WHERE task = ? {_ORDER}"  # noqa: S608
        count = 0
        counted: str | None = None
        with self._lock, translated(self._path):
            cursor = self._conn.execute(sql, (task,))
            try:
                for outcome, occurrence in cursor:
                    if outcome == "ok":
                        break
                    if outcome in FAILED and occurrence != counted:
                        count += 1
                        counted = occurrence
            finally:
                cursor.close()
        return count

    def latest_facts(self, names: Sequence[str]) -> dict[str, TaskFacts]:
        """Last run, failures and overdue anchor (newest ok, else first occurrence) of every
        task in ``names`` with history, in two statements plus one walk per failing task."""
        # json here, as in history: a quiet minute never needs it.
        import json

        sql = (
            f"SELECT n.value, (SELECT occurrence FROM runs WHERE task = n.value "  # noqa: S608
            f"AND outcome = 'ok' {_ORDER} LIMIT 1), {_LATEST_COLUMNS} FROM json_each(?1) n "
            "LEFT JOIN runs r ON r.rowid = (SELECT rowid FROM runs WHERE task = n.value "
            f"AND outcome NOT IN ('missed', 'pending') {_ORDER} LIMIT 1)"
        )
        rows = self._select(sql, (json.dumps(list(names)),))
        last: dict[str, RunRow | None] = {}
        anchors: dict[str, datetime | None] = {}
        with _own_values(self._path):
            for name, ok, *stored in rows:
                last[name] = _row_to_run(tuple(stored)) if stored[0] is not None else None
                anchors[name] = parse_time(ok) if ok is not None else None
        # A task never ok is anchored at its first occurrence; none (no row at all): no facts.
        never_ok = [name for name, ok in anchors.items() if ok is None]
        sql = (
            "SELECT n.value, (SELECT MIN(occurrence) FROM runs WHERE task = n.value) "
            "FROM json_each(?1) n"
        )
        with _own_values(self._path):
            for name, first in self._select(sql, (json.dumps(never_ok),)):
                anchors[name] = parse_time(first) if first is not None else None
        facts: dict[str, TaskFacts] = {}
        for name, run in last.items():
            anchor = anchors[name]
            if anchor is None:
                continue
            # Only a task whose last run is not ok can have failed since its last ok one.
            failing = run is not None and run.outcome != "ok"
            facts[name] = TaskFacts(run, anchor, self.consecutive_failures(name) if failing else 0)
        return facts

    def unfinished_runs(self, host: str | None) -> list[RunRow]:
        """``host``'s (None: all) unfinished rows: a crash's, or a live run's (check ``pid``)."""
        # The partial index: the same cost with a day of history or ninety; left to itself
        # SQLite walks the whole table in ORDER BY order.
        rows = self._select(
            f"SELECT {_RUN_COLUMNS} FROM runs INDEXED BY runs_unfinished "  # noqa: S608
            f"WHERE (?1 IS NULL OR host = ?1) AND {_UNFINISHED} {_ORDER}",
            (host,),
        )
        return self._runs(rows)

    def close_unfinished(self, run: RunRow, **fields: object) -> bool:
        """Change ``fields`` of ``run`` only if still unfinished and owned by ``run.pid``
        (an owner that recorded its end meanwhile keeps it); whether it was."""
        _check_updatable(fields)
        if not fields:
            raise ValueError("no run fields to update")
        condition = f"AND {_UNFINISHED} AND pid IS ?"
        with self.transaction() as txn:
            return txn._update(run.id, fields, condition, run.pid) == 1

    def snapshot(self) -> tuple[dict[str, StoredState], int]:
        """Every stored state and the data version, in one read (:meth:`Txn.data_version`)."""
        with self._lock, translated(self._path):
            self._conn.execute("BEGIN")
            try:
                rows = self._conn.execute(_ALL_STATES).fetchall()
                (version,) = self._conn.execute("PRAGMA data_version").fetchone()
            finally:
                self._conn.execute("COMMIT")  # ends the read; nothing was written
        return {row[0]: row for row in rows}, int(version)

    def checkpoint(self) -> None:
        """A PASSIVE checkpoint: the next write then restarts the WAL in place, so a commit
        syncs only overwritten blocks, not a grown file (Worker._hold_wal)."""
        with self._lock, translated(self._path):
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def file_id(self) -> tuple[int, int] | None:
        """(st_dev, st_ino) at the path now: the same around :meth:`open` names its file."""
        return file_id(self._path)

    def still_at(self, opened: tuple[int, int]) -> bool:
        """Whether the path is still the file ``opened`` and still private (else, as at open,
        UnsafeDirectoryError): a store kept open goes on only with its own file."""
        return inspect_file(self._path) and file_id(self._path) == opened

    def _runs(self, rows: list[tuple[Any, ...]]) -> list[RunRow]:
        with _own_values(self._path):
            return [_row_to_run(row) for row in rows]

    def prune(self, before: datetime) -> int:
        """Delete finished rows older than ``before``; how many. Unfinished rows stay: a long
        run must record its end, and recovery must find a crash's."""
        before = _utc(before, "before")
        if before.microsecond:  # occurrences are whole seconds: o < before <=> o < ceil(before)
            before = before.replace(microsecond=0) + timedelta(seconds=1)
        cutoff = _occurrence_text(before, "before")
        sql = f"DELETE FROM runs WHERE occurrence < ? AND NOT {_UNFINISHED}"  # noqa: S608
        with self.transaction() as txn:
            return txn._execute(sql, (cutoff,)).rowcount

    def task_names(self) -> list[str]:
        return [row[0] for row in self._select("SELECT DISTINCT task FROM runs ORDER BY task", ())]

    def outcome_counts(self) -> dict[str, dict[str, int]]:
        sql = "SELECT task, outcome, COUNT(*) FROM runs GROUP BY task, outcome"
        counts: dict[str, dict[str, int]] = {}
        for task, outcome, count in self._select(sql, ()):
            counts.setdefault(task, {})[outcome] = int(count)
        return counts

    def last_ok(self, task: str) -> RunRow | None:
        return self._newest(task, "IN ('ok')")

    def last_ended(self, task: str) -> RunRow | None:
        return self._newest(task, f"IN {_listed(FINISHED)}")

    def _newest(self, task: str, outcomes: str) -> RunRow | None:
        where = f"WHERE task = ? AND outcome {outcomes} {_ORDER} LIMIT 1"
        rows = self._select(f"SELECT {_RUN_COLUMNS} FROM runs {where}", (task,))  # noqa: S608
        return self._runs(rows[:1])[0] if rows else None

    def first_occurrence(self, task: str) -> datetime | None:
        rows = self._select("SELECT MIN(occurrence) FROM runs WHERE task = ?", (task,))
        return parse_time(rows[0][0]) if rows and rows[0][0] else None
