"""The fleet records of runs that end while another's are being sent go in one statement
(docs/fleets-postgresql.md#measured): a wave of runs ending together costs a round trip or
two, not one each."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime

from cronctl.coord.outbox import Records
from cronctl.core.runs import RunRow

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)


class _SlowStore:
    """Takes records; the first publish waits until the test lets it go."""

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
    first = threading.Thread(target=records.send, args=([_row(0)],))
    first.start()
    assert store.inside.wait(30)
    for i in (1, 2, 3):
        records.send([_row(i)])  # the first send is under way: these wait for it
    store.go_on.set()
    first.join(30)
    assert store.published == [["r0"], ["r1", "r2", "r3"]]
