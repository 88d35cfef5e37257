"""Claims as leases across a fleet (docs/fleets-postgresql.md#claims-are-leases): each machine
(a `cronctl run` with its own host name and state dir) claims only what it can start; an
unstarted claim of a machine that is gone is taken over, one frozen past its lease starts
nothing it lost, and a run started on a machine that died is recorded as of unknown outcome.
Who ran what is taken from the tasks' own marks, never from cronctl's word."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg2
import pytest

from cronctl.coord.postgres.adapter import PostgresCoordinator
from tests.coord.conftest import PgServer
from tests.coord.postgres.kit import T1, T, database_of, outcomes
from tests.helpers import Cli, reaped, wait_for, write_schedule
from tests.run.test_work import NEAR_BOUNDARY, clock_from

Machine = Callable[..., object]
#: Appends TASK HOST to `ran` once `release` exists (the test decides when tasks end).
HELD = (
    "echo $$ > started.$CRONCTL_TASK; while [ ! -e release ]; do sleep 0.05; done; "
    "echo $CRONCTL_TASK $CRONCTL_HOST >> ran"
)
#: Appends TASK HOST to `ran` at once.
QUICK = "echo $CRONCTL_TASK $CRONCTL_HOST >> ran"


def _task(name: str, command: str, extra: str = "") -> str:
    return (
        f'name = "{name}"\ncron = "* * * * *"\non_one_server = true\n'
        f"command = {json.dumps(command)}\n{extra}"
    )


@pytest.fixture(autouse=True)
def _schema(pg_url: str) -> None:
    """The store's schema made before the test reads its claims."""
    store = PostgresCoordinator(pg_url, host="tester", pid=1)
    store.check()
    store.close()


def _claims(pg_server: PgServer, pg_url: str) -> list[tuple[object, ...]]:
    return pg_server.sql(
        "SELECT task, host, state FROM cronctl.claims ORDER BY task", database_of(pg_url)
    )


def _ran(tmp_path: Path) -> list[tuple[str, str]]:
    lines = (tmp_path / "ran").read_text().split("\n") if (tmp_path / "ran").exists() else []
    return [(line.split()[0], line.split()[1]) for line in lines if line]


def _finish(run: object) -> dict[str, str]:
    assert isinstance(run, subprocess.Popen)
    out, err = run.communicate(timeout=120)
    assert run.returncode in (0, 1), err
    assert "Traceback" not in err, err
    return outcomes(subprocess.CompletedProcess([], 0, out, err))


def test_each_machine_claims_only_its_free_slots_and_each_occurrence_runs_once(
    machine: Machine, pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    tasks = [f"t{i}" for i in range(8)]
    write_schedule(
        tmp_path / "schedules.toml",
        [_task(name, HELD) for name in tasks],
        "[cronctl]\nmax_parallel = 2\n",
    )
    hosts = ["a", "b", "c", "d"]
    runs = [machine(host, "run", "--json", "--now", T, background=True) for host in hosts]
    # Every task waits for `release`: no machine frees a slot, so each can hold two at most,
    # and all eight are claimed only when each machine took its two.
    wait_for(lambda: len(_claims(pg_server, pg_url)) == len(tasks), "every claim")
    wait_for(lambda: len(list(tmp_path.glob("started.*"))) == len(tasks), "every start")
    per_host = Counter(host for _, host, _ in _claims(pg_server, pg_url))
    assert per_host == dict.fromkeys(hosts, 2)
    (tmp_path / "release").touch()
    found = [_finish(run) for run in runs]
    ran = _ran(tmp_path)
    assert sorted(task for task, _ in ran) == tasks  # each (task, minute) once
    assert Counter(host for _, host in ran) == dict.fromkeys(hosts, 2)
    for host, said in zip(hosts, found, strict=True):
        assert Counter(said.values()) == {"ok": 2, "skipped: another server": 6}, host


def test_a_machine_that_frees_a_slot_claims_more(
    machine: Machine, pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    # One slot on `a`, and `b` not yet there: a runs the tasks one after the other, claiming
    # each as its slot comes free, and leaves nothing claimed that it has not started.
    write_schedule(
        tmp_path / "schedules.toml",
        [_task(f"t{i}", QUICK) for i in range(3)],
        "[cronctl]\nmax_parallel = 1\n",
    )
    said = outcomes(machine("a", "run", "--json", "--now", T))
    assert set(said.values()) == {"ok"}
    assert sorted(_ran(tmp_path)) == [("t0", "a"), ("t1", "a"), ("t2", "a")]
    assert {state for _, _, state in _claims(pg_server, pg_url)} == {"done"}


#: What stands between a task's due time and its claim: nothing (claimed with the minute's
#: others), a condition or a jitter (claimed alone, once those have passed).
BEFORE_CLAIM = {"plain": "", "when": 'when = "true"\n', "jitter": 'jitter = "1s"\n'}


def _group_schedule(tmp_path: Path, before_claim: str = "plain", cron: str = "* * * * *") -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            _task("g", QUICK, 'group = "g"\n' + BEFORE_CLAIM[before_claim]).replace(
                "* * * * *", cron
            )
        ],
        '[[group]]\nname = "g"\nmax_running = 1\n\n[defaults]\nmisfire_grace = "10m"\n',
    )


def _slot_held_elsewhere(pg_url: str) -> tuple[PostgresCoordinator, object]:
    """The group's one slot, held by a machine of the test's own: a claim of `g` waits."""
    holder = PostgresCoordinator(pg_url, host="holder", pid=1)
    slot = holder.try_group_slot("g", 1)
    assert slot is not None
    return holder, slot


@pytest.mark.parametrize("before_claim", list(BEFORE_CLAIM))
@pytest.mark.parametrize("passed_first", [False, True], ids=["after", "passed-before"])
def test_an_unstarted_claim_of_a_killed_machine_is_taken_over_and_runs_once(
    machine: Machine,
    pg_server: PgServer,
    pg_url: str,
    tmp_path: Path,
    passed_first: bool,
    before_claim: str,
) -> None:
    """b asks after a died, or (``passed_first``) had found the claim held by a live a,
    waiting for the group's slot, and passed it over before a died; a task claimed alone
    (a condition, a jitter) is asked for again as the others are."""
    _group_schedule(tmp_path, before_claim)
    holder, slot = _slot_held_elsewhere(pg_url)
    try:
        a = machine("a", "run", "--json", "--now", T, background=True)
        assert isinstance(a, subprocess.Popen)
        wait_for(lambda: _claims(pg_server, pg_url) == [("g", "a", "leased")], "a's claim")
        if passed_first:
            b = machine("b", "run", "--json", "--now", T, background=True)
            seen = "SELECT host FROM cronctl.hosts WHERE host = 'b'"
            wait_for(lambda: bool(pg_server.sql(seen, database_of(pg_url))), "b's claim")
            assert _claims(pg_server, pg_url) == [("g", "a", "leased")]
        a.kill()  # the whole machine: its run of `g` had not started
        a.communicate(timeout=30)
        if not passed_first:
            b = machine("b", "run", "--json", "--now", T, background=True)
        wait_for(lambda: _claims(pg_server, pg_url) == [("g", "b", "leased")], "the take-over")
        slot.release()  # type: ignore[attr-defined]
        assert _finish(b) == {"g": "ok"}
    finally:
        slot.release()  # type: ignore[attr-defined]
        holder.close()
    assert _ran(tmp_path) == [("g", "b")]


@pytest.mark.parametrize("kill", ["whole host", "cronctl alone"])
def test_a_killed_machines_unstarted_claim_is_taken_over_beside_its_started_run(
    machine: Machine, pg_server: PgServer, pg_url: str, tmp_path: Path, kill: str
) -> None:
    """a has started `held` and claimed `g`, which waits for the group's slot, when it is
    killed: b takes `g` over and runs it, once, and says `held`'s outcome is unknown."""
    write_schedule(
        tmp_path / "schedules.toml",
        [_task("g", QUICK, 'group = "g"'), _task("held", HELD)],
        '[[group]]\nname = "g"\nmax_running = 1\n\n[defaults]\nmisfire_grace = "10m"\n',
    )
    holder, slot = _slot_held_elsewhere(pg_url)
    try:
        a = machine("a", "run", "--json", "--now", T, background=True)
        assert isinstance(a, subprocess.Popen)
        wait_for(lambda: (tmp_path / "started.held").exists(), "held to start")
        wait_for(lambda: ("g", "a", "leased") in _claims(pg_server, pg_url), "a's claim of g")
        task = int((tmp_path / "started.held").read_text())
        a.kill()
        a.communicate(timeout=30)
        if kill == "whole host":
            os.killpg(task, signal.SIGKILL)
        b = machine("b", "run", "--json", "--now", T, background=True)
        wait_for(lambda: ("g", "b", "leased") in _claims(pg_server, pg_url), "the take-over")
        slot.release()  # type: ignore[attr-defined]
        assert _finish(b) == {"g": "ok", "held": "skipped: another server"}
    finally:
        slot.release()  # type: ignore[attr-defined]
        holder.close()
    (tmp_path / "release").touch()
    if kill == "cronctl alone":
        wait_for(lambda: ("held", "a") in _ran(tmp_path), "the orphaned task's end")
    assert sorted(_ran(tmp_path)) == [("g", "b")] + [("held", "a")] * (kill == "cronctl alone")
    rows = pg_server.sql(
        "SELECT outcome, message FROM cronctl.runs WHERE task = 'held'", database_of(pg_url)
    )
    assert rows == [("error", "outcome unknown: a stopped answering")]


@pytest.mark.parametrize("before_claim", ["plain", "when"])
def test_a_run_stops_asking_for_a_live_machines_claim_before_the_next_minute(
    machine: Machine, pg_server: PgServer, pg_url: str, tmp_path: Path, before_claim: str
) -> None:
    """b's run, 44 s into the minute, finds the occurrence held by a live a that waits for
    the group's slot (for up to its 10 minutes of grace): it asks again until 45 s into the
    minute, not for the grace, and ends; a still runs it."""
    _group_schedule(tmp_path, before_claim)
    holder, slot = _slot_held_elsewhere(pg_url)
    try:
        a = machine("a", "run", "--json", "--now", T, background=True)
        wait_for(lambda: _claims(pg_server, pg_url) == [("g", "a", "leased")], "a's claim")
        late = T.replace(":00Z", ":44Z")
        said = outcomes(machine("b", "run", "--json", "--now", late))
        assert said == {"g": "skipped: another server"}
        assert _claims(pg_server, pg_url) == [("g", "a", "leased")]
        slot.release()  # type: ignore[attr-defined]
        assert _finish(a) == {"g": "ok"}
    finally:
        slot.release()  # type: ignore[attr-defined]
        holder.close()
    assert _ran(tmp_path) == [("g", "a")]


@pytest.mark.parametrize("late", [False, True], ids=["in-its-minute", "past-45s"])
def test_a_machine_frozen_past_its_lease_starts_nothing_it_lost(
    machine: Machine, pg_server: PgServer, pg_url: str, tmp_path: Path, late: bool
) -> None:
    """b takes the claim over as it asks for the occurrence, or (``late``: a claimed 50 s
    into the minute, when the others no longer ask) at its next minute, from the store's
    orphans; either way a, resumed, finds its claim gone and starts nothing."""
    _group_schedule(tmp_path, cron="0 9 * * *" if late else "* * * * *")
    holder, slot = _slot_held_elsewhere(pg_url)
    a = machine("a", "run", "--json", "--now", T_LATE if late else T, background=True)
    assert isinstance(a, subprocess.Popen)
    try:
        wait_for(lambda: _claims(pg_server, pg_url) == [("g", "a", "leased")], "a's claim")
        a.send_signal(signal.SIGSTOP)
        # Frozen, it cannot renew its lease: the store's clock is moved past it, not waited.
        pg_server.sql(
            "UPDATE cronctl.claims SET expires = now() - interval '1 second'",
            database_of(pg_url),
        )
        b = machine("b", "run", "--json", "--now", T1 if late else T, background=True)
        wait_for(lambda: _claims(pg_server, pg_url)[0][1] == "b", "the take-over")
        slot.release()  # type: ignore[attr-defined]
        assert _finish(b) == {"g": "ok"}
    finally:
        a.send_signal(signal.SIGCONT)
        slot.release()  # type: ignore[attr-defined]
        holder.close()
    out, err = a.communicate(timeout=60)
    assert [r["outcome"] for r in json.loads(out)["runs"]] == ["skipped: another server"], err
    assert _ran(tmp_path) == [("g", "b")]


def _b_env(pg_url: str, tmp_path: Path) -> dict[str, str]:
    """The environment of b's `work`: its host name, the store, its own state dir."""
    b = {"CRONCTL_HOST": "b", "CRONCTL_COORDINATION": pg_url}
    return {**b, "CRONCTL_STATE_DIR": str(tmp_path / "b")}


def _let_go(
    holder: PostgresCoordinator, slot: object, worker: subprocess.Popen[str] | None
) -> None:
    """The group's slot freed, its holder closed, and b's `work`, if started, stopped."""
    slot.release()  # type: ignore[attr-defined]
    holder.close()
    if worker is not None:
        worker.terminate()
        _, err = worker.communicate(timeout=30)
        assert "Traceback" not in err, err


def _killed_claimer(machine: Machine, pg_server: PgServer, pg_url: str, now: str) -> None:
    """a's `run --now NOW`, killed once it holds its claim of `g` (which waits for the slot)."""
    a = machine("a", "run", "--json", "--now", now, background=True)
    assert isinstance(a, subprocess.Popen)
    wait_for(lambda: _claims(pg_server, pg_url) == [("g", "a", "leased")], "a's claim")
    a.kill()
    a.communicate(timeout=30)


#: 50 s into T's minute: past the 45 s in which the other machines ask for a held claim.
T_LATE = T.replace(":00Z", ":50Z")


@pytest.mark.parametrize("before_claim", ["plain", "when"])
def test_a_claim_killed_while_waiting_past_45s_is_taken_over_at_the_next_minute_once(
    machine: Machine, pg_server: PgServer, pg_url: str, tmp_path: Path, before_claim: str
) -> None:
    """a claims a daily task of a full group 50 s into its minute and waits for the slot
    (10 minutes of grace) when it is killed: no run asks for that occurrence any more, but
    the next minute's read of the pauses finds it, and of b and c, which have nothing due,
    exactly one takes it over and runs it; the other finds it taken, or loses its claim."""
    _group_schedule(tmp_path, before_claim, cron="0 9 * * *")
    holder, slot = _slot_held_elsewhere(pg_url)
    try:
        _killed_claimer(machine, pg_server, pg_url, T_LATE)
        later = [machine(h, "run", "--json", "--now", T1, background=True) for h in "bc"]
        wait_for(lambda: _claims(pg_server, pg_url)[0][1] != "a", "the take-over")
        slot.release()  # type: ignore[attr-defined]
        said = [_finish(run) for run in later]
    finally:
        slot.release()  # type: ignore[attr-defined]
        holder.close()
    # The other found it taken over already, or lost its claim: it ran nothing.
    got = [s.get("g") for s in said]
    assert sorted(map(str, got)) in (["None", "ok"], ["ok", "skipped: another server"])
    taker = "bc"[got.index("ok")]
    assert _ran(tmp_path) == [("g", taker)]
    assert _claims(pg_server, pg_url) == [("g", taker, "done")]


@pytest.mark.parametrize("kill", ["whole host", "cronctl alone"])
def test_a_run_started_on_a_machine_that_died_is_recorded_as_of_unknown_outcome(
    machine: Machine, pg_server: PgServer, pg_url: str, tmp_path: Path, kill: str
) -> None:
    write_schedule(tmp_path / "schedules.toml", [_task("held", HELD), _task("quick", QUICK)])
    a = machine("a", "run", "--json", "--now", T, background=True)
    assert isinstance(a, subprocess.Popen)
    wait_for(lambda: (tmp_path / "started.held").exists(), "the task to start")
    task = int((tmp_path / "started.held").read_text())
    a.kill()
    a.communicate(timeout=30)
    if kill == "whole host":
        os.killpg(task, signal.SIGKILL)  # each run has its own process group
    (tmp_path / "release").touch()  # an orphaned task ends unrecorded: its cronctl is gone
    # The next claim any other machine makes says what became of it.
    assert outcomes(machine("b", "run", "--json", "--now", T1)) == {"held": "ok", "quick": "ok"}
    rows = pg_server.sql(
        "SELECT host, outcome, message FROM cronctl.runs WHERE task = 'held' AND host = 'a'",
        database_of(pg_url),
    )
    assert rows == [("a", "error", "outcome unknown: a stopped answering")]
    fleet = machine("b", "history", "--fleet", "--json", "--host", "a").stdout  # type: ignore[attr-defined]
    said = {r["task"]: r["outcome"] for r in json.loads(fleet)["runs"]}
    assert said["held"] == "error"


def test_a_dead_machines_started_run_is_recorded_by_a_run_with_nothing_to_claim(
    machine: Machine, pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    write_schedule(tmp_path / "schedules.toml", [_task("held", HELD)])
    a = machine("a", "run", "--json", "--now", T, background=True)
    assert isinstance(a, subprocess.Popen)
    wait_for(lambda: (tmp_path / "started.held").exists(), "the task to start")
    a.kill()
    a.communicate(timeout=30)
    # The survivor's minute has nothing due: its read of the pauses says it all the same.
    yearly = 'name = "yearly"\ncron = "0 0 1 1 *"\ncommand = "true"'
    write_schedule(tmp_path / "schedules.toml", [yearly])
    assert outcomes(machine("b", "run", "--json", "--now", T1)) == {}
    rows = pg_server.sql(
        "SELECT host, outcome, message FROM cronctl.runs WHERE task = 'held'",
        database_of(pg_url),
    )
    assert rows == [("a", "error", "outcome unknown: a stopped answering")]


def test_a_work_minute_takes_over_a_claim_killed_while_waiting_past_45s(
    machine: Machine, cli: Cli, pg_url: str, pg_server: PgServer, tmp_path: Path
) -> None:
    """As above with the taker a `cronctl work`: its first minute's read of the pauses finds
    the claim a left (on the real clock: `work` judges an occurrence's grace by it), runs it
    once, then its own minute's."""
    write_schedule(
        tmp_path / "schedules.toml",
        [_task("g", "echo $CRONCTL_TASK $CRONCTL_HOST $CRONCTL_OCCURRENCE >> ran", 'group = "g"')],
        '[[group]]\nname = "g"\nmax_running = 1\n\n[defaults]\nmisfire_grace = "10m"\n',
    )
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    holder, slot = _slot_held_elsewhere(pg_url)
    worker = None
    try:
        late = (minute + timedelta(seconds=50)).strftime("%Y-%m-%dT%H:%M:%SZ")
        a = machine("a", "run", "--json", "--now", late, background=True)
        assert isinstance(a, subprocess.Popen)
        wait_for(lambda: _claims(pg_server, pg_url) == [("g", "a", "leased")], "a's claim")
        a.kill()
        a.communicate(timeout=30)
        worker = cli.popen_code(
            NEAR_BOUNDARY, "work", "--grace", "10", env=_b_env(pg_url, tmp_path)
        )
        wait_for(lambda: _claims(pg_server, pg_url)[0][1] == "b", "the take-over")
        slot.release()  # type: ignore[attr-defined]
        wait_for(lambda: len(_ran(tmp_path)) == 2, "both of b's runs")
    finally:
        _let_go(holder, slot, worker)
    ran = (tmp_path / "ran").read_text().split("\n")
    assert ran[0] == f"g b {minute.strftime('%Y-%m-%dT%H:%M:%SZ')}"  # once, first
    assert [line.split()[:2] for line in ran if line] == [["g", "b"]] * 2


#: `work` as b whose minute T comes half a second after it starts, with its runs' clock 50 s
#: ahead of its loop's: its minute's claims are asked for 50 s into T's minute, past the 45 s
#: in which a `run` asks.
_WORK_LATE = clock_from("datetime(2026, 8, 3, 8, 59, 59, 500000, tzinfo=UTC)").replace(
    "    real(self, *args, **kwargs)\n",
    "    real(self, *args, **kwargs)\n"
    "    from dataclasses import replace\n"
    "    late = replace(self._ctx.world, clock=lambda: clock() + timedelta(seconds=50))\n"
    "    self._ctx = replace(self._ctx, world=late)\n",
)


@pytest.mark.parametrize("gone", ["killed", "frozen"])
def test_work_asks_on_past_45s_and_takes_over_a_claimer_gone_late_within_30s(
    machine: Machine, cli: Cli, pg_url: str, pg_server: PgServer, tmp_path: Path, gone: str
) -> None:
    """b's `work` finds g's occurrence held by a, which waits for the group's slot, 50 s
    into its minute: it asks again until the claim's run may no longer start (not only for
    45 s, as a `run` does), so when a is killed, or frozen past its lease, b takes it over
    within 30 s, not at its next minute; a frozen a, resumed, starts nothing."""
    _group_schedule(tmp_path, cron="0 9 * * *")
    database = database_of(pg_url)
    holder, slot = _slot_held_elsewhere(pg_url)
    a = machine("a", "run", "--json", "--now", T, background=True)
    assert isinstance(a, subprocess.Popen)
    worker = None
    try:
        wait_for(lambda: _claims(pg_server, pg_url) == [("g", "a", "leased")], "a's claim")
        worker = cli.popen_code(_WORK_LATE, "work", "--grace", "10", env=_b_env(pg_url, tmp_path))
        seen = "SELECT host FROM cronctl.hosts WHERE host = 'b'"
        wait_for(lambda: bool(pg_server.sql(seen, database)), "b to ask")
        if gone == "killed":
            ((gone_at,),) = pg_server.sql("SELECT now()", database)
            a.kill()
            a.communicate(timeout=30)
        else:
            a.send_signal(signal.SIGSTOP)
            # Frozen, it cannot renew its lease: the store's clock is moved past it, not waited.
            ((gone_at,),) = pg_server.sql(
                "UPDATE cronctl.claims SET expires = now() - interval '1 second' RETURNING now()",
                database,
            )
        taken = "SELECT claimed_at FROM cronctl.claims WHERE host = 'b'"
        ((taken_at,),) = wait_for(lambda: pg_server.sql(taken, database), "the take-over")
        # The store's instants: b asks every 10 s; at its next minute, 60 s on, it is too late.
        assert taken_at - gone_at < timedelta(seconds=30)  # type: ignore[operator]
        slot.release()  # type: ignore[attr-defined]
        wait_for(lambda: _ran(tmp_path), "b's run")
    finally:
        if gone == "frozen":
            a.send_signal(signal.SIGCONT)
        _let_go(holder, slot, worker)
    if gone == "frozen":
        out, err = a.communicate(timeout=60)
        assert [r["outcome"] for r in json.loads(out)["runs"]] == ["skipped: another server"], err
    assert _ran(tmp_path) == [("g", "b")]
    assert _claims(pg_server, pg_url) == [("g", "b", "done")]


def test_a_chained_claim_killed_while_waiting_is_taken_over_at_the_next_minute_once(
    machine: Machine, pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    """a runs `up`, then claims `g`, which follows it, and waits for the group's slot when
    it is killed: the claim says until when g may start, counted from up's end, so b's next
    minute (its first: it has no catch-up of its own to make) takes it over and runs it once."""
    up = 'name = "up"\ncron = "0 9 * * *"\ncommand = "true"\n'
    g = _task("g", QUICK, 'group = "g"\nafter = ["up"]\n').replace('cron = "* * * * *"\n', "")
    write_schedule(
        tmp_path / "schedules.toml",
        [up, g],
        '[[group]]\nname = "g"\nmax_running = 1\n\n[defaults]\nmisfire_grace = "10m"\n',
    )
    holder, slot = _slot_held_elsewhere(pg_url)
    try:
        _killed_claimer(machine, pg_server, pg_url, T)
        b = machine("b", "run", "--json", "--now", T1, background=True)
        wait_for(lambda: _claims(pg_server, pg_url)[0][1] == "b", "the take-over")
        slot.release()  # type: ignore[attr-defined]
        assert _finish(b) == {"g": "ok"}
    finally:
        _let_go(holder, slot, None)
    assert _ran(tmp_path) == [("g", "b")]
    taken = "SELECT trigger, upstream FROM cronctl.runs WHERE task = 'g' AND host = 'b'"
    up_ran = "SELECT run_id FROM cronctl.chain_ends WHERE task = 'up' AND host = 'a'"
    [(up_id,)] = pg_server.sql(up_ran, database_of(pg_url))
    # CRONCTL_UPSTREAM names up's run, as it would have on the machine that was killed.
    assert pg_server.sql(taken, database_of(pg_url)) == [("after", up_id)]


def test_a_work_told_to_stop_stops_asking_for_a_held_claim(
    machine: Machine, cli: Cli, pg_url: str, pg_server: PgServer, tmp_path: Path
) -> None:
    """b's `work` asks for a's claim for up to its 10 minutes of grace; a SIGTERM ends that
    within its grace (it did not have to kill its minute), its row not started, and a
    still runs the occurrence."""
    _group_schedule(tmp_path, cron="0 9 * * *")
    holder, slot = _slot_held_elsewhere(pg_url)
    a = machine("a", "run", "--json", "--now", T, background=True)
    try:
        wait_for(lambda: _claims(pg_server, pg_url) == [("g", "a", "leased")], "a's claim")
        work = cli.popen_code(_WORK_LATE, "work", "--grace", "10", env=_b_env(pg_url, tmp_path))
        with reaped(work) as worker:
            seen = "SELECT host FROM cronctl.hosts WHERE host = 'b'"
            wait_for(lambda: bool(pg_server.sql(seen, database_of(pg_url))), "b to ask")
            worker.terminate()
            _, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
        assert "grace period over" not in err, err
        assert _claims(pg_server, pg_url) == [("g", "a", "leased")]
        slot.release()  # type: ignore[attr-defined]
        assert _finish(a) == {"g": "ok"}
    finally:
        _let_go(holder, slot, None)
    assert _ran(tmp_path) == [("g", "a")]
    rows = "SELECT outcome FROM cronctl.runs WHERE host = 'b'"
    assert pg_server.sql(rows, database_of(pg_url)) == [("interrupted",)]


def test_a_claim_committed_while_another_machine_claims_is_seen_held_there(
    pg_url: str, pg_server: PgServer
) -> None:
    """Machines claim a minute's occurrences at the same instant: b's claim waits for a's,
    made meanwhile, and is told it is held (so b asks again, and takes it over when a
    dies), not passed over as if it had started."""
    when = datetime(2026, 8, 3, 9, tzinfo=UTC)
    a = psycopg2.connect(pg_url)
    b = PostgresCoordinator(pg_url, host="b", pid=2)
    try:
        cur = a.cursor()
        cur.execute("SELECT pg_advisory_lock(1)")  # a's liveness, as a claimer's session holds
        cur.execute(
            "INSERT INTO cronctl.claims (task, occurrence, host, state, lease, expires) "
            "VALUES ('g', %s, 'a', 'leased', 1, now() + interval '1 minute')",
            (when,),
        )
        held: set[tuple[str, datetime]] = set()
        found: list[set[tuple[str, datetime]]] = []
        claim = [("g", when)]
        asking = threading.Thread(
            target=lambda: found.append(b.claim(claim, now=when, leased=set(claim), held=held))
        )
        asking.start()
        waits = "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        wait_for(lambda: pg_server.sql(waits, database_of(pg_url)), "b's claim to wait for a's")
        a.commit()
        asking.join(timeout=30)
    finally:
        a.close()
        b.close()
    assert found == [set()]
    assert held == {("g", when)}
