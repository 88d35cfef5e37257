"""The fleet records of runs that end together go in one statement, sent by a thread of
their own (docs/fleets-postgresql.md#measured): a wave of runs ending together costs a
round trip or two, not one each, and no worker waits for the store to take a record."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cronctl.coord import outbox
from cronctl.coord.outbox import Records
from cronctl.core.runs import RunRow
from tests.helpers import wait_for

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)


class _SlowStore:
    """Takes records; the first publish waits until the test lets it go."""

    keeps_fleet_history = True

    def __init__(self) -> None:
        self.published: list[list[str]] = []
        self.inside = threading.Event()
        self.go_on = threading.Event()

    def publish(self, rows: Sequence[RunRow]) -> None:
        if not self.published:
            self.inside.set()
            assert self.go_on.wait(30)
        self.published.append([row.id for row in rows])


def _row(i: int) -> RunRow:
    return RunRow(id=f"r{i}", task=f"t{i}", occurrence=T0, outcome="ok", host="h")


def test_records_that_end_during_a_send_go_together_in_the_next() -> None:
    store = _SlowStore()
    records = Records(store)  # type: ignore[arg-type]
    records.send([_row(0)])  # returns at once: the sender thread publishes it
    assert store.inside.wait(30)
    for i in (1, 2, 3):
        records.send([_row(i)])  # the first send is under way: these wait for it
    store.go_on.set()
    wait_for(lambda: len(store.published) == 2, "the second send")
    assert store.published == [["r0"], ["r1", "r2", "r3"]]


def test_records_gathered_go_in_one_statement_and_finish_sends_them_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outbox, "GATHER_S", 600.0)  # only finish ends the gathering
    store = _SlowStore()
    store.go_on.set()
    records = Records(store)  # type: ignore[arg-type]
    for i in (0, 1, 2):
        records.send([_row(i)])
    assert store.published == []  # still gathering: the workers went on
    assert records.finish(None, [_row(i) for i in (0, 1, 2)], tmp_path) is None  # type: ignore[arg-type]
    assert store.published == [["r0", "r1", "r2"]]  # once: finish sends nothing twice
