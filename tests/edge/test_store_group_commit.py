"""Store.update_run from many threads at once: group commit keeps each caller's contract."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cronctl.core.runs import RunRow
from cronctl.edge.state.store import Store

T0 = datetime(2026, 8, 3, 12, 34, tzinfo=UTC)


def _rows(store: Store, n: int) -> list[RunRow]:
    rows = [RunRow(f"r{i:03d}", f"task-{i}", T0, "pending", "h", 1) for i in range(n)]
    with store.transaction() as tx:
        for row in rows:
            tx.add_run(row)
    return rows


def test_each_update_is_committed_when_it_returns(tmp_path: Path) -> None:
    """Another connection (another process's view) sees every update as its call returns."""
    store = Store.open(tmp_path)
    rows = _rows(store, 64)
    seen: dict[str, str | None] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def worker(mine: list[RunRow]) -> None:
        start.wait()
        try:
            with Store.open(tmp_path) as other:
                for row in mine:
                    store.update_run(row.id, outcome="running", started=T0)
                    found = other.get_run(row.id)
                    seen[row.id] = found.outcome if found else None
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(rows[i::8],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()
    assert errors == []
    assert seen == {row.id: "running" for row in rows}


def test_a_missing_row_fails_only_its_own_caller(tmp_path: Path) -> None:
    """A row that is gone (pruned) is that caller's KeyError; the batch it shared commits."""
    with Store.open(tmp_path) as store:
        rows = _rows(store, 16)
        outcomes: dict[str, str] = {}
        start = threading.Barrier(17)

        def update(run_id: str) -> None:
            start.wait()
            try:
                store.update_run(run_id, outcome="ok")
                outcomes[run_id] = "saved"
            except KeyError:
                outcomes[run_id] = "missing"

        ids = [row.id for row in rows] + ["gone"]
        threads = [threading.Thread(target=update, args=(i,)) for i in ids]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert outcomes == {**{row.id: "saved" for row in rows}, "gone": "missing"}
        assert {r.outcome for r in store.history(limit=100)} == {"ok"}


def test_a_bad_field_is_refused_before_anything_is_queued(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        (row,) = _rows(store, 1)
        with pytest.raises(ValueError, match="cannot update run fields"):
            store.update_run(row.id, id="other")
        store.update_run(row.id, outcome="ok")  # the store still works
        assert store.get_run(row.id) is not None


def test_a_mark_made_ahead_never_overwrites_a_result_recorded_first(tmp_path: Path) -> None:
    """run's queue marks the next rows "running" ahead; one of them may meet a refusing guard
    and record its skip before that mark's commit: the mark then changes nothing, and says so
    (KeyError) to whoever would start it."""
    with Store.open(tmp_path) as store:
        skipped, started = _rows(store, 2)
        store.update_run(skipped.id, outcome="skipped: still running")
        errors = store.update_runs(
            [(r.id, {"outcome": "running", "started": T0}) for r in (skipped, started)],
            pending_only=True,
        )
        assert isinstance(errors[0], KeyError) and errors[1] is None
        found = {r.id: store.get_run(r.id) for r in (skipped, started)}
    assert {k: (v.outcome if v else None) for k, v in found.items()} == {
        skipped.id: "skipped: still running",
        started.id: "running",
    }


def _outcomes(store: Store, rows: list[RunRow]) -> list[str | None]:
    found = [store.get_run(r.id) for r in rows]
    return [f.outcome if f else None for f in found]


def test_alike_changes_share_one_statement_and_a_refused_one_is_found_alone(
    tmp_path: Path,
) -> None:
    """Marks setting the same fields go in one statement; when one of them is refused (its
    row no longer pending, or gone), that one alone fails and every other still lands."""
    with Store.open(tmp_path) as store:
        rows = _rows(store, 6)
        store.update_run(rows[2].id, outcome="skipped: still running")
        with Store.open(tmp_path) as other, other.transaction() as tx:  # pruned meanwhile
            tx._execute("DELETE FROM runs WHERE id = ?", (rows[4].id,))
        marks = [(r.id, {"outcome": "running", "started": T0}) for r in rows]
        errors = store.update_runs(marks, pending_only=True)
        assert [type(e).__name__ if e else None for e in errors] == [
            None, None, "KeyError", None, "KeyError", None,
        ]  # fmt: skip
        assert _outcomes(store, rows) == [
            "running", "running", "skipped: still running", "running", None, "running",
        ]  # fmt: skip
        # Marks that all apply: one statement, all of them.
        more = _rows_named(store, "s", 5)
        errors = store.update_runs(
            [(r.id, {"outcome": "running", "started": T0}) for r in more], pending_only=True
        )
        assert errors == [None] * 5
        assert _outcomes(store, more) == ["running"] * 5


def test_changes_of_one_row_land_in_the_order_they_were_queued(tmp_path: Path) -> None:
    """A row's mark and then its result, in the same commit, are applied in order, whatever
    the grouping of alike changes around them."""
    with Store.open(tmp_path) as store:
        rows = _rows(store, 3)
        running: dict[str, object] = {"outcome": "running", "started": T0}
        changes = [(row.id, running) for row in rows]
        changes += [(rows[1].id, {"outcome": "ok", "exit_code": 0})]
        changes += [(rows[0].id, {"outcome": "failed", "exit_code": 1})]
        assert store.update_runs(changes) == [None] * 5
        assert _outcomes(store, rows) == ["failed", "ok", "running"]


def _rows_named(store: Store, prefix: str, n: int) -> list[RunRow]:
    rows = [RunRow(f"{prefix}{i:03d}", f"task-{i}", T0, "pending", "h", 1) for i in range(n)]
    with store.transaction() as tx:
        for row in rows:
            tx.add_run(row)
    return rows
