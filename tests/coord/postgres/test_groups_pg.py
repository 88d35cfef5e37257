"""`[[group]]` limits across a fleet: six machines (six `cronctl run` processes, each its own
host name and state dir) against one real PostgreSQL; the count is taken from the tasks' own
start and end marks, never from cronctl's word."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cronctl.coord.postgres.adapter import PostgresCoordinator
from cronctl.edge.schedfiles import load_paths
from cronctl.run import guards
from cronctl.run.once import run_start_tasks
from tests.coord.postgres.kit import T1, T
from tests.helpers import (
    local_context,
    mark_spans,
    most_at_once,
    reaped,
    wait_for,
    write_schedule,
)

MACHINES = 6


def marked(name: str, marks: Path, gate: Path) -> str:
    """A task of group ``g`` that appends its start and end, named TASK@HOST, and between
    them waits for the file ``gate`` to appear."""
    command = (
        f'echo "start {name}@$CRONCTL_HOST $(date +%s.%N)" >> {marks}; '
        f"while [ ! -e {gate} ]; do sleep 0.05; done; "
        f'echo "end {name}@$CRONCTL_HOST $(date +%s.%N)" >> {marks}'
    )
    return f'name = "{name}"\nevery_minute = true\ngroup = "g"\ncommand = {json.dumps(command)}'


def history(machine: Callable[..., object], host: str) -> list[str]:
    """The outcomes in ``host``'s own history."""
    result = machine(host, "history", "--json")
    return [r["outcome"] for r in json.loads(result.stdout)["runs"]]  # type: ignore[attr-defined]


@pytest.mark.long
def test_six_machines_never_run_more_of_a_group_than_its_limit(
    machine: Callable[..., object], tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    write_schedule(
        tmp_path / "schedules.toml",
        [marked("a", marks, tmp_path / "gate"), marked("b", marks, tmp_path / "gate")],
        '[[group]]\nname = "g"\nmax_running = 2\n\n[defaults]\nmisfire_grace = "1m"\n',
    )
    hosts = [f"m{i}" for i in range(MACHINES)]
    runs = [machine(host, "run", "--now", T, background=True) for host in hosts]
    # The first two hold their slots until both have started: they overlap for certain.
    wait_for(lambda: marks.exists() and len(marks.read_text().splitlines()) >= 2, "two starts")
    (tmp_path / "gate").touch()
    for run in runs:
        assert isinstance(run, subprocess.Popen)
        _out, err = run.communicate(timeout=180)
        assert run.returncode == 0, err
    found = mark_spans(marks)
    assert most_at_once(found) == 2
    ran = sorted(who for _, _, who in found)
    # Each machine ran both tasks within their minute of grace, or recorded why not.
    outcomes = [o for host in hosts for o in history(machine, host)]
    assert len(outcomes) == 2 * MACHINES
    assert set(outcomes) <= {"ok", "skipped: group full"}
    assert outcomes.count("ok") == len(ran)
    assert len(ran) > 2  # slots were passed on from machine to machine


def test_a_killed_machine_frees_its_slot_for_the_fleet(
    machine: Callable[..., object], tmp_path: Path
) -> None:
    # `hold` runs only at T, on m1, and keeps its slot of the group of one; `next`, every
    # minute, gives up after a second.
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "hold"\ncron = "0 9 3 8 *"\ngroup = "g"\nhosts = ["m1"]\n'
         'command = "echo $$ > pid; exec sleep 120"',
         'name = "next"\nevery_minute = true\ngroup = "g"\nmisfire_grace = "1s"\n'
         'hosts = ["m2"]\ncommand = "echo $CRONCTL_OCCURRENCE >> next"'],
        '[[group]]\nname = "g"\nmax_running = 1\n',
    )  # fmt: skip
    m1 = machine("m1", "run", "--now", T, background=True)
    assert isinstance(m1, subprocess.Popen)
    task_pid = None
    try:
        with reaped(m1):
            wait_for(lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text() != "",
                     "hold to start")  # fmt: skip
            task_pid = int((tmp_path / "pid").read_text())
            full = machine("m2", "run", "--now", T)
            assert full.returncode == 0, full.stderr  # type: ignore[attr-defined]
            assert history(machine, "m2") == ["skipped: group full"]
            assert not (tmp_path / "next").exists()
            # The machine dies: its cronctl and its task, at once, with no goodbye to the store.
            m1.send_signal(signal.SIGKILL)
            os.killpg(task_pid, signal.SIGKILL)
            task_pid = None
            m1.communicate(timeout=30)
        freed = machine("m2", "run", "--now", T1)
        assert freed.returncode == 0, freed.stderr  # type: ignore[attr-defined]
        assert (tmp_path / "next").read_text().split() == [T1]
    finally:
        if task_pid is not None:
            os.killpg(task_pid, signal.SIGKILL)


def test_an_unreachable_store_starts_no_task_of_a_group(
    machine: Callable[..., object], tmp_path: Path, pg_url: str
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "g1"\nevery_minute = true\ngroup = "g"\ncommand = "echo ran >> ran"'],
        '[[group]]\nname = "g"\nmax_running = 3\n',
    )
    gone = pg_url.replace("host=", "host=/nonexistent")
    result = machine("m1", "run", "--now", T, "--coordination", gone)
    assert not (tmp_path / "ran").exists()
    assert "unreachable" in result.stderr  # type: ignore[attr-defined]
    assert history(machine, "m1") == ["error"]


def test_a_start_up_run_waiting_for_its_groups_slot_is_never_taken_over(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A start-up run takes no on_one_server claim: waiting for its group's slot past the time
    # a claim's lease is renewed, it has none that another server could have taken over.
    monkeypatch.setattr(guards, "RENEW_S", 0.0)
    path = write_schedule(
        tmp_path / "s.toml",
        ['name = "warm"\non_start = true\non_one_server = true\ngroup = "g"\ncommand = "true"'],
        '[[group]]\nname = "g"\nmax_running = 1\n',
    )
    coord = PostgresCoordinator(pg_url, host="m1", pid=os.getpid())
    held = coord.try_group_slot("g", 1)  # another run holds the only slot
    assert held is not None
    freed: list[bool] = []

    def sleep(_seconds: float) -> None:  # the run waits for the slot: it comes free
        if not freed:
            held.release()
            freed.append(True)

    ctx = local_context(tmp_path, {"PATH": os.environ["PATH"]}, coord=coord, sleep=sleep)
    report = run_start_tasks(load_paths([path]), datetime.now(UTC), ctx)
    assert [(r.task, r.outcome, r.trigger) for r in report.runs] == [("warm", "ok", "start")]
