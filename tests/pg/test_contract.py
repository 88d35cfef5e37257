"""The coordination port's contract, proven once and held by both adapters (files, PostgreSQL)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cronctl.coord.files.adapter import FilesCoordinator
from cronctl.coord.port import Coordinator, Overlap, redact_url

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)


@pytest.fixture(params=["files", "postgresql"])
def coord(request: pytest.FixtureRequest, tmp_path: Path) -> Coordinator:
    if request.param == "files":
        return FilesCoordinator(tmp_path / "locks")
    from cronctl.coord.postgres.adapter import PostgresCoordinator

    made = PostgresCoordinator(request.getfixturevalue("pg_url"))
    request.addfinalizer(made.close)
    return made


def test_a_claim_is_won_once_and_a_batch_returns_only_the_wins(coord: Coordinator) -> None:
    later = T0 + timedelta(minutes=1)
    assert coord.claim([("a", T0)], host="m1", pid=1, now=T0) == {("a", T0)}
    won = coord.claim([("a", T0), ("b", T0), ("a", later)], host="m2", pid=2, now=T0)
    assert won == {("b", T0), ("a", later)}
    assert coord.claimed("a", T0)
    assert not coord.claimed("c", T0)


def test_overlap_lock_is_exclusive_and_names_its_holder(coord: Coordinator) -> None:
    first = coord.try_overlap("job", lease=None, now=T0, host="m1", pid=11)
    assert first.status == "acquired" and first.lock is not None
    try:
        assert coord.overlap_held("job")
        second = coord.try_overlap("job", lease=None, now=T0, host="m2", pid=22)
        assert second.status == "held" and second.lock is None
        assert second.holder is not None and (second.holder.host, second.holder.pid) == ("m1", 11)
    finally:
        first.lock.release()
    third = _taken_once_free(coord)
    assert third.status == "acquired" and third.lock is not None
    third.lock.release()


def _taken_once_free(coord: Coordinator) -> Overlap:
    """The lock taken again after a release. A file lock is free at once; PostgreSQL frees a
    session's lock once the server has seen its socket close (release() never unlocks: the
    task's processes may share the session), a moment later: on a loaded machine the next
    attempt could come first (seen once in `.ci/run`), so it is tried again, within 10 s."""
    deadline = time.monotonic() + 10
    while True:
        got = coord.try_overlap("job", lease=None, now=T0, host="m2", pid=22)
        if got.status == "acquired" or time.monotonic() > deadline:
            return got
        time.sleep(0.01)


def test_a_holder_past_its_lease_is_overtaken(coord: Coordinator) -> None:
    stuck = coord.try_overlap("job", lease=timedelta(minutes=5), now=T0, host="m1", pid=11)
    assert stuck.lock is not None
    later = T0 + timedelta(minutes=10)
    taken = coord.try_overlap("job", lease=timedelta(minutes=5), now=later, host="m2", pid=22)
    try:
        assert taken.status == "overtaken" and taken.lock is not None
        assert taken.holder is not None and taken.holder.pid == 11
    finally:
        if taken.lock is not None:
            taken.lock.release()
        stuck.lock.release()


def test_pause_holds_until_cleared(coord: Coordinator) -> None:
    coord.set_pause("job", reason="maintenance", now=T0, host="m1", user="ops")
    pause = coord.paused_tasks()["job"]
    assert (pause.reason, pause.host, pause.user, pause.since) == ("maintenance", "m1", "ops", T0)
    assert coord.clear_pause("job")
    assert not coord.clear_pause("job")
    assert "job" not in coord.paused_tasks()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:pw@db/x", "postgresql://u:***@db/x"),
        ("postgresql://u@db/x?sslmode=require&password=pw", "postgresql://u@db/x?sslmode=require&password=***"),
        ("postgresql://db/x", "postgresql://db/x"),
        ("postgresql://u:p@ss:w@db:5432/x", "postgresql://u:***@db:5432/x"),
    ],
)  # fmt: skip
def test_a_password_is_never_shown(url: str, shown: str) -> None:
    assert redact_url(url) == shown
