"""`[[group]]` limits on one machine (lock_dir): real `cronctl run` processes, tasks that
write their own start and end marks, never more of a group running than its max_running."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.helpers import (
    Cli,
    mark_spans,
    most_at_once,
    reaped,
    wait_for,
    write_schedule,
    written,
)

T = "2026-08-03T09:00:00Z"
T1 = "2026-08-03T09:01:00Z"


def group_schedule(
    tmp_path: Path, count: int, *, sleep: float | str, grace: str, limit: int
) -> None:
    """``count`` every-minute tasks of group ``db``, each marking its start and end; between
    them each sleeps ``sleep`` seconds, or waits for the file ``sleep`` names to appear."""
    marks = tmp_path / "marks"
    hold = f"sleep {sleep}"
    if isinstance(sleep, str):
        hold = f"while [ ! -e {sleep} ]; do sleep 0.05; done"
    command = (
        f'echo "start $CRONCTL_TASK $(date +%s.%N)" >> {marks}; {hold}; '
        f'echo "end $CRONCTL_TASK $(date +%s.%N)" >> {marks}'
    )
    tasks = [
        f'name = "t{i}"\nevery_minute = true\ncommand = {json.dumps(command)}'
        for i in range(1, count + 1)
    ]
    header = (
        f'[[group]]\nname = "db"\nmax_running = {limit}\n\n'
        f'[defaults]\ngroup = "db"\nmisfire_grace = "{grace}"\n'
    )
    write_schedule(tmp_path / "schedules.toml", tasks, header)


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _occurrences(cli: Cli) -> set[str]:
    rows = json.loads(cli("history", "--json", "-n", "100").stdout or '{"runs": []}')["runs"]
    return {row["occurrence"] for row in rows}


def outcomes(cli: Cli) -> dict[str, list[str]]:
    """Task -> the outcomes of its runs, from history."""
    rows = json.loads(cli("history", "--json", "-n", "100").stdout)["runs"]
    found: dict[str, list[str]] = {}
    for row in rows:
        found.setdefault(row["task"], []).append(row["outcome"])
    return found


def test_five_tasks_of_a_group_of_two_run_two_at_a_time_within_their_grace(
    cli: Cli, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    group_schedule(tmp_path, 5, sleep=str(gate), grace="1m", limit=2)
    with reaped(cli.popen("run", "--now", T)) as run:
        # The first two hold their slots until both have started: they overlap for certain.
        wait_for(lambda: _lines(tmp_path / "marks") >= 2, "two tasks to start")
        gate.touch()
        _, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    found = mark_spans(tmp_path / "marks")
    assert sorted(task for _, _, task in found) == ["t1", "t2", "t3", "t4", "t5"]
    assert most_at_once(found) == 2
    assert all(o == ["ok"] for o in outcomes(cli).values())


def test_a_task_still_waiting_when_its_grace_ends_is_skipped_group_full(
    cli: Cli, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    group_schedule(tmp_path, 5, sleep=str(gate), grace="1s", limit=2)
    run = cli.popen("run", "--now", T)
    try:
        # The two tasks that took the slots hold them until the three others gave up their
        # wait. Before, a `sleep 3` held them: a waiter starved that long took a freed slot.
        wait_for(lambda: _lines(tmp_path / "marks") >= 2, "two tasks to start")
        wait_for(
            lambda: sum(o == ["skipped: group full"] for o in outcomes(cli).values()) == 3,
            "three tasks to give up",
        )
    finally:
        gate.touch()
    _, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    found = mark_spans(tmp_path / "marks")
    assert len(found) == 2 and most_at_once(found) == 2
    ran = {task for _, _, task in found}
    got = outcomes(cli)
    for task, seen in got.items():
        assert seen == (["ok"] if task in ran else ["skipped: group full"]), got
    skipped = next(task for task in got if task not in ran)
    explained = json.loads(cli("explain", skipped, "--at", T, "--format", "json").stdout)
    assert explained["verdict"] == "group-full"
    assert "group full" in explained["reasons"][1] and "max_running 2" in explained["reasons"][1]
    status = cli("status").stdout
    assert "skipped: group full" in status


@pytest.mark.long
def test_two_runs_at_once_share_the_group_limit_of_the_machine(cli: Cli, tmp_path: Path) -> None:
    # Two minutes' runs overlap (the first still waits for slots when the next starts): the
    # limit is the machine's, not each run's.
    gate = tmp_path / "gate"
    group_schedule(tmp_path, 4, sleep=str(gate), grace="1m", limit=2)
    with reaped(cli.popen("run", "--now", T)) as first:
        wait_for(lambda: _lines(tmp_path / "marks") >= 2, "the first run to hold both slots")
        with reaped(cli.popen("run", "--now", T1)) as second:
            wait_for(lambda: T1 in _occurrences(cli), "the second run to plan T1")
            gate.touch()
            for process in (first, second):
                _out, err = process.communicate(timeout=120)
                assert process.returncode == 0, err
    found = mark_spans(tmp_path / "marks")
    assert len(found) == 8
    assert most_at_once(found) == 2


def test_a_killed_cronctl_frees_its_slot(cli: Cli, tmp_path: Path) -> None:
    # `hold` runs only at T (09:00) and keeps the group's one slot; `next` comes at T1 (not
    # at T: two tasks due together race for the slot), and waits one second for it.
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "hold"\ncron = "0 9 3 8 *"\ngroup = "one"\n'
         'command = "echo $$ > pid; exec sleep 60"',
         'name = "next"\ncron = "1-59 * * * *"\ngroup = "one"\nmisfire_grace = "1s"\n'
         'command = "echo ran >> next"'],
        '[[group]]\nname = "one"\nmax_running = 1\n',
    )  # fmt: skip
    task_pid = None
    try:
        with reaped(cli.popen("run", "--now", T)) as first:
            wait_for(lambda: written(tmp_path / "pid"), "the task to start")
            task_pid = int((tmp_path / "pid").read_text())
            first.send_signal(signal.SIGKILL)  # its task runs on, orphaned, holding nothing
            first.communicate(timeout=30)
        result = cli("run", "--now", T1)
        assert "cronctl died before" in result.stderr  # the killed run's rows, reported
        assert (tmp_path / "next").read_text() == "ran\n"
    finally:
        if task_pid is not None:
            os.killpg(task_pid, signal.SIGKILL)


def test_exec_of_a_task_of_a_full_group_refuses_or_waits(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "hold"\ncron = "0 9 3 8 *"\ngroup = "one"\n'
         'command = "touch started; while [ ! -e release ]; do sleep 0.05; done"',
         'name = "other"\ncron = "0 0 1 1 *"\ngroup = "one"\ncommand = "echo ran >> other"'],
        '[[group]]\nname = "one"\nmax_running = 1\n',
    )  # fmt: skip
    first = cli.popen("run", "--now", T)
    try:
        wait_for((tmp_path / "started").exists, "the task to start")
        refused = cli("exec", "other")
        assert refused.returncode == 2
        assert "group one is full" in refused.stderr and "--wait" in refused.stderr
        assert not (tmp_path / "other").exists()
        waiting = cli.popen("exec", "other", "--wait")
        assert waiting.stderr is not None
        said = waiting.stderr.readline()  # said once it found the group full
        assert "group one is full" in said and "waiting for a slot" in said, said
        assert not (tmp_path / "other").exists()
        (tmp_path / "release").touch()
        _out, err = waiting.communicate(timeout=60)
        assert waiting.returncode == 0, err
        assert (tmp_path / "other").read_text() == "ran\n"
    finally:
        (tmp_path / "release").touch()
        first.communicate(timeout=60)


def test_a_planted_link_for_a_slot_is_refused_and_nothing_runs(cli: Cli, tmp_path: Path) -> None:
    group_schedule(tmp_path, 1, sleep=0, grace="1s", limit=1)
    assert cli("run", "--now", T).returncode == 0
    slot = tmp_path / "home" / "state" / "cronctl" / "locks" / "groups" / "db.0.slot"
    assert slot.exists()
    slot.unlink()
    target = tmp_path / "target"
    target.write_text("keep\n")
    slot.symlink_to(target)
    result = cli("run", "--now", T1)
    assert result.returncode == 1
    assert "db.0.slot is a symbolic link" in result.stderr
    assert target.read_text() == "keep\n"
    assert outcomes(cli)["t1"] == ["error", "ok"]
    assert len(mark_spans(tmp_path / "marks")) == 1
