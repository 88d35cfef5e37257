"""Chains at run time: the downstream task starts in the run that ended its upstream, and a
later run on any machine sharing the lock_dir catches up what a crash left between links."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from dataclasses import replace
from datetime import timedelta

from cronctl.cli.wiring import this_host
from cronctl.commands.exec import exec_task
from cronctl.commands.explain import explain_here
from cronctl.coord import open_coordinator
from cronctl.coord.port import ChainEnd
from cronctl.core.model import Schedule
from cronctl.core.runs import RunRow
from cronctl.edge.state.store import Store
from cronctl.run.context import RunReport
from cronctl.run.once import run_once
from cronctl.run.work import Worker
from tests.helpers import clean_env, invoke
from tests.run.conftest import T0, Drive

AT_2 = T0.replace(hour=2)


def etl(drive: Drive, extract_exit: int = 0, extra: str = "") -> Schedule:
    """extract (02:00 daily) -> transform -> load, and page-oncall after a failed extract; each
    appends its name, occurrence and upstream run ids to trail.log."""
    trail = drive.root / "trail.log"

    def step(name: str, code: int = 0) -> str:
        line = f'{name} $CRONCTL_OCCURRENCE "$CRONCTL_UPSTREAM"'
        return f"name = '{name}'\ncommand = '''echo {line} >> {trail}; exit {code}'''\n{extra}"

    return drive.schedule(
        step("extract", extract_exit) + "daily_at = '02:00'",
        step("transform") + "after = ['extract']",
        step("load") + "after = 'transform'",
        step("page-oncall") + "after = ['extract']\nafter_outcome = 'failed'",
    )


def trail(drive: Drive) -> list[list[str]]:
    path = drive.root / "trail.log"
    return [line.split(" ") for line in path.read_text().splitlines()] if path.exists() else []


def test_a_chain_runs_in_order_in_one_run(drive: Drive) -> None:
    schedule = etl(drive)
    drive.run(schedule, AT_2 - timedelta(minutes=1))  # each task seen before 02:00
    report = drive.run(schedule, AT_2)
    by_task = {r.task: r for r in report.runs}
    assert [r.outcome for r in report.runs] == ["ok", "ok", "ok"]
    assert [step[0] for step in trail(drive)] == ["extract", "transform", "load"]
    occurrence = "2026-08-03T02:00:00Z"
    assert {step[1] for step in trail(drive)} == {occurrence}
    assert trail(drive)[1][2] == by_task["extract"].id
    assert trail(drive)[2][2] == by_task["transform"].id
    assert (by_task["transform"].trigger, by_task["transform"].upstream) == (
        "after",
        by_task["extract"].id,
    )
    assert by_task["load"].occurrence == AT_2


def test_a_failed_extract_runs_only_the_failure_branch(drive: Drive) -> None:
    schedule = etl(drive, extract_exit=3)
    drive.run(schedule, AT_2 - timedelta(minutes=1))
    report = drive.run(schedule, AT_2)
    assert [(r.task, r.outcome) for r in report.runs] == [
        ("extract", "failed"),
        ("page-oncall", "ok"),
    ]
    assert [step[0] for step in trail(drive)] == ["extract", "page-oncall"]


def test_a_schedule_without_chains_records_no_end(drive: Drive) -> None:
    schedule = etl(drive)
    plain = replace(schedule, tasks=schedule.tasks[:1])
    drive.run(plain, AT_2)
    assert not (drive.root / "state" / "locks" / "ends").exists()


def crashed_after_extract(
    drive: Drive, schedule: Schedule, host: str = "web-1", **changes: object
) -> ChainEnd:
    """What a cronctl killed right after extract ended leaves: extract run at 02:00 (by a
    run that knew of no chain) and its end recorded (``changes``: of that run's context)."""
    drive.host = host
    drive.run(replace(schedule, tasks=schedule.tasks[:1]), AT_2, **changes)
    drive.host = "web-1"
    (drive.root / "trail.log").unlink()
    coord = drive.ctx(**changes).coord
    end = ChainEnd("extract", AT_2, "ok", "20260803T0200Z-0123456789abcdef", host,
                   AT_2 + timedelta(seconds=5))  # fmt: skip
    coord.record_end(end)
    return end


def test_the_next_run_catches_up_a_link_a_crash_left_once(drive: Drive) -> None:
    schedule = etl(drive)
    drive.run(schedule, AT_2 - timedelta(minutes=1))
    end = crashed_after_extract(drive, schedule)
    report = drive.run(schedule, AT_2 + timedelta(minutes=1))
    assert [(r.task, r.outcome, r.upstream) for r in report.runs][:1] == [
        ("transform", "ok", end.run_id)
    ]
    assert [step[0] for step in trail(drive)] == ["transform", "load"]
    again = drive.run(schedule, AT_2 + timedelta(minutes=2))
    assert again.runs == []
    assert [step[0] for step in trail(drive)] == ["transform", "load"]


def test_a_catch_up_past_the_misfire_grace_is_missed(drive: Drive) -> None:
    schedule = etl(drive, extra="misfire_grace = '10m'\n")
    drive.run(schedule, AT_2 - timedelta(minutes=1))
    crashed_after_extract(drive, schedule)
    report = drive.run(schedule, AT_2 + timedelta(minutes=30))
    assert [(r.task, r.outcome) for r in report.runs] == [("transform", "missed")]
    assert trail(drive) == []


def test_a_paused_downstream_does_not_run(drive: Drive) -> None:
    schedule = etl(drive)
    drive.run(schedule, AT_2 - timedelta(minutes=1))
    coord = open_coordinator(None, drive.root / "state" / "locks", host="web-1", pid=1)
    coord.set_pause("transform", reason=None, now=T0, user="ops")
    report = drive.run(schedule, AT_2)
    assert [(r.task, r.outcome) for r in report.runs] == [
        ("extract", "ok"),
        ("transform", "skipped: paused"),
    ]


def test_a_downstream_that_is_not_on_one_server_follows_only_this_machine(drive: Drive) -> None:
    schedule = etl(drive)
    drive.run(schedule, AT_2 - timedelta(minutes=1))
    theirs = crashed_after_extract(drive, schedule, "web-2", state_dir=drive.root / "web-2")
    runs = drive.run(schedule, AT_2 + timedelta(minutes=1)).runs
    mine = next(r for r in runs if r.task == "extract")  # its own 02:00, late
    assert [(r.task, r.upstream) for r in runs if r.task != "extract"] == [
        ("transform", mine.id),
        ("load", next(r.id for r in runs if r.task == "transform")),
    ]
    assert theirs.run_id not in {r.upstream for r in runs}


def test_an_on_one_server_downstream_is_caught_up_by_another_machine_once(drive: Drive) -> None:
    schedule = etl(drive, extra="on_one_server = true\n")
    for host in ("web-1", "web-2"):
        drive.host = host
        drive.run(schedule, AT_2 - timedelta(minutes=1), state_dir=drive.root / host)
    crashed_after_extract(drive, schedule, state_dir=drive.root / "web-1")
    drive.host = "web-2"
    first = drive.run(schedule, AT_2 + timedelta(minutes=1), state_dir=drive.root / "web-2")
    assert [(r.task, r.outcome, r.host) for r in first.runs if r.task != "extract"] == [
        ("transform", "ok", "web-2"),
        ("load", "ok", "web-2"),
    ]
    drive.host = "web-1"
    second = drive.run(schedule, AT_2 + timedelta(minutes=2), state_dir=drive.root / "web-1")
    assert [(r.task, r.outcome) for r in second.runs] == [
        ("transform", "skipped: another server"),
        ("load", "skipped: another server"),
    ]
    assert [step[0] for step in trail(drive)] == ["transform", "load"]
    with Store.open(drive.root / "web-2") as store:
        rows = store.history("transform", limit=5)
    assert [r.trigger for r in rows] == ["after"]


def test_explain_names_the_upstream_run_and_how_it_ended(drive: Drive) -> None:
    schedule = etl(drive, extract_exit=3)
    drive.run(schedule, AT_2 - timedelta(minutes=1))
    drive.run(schedule, AT_2)
    coord = open_coordinator(None, drive.root / "state" / "locks", host="web-1", pid=1)
    state = drive.root / "state"
    said = explain_here(schedule, state, coord, "transform", AT_2, host="web-1", now=AT_2)
    paged = explain_here(schedule, state, coord, "page-oncall", AT_2, host="web-1", now=AT_2)
    assert said.verdict == "upstream"
    assert said.reasons[1] == (
        "extract failed at 2026-08-03T02:00:00Z (exit 3): transform did not run; page-oncall ran"
    )
    assert "it runs only after extract ended ok" in said.reasons
    assert paged.verdict == "ran"


def test_a_chain_runs_in_order_under_work(drive: Drive) -> None:
    schedule = etl(drive)
    drive.run(schedule, AT_2 - timedelta(minutes=1))
    now = [AT_2 - timedelta(seconds=30)]
    reports: list[RunReport] = []

    ticked = threading.Event()

    def wait(seconds: float) -> bool:
        if now[0] >= AT_2:  # the 02:00 tick has started: stop once it has reported
            ticked.wait(60)
            return True
        now[0] += timedelta(seconds=seconds)
        return False

    def report(done: RunReport) -> None:
        reports.append(done)
        ticked.set()

    worker = Worker(
        load=lambda: schedule, paths=list, ctx=drive.ctx(), report=report,
        clock=lambda: now[0], wait=wait,
    )  # fmt: skip
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        assert worker.serve() == 0
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    (tick,) = reports
    assert [(r.task, r.outcome, r.trigger) for r in tick.runs] == [
        ("extract", "ok", "schedule"),
        ("transform", "ok", "after"),
        ("load", "ok", "after"),
    ]
    assert [step[0] for step in trail(drive)] == ["extract", "transform", "load"]


def test_a_task_whose_follower_runs_elsewhere_records_its_end(drive: Drive) -> None:
    schedule = etl(drive)
    elsewhere = tuple(replace(t, hosts=("db-*",)) if t.chained else t for t in schedule.tasks)
    upstream_only = this_host(replace(schedule, tasks=elsewhere), "web-1")
    assert [t.name for t in upstream_only.tasks] == ["extract"]
    report = drive.run(upstream_only, AT_2)
    (extract,) = report.runs
    coord = open_coordinator(None, drive.root / "state" / "locks", host="db-1", pid=1)
    assert [e.run_id for e in coord.chain_ends({"extract"}, AT_2)] == [extract.id]


def test_a_link_a_crash_left_pending_is_run_since_it_never_started(drive: Drive) -> None:
    schedule = etl(drive)
    drive.run(schedule, AT_2 - timedelta(minutes=1))
    end = crashed_after_extract(drive, schedule)
    dead = subprocess.Popen(["true"])  # a pid no process has any more
    dead.wait()
    left = RunRow("20260803T0200Z-00000000000000aa", "transform", AT_2, "pending", "web-1",
                  dead.pid, trigger="after", upstream=end.run_id)  # fmt: skip
    with Store.open(drive.root / "state") as store, store.transaction() as tx:
        tx.add_run(left)
    report = drive.run(schedule, AT_2 + timedelta(minutes=1))
    assert [(r.task, r.outcome) for r in report.runs] == [
        ("transform", "error"),  # recovered: it did not run
        ("transform", "ok"),
        ("load", "ok"),
    ]
    assert [step[0] for step in trail(drive)] == ["transform", "load"]


def test_exec_chain_runs_what_follows_and_exec_alone_does_not(drive: Drive) -> None:
    schedule = etl(drive)
    alone = exec_task(schedule, "extract", drive.ctx(), wait=False)
    assert (alone.run.outcome, alone.followed) == ("ok", ())
    assert [step[0] for step in trail(drive)] == ["extract"]
    chain = exec_task(schedule, "extract", drive.ctx(), wait=False, chain=True)
    assert [(r.task, r.trigger, r.upstream) for r in chain.followed] == [
        ("transform", "after", chain.run.id),
        ("load", "after", chain.followed[0].id),
    ]
    assert chain.exit_code == 0
    assert [step[0] for step in trail(drive)] == ["extract", "extract", "transform", "load"]


def test_history_json_names_the_trigger_and_the_upstream_runs(drive: Drive) -> None:
    schedule = etl(drive)
    drive.run(schedule, AT_2 - timedelta(minutes=1))
    runs = {r.task: r for r in drive.run(schedule, AT_2).runs}
    env = clean_env(drive.root, {"CRONCTL_STATE_DIR": str(drive.root / "state")})
    shown = invoke("history", "--json", "load", cwd=drive.root, env=env)
    assert shown.returncode == 0, shown.stderr
    (load,) = json.loads(shown.stdout)["runs"]
    assert (load["trigger"], load["upstream"]) == ("after", [runs["transform"].id])


def test_a_chained_task_of_a_full_group_waits_from_its_upstreams_end(drive: Drive) -> None:
    schedule = etl(drive)
    tasks = tuple(
        replace(t, group="db", group_limit=1, misfire_grace=timedelta(minutes=5))
        if t.name == "transform" else t
        for t in schedule.tasks
    )  # fmt: skip
    schedule = replace(schedule, tasks=tasks)
    drive.run(schedule, AT_2 - timedelta(minutes=1))
    coord = open_coordinator(None, drive.root / "state" / "locks", host="web-2", pid=1)
    held = coord.try_group_slot("db", 1)
    assert held is not None
    # extract ends an hour after its occurrence; the slot comes free as transform waits.
    late = AT_2 + timedelta(hours=1)
    drive.clock.now = late
    ctx = drive.ctx(clock=lambda: late, sleep=lambda _seconds: held.release())
    report = run_once(schedule, AT_2, ctx)
    assert [(r.task, r.outcome) for r in report.runs] == [
        ("extract", "ok"),
        ("transform", "ok"),
        ("load", "ok"),
    ]
