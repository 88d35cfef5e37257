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


def test_updates_given_together_are_committed_when_it_returns_each_with_its_error(
    tmp_path: Path,
) -> None:
    """update_runs (a result and the next run's "running" mark): another connection sees each
    as the call returns; a missing row fails only itself."""
    with Store.open(tmp_path) as store, Store.open(tmp_path) as other:
        first, second = _rows(store, 2)
        errors = store.update_runs(
            [(first.id, {"outcome": "ok"}), ("gone", {"outcome": "ok"}),
             (second.id, {"outcome": "running", "started": T0})]
        )  # fmt: skip
        assert errors[0] is None and isinstance(errors[1], KeyError) and errors[2] is None
        seen = [other.get_run(r.id) for r in (first, second)]
        assert [r.outcome if r else None for r in seen] == ["ok", "running"]
