"""The coordination port's contract, proven once and held by both adapters (files, PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cronctl.coord import open_coordinator
from cronctl.coord.history import fleet_history_of
from cronctl.coord.port import ChainEnd, Coordinator, Overlap
from cronctl.coord.redact import redact_url
from cronctl.errors import UsageError
from tests.helpers import wait_for

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)

#: A coordinator opened by one machine (host, pid), all of them on the same lock_dir or store.
Machine = Callable[[str, int], Coordinator]


@pytest.fixture(params=["files", "postgresql"])
def machine(request: pytest.FixtureRequest, tmp_path: Path) -> Machine:
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None

    def opened(host: str, pid: int) -> Coordinator:
        made = open_coordinator(url, tmp_path / "locks", host=host, pid=pid)
        request.addfinalizer(made.close)
        return made

    return opened


def test_a_claim_is_won_once_and_a_batch_returns_only_the_wins(machine: Machine) -> None:
    later = T0 + timedelta(minutes=1)
    m1, m2 = machine("m1", 1), machine("m2", 2)
    assert m1.claim([("a", T0)], now=T0) == {("a", T0)}
    won = m2.claim([("a", T0), ("b", T0), ("a", later)], now=T0)
    assert won == {("b", T0), ("a", later)}
    assert m1.claimed("a", T0)
    assert not m1.claimed("c", T0)


def test_a_machine_claims_in_order_only_as_many_as_it_can_start(machine: Machine) -> None:
    m1, m2 = machine("m1", 1), machine("m2", 2)
    assert m1.claim([("a", T0)], now=T0) == {("a", T0)}
    wanted = [("a", T0), ("b", T0), ("c", T0), ("d", T0)]
    # a is taken: the walk goes on past it, and stops once one is won.
    assert m2.claim(wanted, now=T0, limit=1) == {("b", T0)}
    assert not m2.claimed("c", T0)  # left for another machine, or a slot that comes free
    assert m1.claim(wanted, now=T0, limit=5) == {("c", T0), ("d", T0)}
    assert m2.claim(wanted, now=T0, limit=0) == set()


def test_overlap_lock_is_exclusive_and_names_its_holder(machine: Machine) -> None:
    m1, m2 = machine("m1", 11), machine("m2", 22)
    first = m1.try_overlap("job", lease=None, now=T0)
    assert first.status == "acquired" and first.lock is not None
    try:
        assert m1.overlap_held("job")
        second = m2.try_overlap("job", lease=None, now=T0)
        assert second.status == "held" and second.lock is None
        assert second.holder is not None and (second.holder.host, second.holder.pid) == ("m1", 11)
    finally:
        first.lock.release()
    third = _taken_once_free(m2)
    assert third.status == "acquired" and third.lock is not None
    third.lock.release()


def _taken_once_free(coord: Coordinator) -> Overlap:
    """The lock taken again after a release. A file lock is free at once; PostgreSQL frees a
    session's lock once the server has seen its socket close (release() never unlocks: the
    task's processes may share the session), a moment later: on a loaded machine the next
    attempt could come first (seen once in `.ci/run`), so it is tried again."""

    def acquired() -> Overlap | None:
        got = coord.try_overlap("job", lease=None, now=T0)
        return got if got.status == "acquired" else None

    return wait_for(acquired, "the lock to be free again")


def test_a_holder_past_its_lease_is_overtaken(machine: Machine) -> None:
    m1, m2 = machine("m1", 11), machine("m2", 22)
    stuck = m1.try_overlap("job", lease=timedelta(minutes=5), now=T0)
    assert stuck.lock is not None
    later = T0 + timedelta(minutes=10)
    taken = m2.try_overlap("job", lease=timedelta(minutes=5), now=later)
    try:
        assert taken.status == "overtaken" and taken.lock is not None
        assert taken.holder is not None and taken.holder.pid == 11
    finally:
        if taken.lock is not None:
            taken.lock.release()
        stuck.lock.release()


def test_pause_holds_until_cleared(machine: Machine) -> None:
    coord = machine("m1", 1)
    coord.set_pause("job", reason="maintenance", now=T0, user="ops")
    pause = coord.paused_tasks()["job"]
    assert (pause.reason, pause.host, pause.user, pause.since) == ("maintenance", "m1", "ops", T0)
    assert coord.clear_pause("job")
    assert not coord.clear_pause("job")
    assert "job" not in coord.paused_tasks()


def test_a_store_keeps_the_fleet_history_and_files_refuse_to_read_one(machine: Machine) -> None:
    coord = machine("m1", 1)
    if coord.fleet is None:
        with pytest.raises(UsageError, match="--fleet reads the coordination store"):
            fleet_history_of(coord)
        return
    fleet = fleet_history_of(coord)
    assert fleet.fleet_latest() == [] and fleet.fleet_history(None, None, 10) == []
    assert fleet.fleet_summary(["failed"]) == fleet.fleet_host_summary(["failed"]) == []
    assert fleet.fleet_latest(task="t", host="h") == []


def test_a_store_is_measured_and_files_have_nothing_to_reach(machine: Machine) -> None:
    coord = machine("m1", 1)
    check = coord.check()
    if not coord.may_be_unreachable:
        assert check is None
        return
    assert check is not None and check.version == check.latest
    assert check.connect_s >= 0 and check.round_trip_s >= 0
    assert abs((check.local_now - check.server_now).total_seconds()) < 60


def test_a_group_has_as_many_slots_as_its_limit_across_machines(machine: Machine) -> None:
    m1, m2 = machine("m1", 1), machine("m2", 2)
    first, second = m1.try_group_slot("db", 2), m2.try_group_slot("db", 2)
    assert first is not None and second is not None
    assert m1.try_group_slot("db", 2) is None and m2.try_group_slot("db", 2) is None
    other = m2.try_group_slot("db.2", 1)  # another group, whose name extends this one's
    assert other is not None
    first.release()
    first.release()  # idempotent
    again = m2.try_group_slot("db", 2)
    assert again is not None and m1.try_group_slot("db", 2) is None
    for slot in (second, other, again):
        slot.release()
    m1.close()  # held slots outlive the coordinator's own connection; idle ones do not
    last = m1.try_group_slot("db", 1)
    assert last is not None
    last.release()


def test_a_released_slot_is_free_at_once_on_another_machine(machine: Machine) -> None:
    # A store frees a closed session's locks a moment after the client has gone; a release
    # must not leave the next machine's try to that moment.
    m1, m2 = machine("m1", 1), machine("m2", 2)
    for _ in range(40):
        held = m1.try_group_slot("db", 1)
        assert held is not None
        held.release()
        taken = m2.try_group_slot("db", 1)
        assert taken is not None
        taken.release()


def _end(task: str, host: str, outcome: str = "ok", minutes: int = 0) -> ChainEnd:
    when = T0 + timedelta(minutes=minutes)
    run_id = f"{when:%Y%m%dT%H%MZ}-{host}{task}"
    return ChainEnd(task, when, outcome, run_id, host, when + timedelta(seconds=42))


def test_an_end_recorded_by_one_machine_is_read_by_every_other(machine: Machine) -> None:
    m1, m2 = machine("m1", 1), machine("m2", 2)
    assert m2.chain_ends({"extract"}, T0) == []
    m1.record_end(_end("extract", "m1", "failed"))
    m1.record_end(_end("extract", "m1", "ok"))  # recorded again: replaced, never twice
    m2.record_end(_end("extract", "m2", "failed"))
    m2.record_end(_end("extract", "m2", "ok", minutes=1))
    m1.record_end(_end("other", "m1"))
    found = m2.chain_ends({"extract", "load"}, T0)
    assert found == [_end("extract", "m1"), _end("extract", "m2", "failed"),
                     _end("extract", "m2", "ok", minutes=1)]  # fmt: skip
    later = m1.chain_ends({"extract"}, T0 + timedelta(seconds=30))
    assert later == [_end("extract", "m2", "ok", minutes=1)]


def test_ends_are_swept_with_the_claims(machine: Machine) -> None:
    coord = machine("m1", 1)
    coord.record_end(_end("extract", "m1"))
    coord.record_end(_end("extract", "m1", minutes=38 * 24 * 60))
    coord.sweep(T0 + timedelta(days=40))
    assert coord.chain_ends({"extract"}, T0) == [_end("extract", "m1", minutes=38 * 24 * 60)]


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


def test_ends_are_read_and_swept_from_any_instant(machine: Machine) -> None:
    coord = machine("m1", 1)
    coord.record_end(_end("extract", "m1"))
    odd = T0 + timedelta(seconds=1, microseconds=589660)  # a run's clock, not a minute
    assert coord.chain_ends({"extract"}, odd - timedelta(minutes=1)) == [_end("extract", "m1")]
    coord.sweep(odd + timedelta(days=40))
    assert coord.chain_ends({"extract"}, T0) == []
