"""Fault suite, processes, signals and locks: real `cronctl run`s, real kills.

Each test reproduces a way the promise broke; docs/faults.md lists them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.helpers import (
    FILE_STATE,
    Cli,
    _merged,
    alive,
    command_recorded,
    local_context,
    wait_for,
    write_schedule,
    written,
)

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)
STATE = '[cronctl]\nstate_dir = "state"\n'


def at(minutes: int) -> str:
    return (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def outcomes(stdout: str) -> dict[str, tuple[str, int | None]]:
    """task -> (outcome, exit_code) of the occurrences that were not missed."""
    return {
        r["task"]: (r["outcome"], r["exit_code"])
        for r in json.loads(stdout)["runs"]
        if r["outcome"] != "missed"
    }


def kill_quietly(pid: int) -> None:
    """SIGKILL a process (or, for a negative number, a process group) if it is still there."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


# A task that closes every inherited descriptor, the overlap lock's among them, then works on.
CLOSES_FDS = """\
import os, time
os.closerange(3, 65536)
with open("task.pid", "w") as out:
    out.write(str(os.getpid()))
time.sleep(60)  # runs on until the test kills it
"""


def test_a_task_that_closes_its_descriptors_still_keeps_a_second_copy_out(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "closer.py").write_text(CLOSES_FDS)
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "slow"\nevery_minute = true\nwithout_overlapping = true\n'
            f'command = ["{sys.executable}", "closer.py"]'
        ],
        header=STATE,
    )
    first = cli.popen("run", "--now", at(0), env=FILE_STATE)
    task = int(wait_for(lambda: written(tmp_path / "task.pid"), "task.pid to be written"))
    # Past the instant the lock's holder record names the command (docs/guarantees.md's limit).
    wait_for(lambda: command_recorded(tmp_path, "slow"), "the holder record to name the task")
    try:
        first.send_signal(signal.SIGKILL)  # cronctl dies; the task, lock-less, lives on
        first.communicate(timeout=10)
        (tmp_path / "task.pid").unlink()
        second = cli("run", "--now", at(1), "--json", "-v", env=FILE_STATE)
        assert outcomes(second.stdout) == {"slow": ("skipped: still running", None)}
        assert not (tmp_path / "task.pid").exists(), "a second copy started"
    finally:
        kill_quietly(task)
    wait_for(lambda: not alive(task), f"pid {task} to end")
    # Once the task is gone the lock is free again (probed without running a 60 s task).
    third = cli("run", "--now", at(2), "--json", "--dry-run", env=FILE_STATE)
    assert outcomes(third.stdout) == {"slow": ("would run", None)}


@contextlib.contextmanager
def holding(cli: Cli, tmp_path: Path, guards: str) -> Iterator[int]:
    """A `run` whose task holds the overlap lock; yields the task's pid, kills it at the end."""
    write_schedule(
        tmp_path / "schedules.toml",
        [
            f'name = "slow"\nevery_minute = true\n{guards}\n'
            'command = "echo $$ > task.pid; exec sleep 60"'
        ],
        header=STATE,
    )
    first = cli.popen("run", "--now", at(0), env=FILE_STATE)
    task = int(wait_for(lambda: written(tmp_path / "task.pid"), "task.pid to be written"))
    try:
        yield task
    finally:
        kill_quietly(task)
        first.communicate(timeout=20)


def test_still_running_names_the_holder_in_plain_words(cli: Cli, tmp_path: Path) -> None:
    with holding(cli, tmp_path, "without_overlapping = true") as task:
        second = cli("run", "--now", at(1), "-v", env=FILE_STATE)
    line = second.stdout.strip()
    assert "skipped: still running (pid " in line
    assert "held (" not in line and "))" not in line
    assert f"pid {task} on " in line and " since 2026-08-03T09:00:00Z)" in line


def test_a_holder_long_past_its_timeout_is_a_failure_that_cron_mails(
    cli: Cli, tmp_path: Path
) -> None:
    with holding(cli, tmp_path, 'without_overlapping = true\ntimeout = "1m"') as task:
        within = cli("run", "--now", at(1), "--json", env=FILE_STATE)
        overdue = cli("run", "--now", at(5), "--json", env=FILE_STATE)
    assert (within.returncode, outcomes(within.stdout)["slow"][0]) == (0, "skipped: still running")
    assert overdue.returncode == 1
    assert outcomes(overdue.stdout)["slow"][0] == "error"
    assert f"pid {task} on" in overdue.stderr and "past its 1m timeout" in overdue.stderr


def test_a_background_process_holding_the_lock_is_killed_at_the_timeout(
    cli: Cli, tmp_path: Path
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "leaky"\nevery_minute = true\nwithout_overlapping = true\ntimeout = "2s"\n'
            'command = "sleep 300 & echo $! > bg.pid"'
        ],
        header=STATE,
    )
    result = cli("run", "--now", at(0), "--json", env=FILE_STATE)
    background = int((tmp_path / "bg.pid").read_text())
    try:
        assert not alive(background), "the leftover process outlived the task's timeout"
        assert result.returncode == 1
        assert outcomes(result.stdout) == {"leaky": ("timeout", 0)}
        assert "left processes that held the lock past the timeout" in result.stderr
        nxt = cli("run", "--now", at(1), "--json", env=FILE_STATE)
        assert outcomes(nxt.stdout)["leaky"][0] == "timeout"  # it ran again: the lock was free
    finally:
        kill_quietly(background)
        for pid in (tmp_path / "bg.pid").read_text().split():
            kill_quietly(int(pid))


def test_a_task_killed_by_a_signal_says_which(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "doomed"\nevery_minute = true\ncommand = "echo dying; kill -9 $$"'],
        header=STATE,
    )
    result = cli("run", "--now", at(0), "--json", env=FILE_STATE)
    assert result.returncode == 1
    assert outcomes(result.stdout) == {"doomed": ("failed", None)}
    assert "task doomed failed (killed by SIGKILL)" in result.stderr
    assert "None" not in result.stderr
    verbose = cli("run", "--now", at(1), "-v", env=FILE_STATE)
    assert "failed" in verbose.stdout and "(killed by SIGKILL)" in verbose.stdout
    history = cli("history", "doomed", env=FILE_STATE).stdout.splitlines()
    # OUTCOME, TRIGGER, EXIT: the signal stands where an exit code would.
    assert [line.split()[3:6] for line in history[1:]] == [["failed", "schedule", "SIGKILL"]] * 2


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_to_run_is_forwarded_and_every_outcome_recorded(
    cli: Cli, tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "long"\nevery_minute = true\n'
            "command = \"trap 'echo $1 > got-signal; exit 3' TERM INT; echo $$ > task.pid; "
            'sleep 60 & wait"',
            'name = "quick"\nevery_minute = true\ncommand = "true"',
        ],
        header=STATE,
    )
    run = cli.popen("run", "--now", at(0), "--json", env=FILE_STATE)
    task = int(wait_for(lambda: written(tmp_path / "task.pid"), "the task to set its trap"))

    def quick_ended() -> bool:
        shown = cli("history", "--json", env=FILE_STATE)  # exit 2 until the state exists
        return shown.returncode == 0 and any(
            (r["task"], r["outcome"]) == ("quick", "ok") for r in json.loads(shown.stdout)["runs"]
        )

    wait_for(quick_ended, "quick's record")
    run.send_signal(sig)
    try:
        out, err = run.communicate(timeout=20)
    finally:
        kill_quietly(-task)  # the task's group, should the signal never have reached it
    assert run.returncode == code, err
    assert (tmp_path / "got-signal").exists(), "the task never got the signal"
    wait_for(lambda: not alive(task), f"pid {task} to end")
    assert outcomes(out) == {"long": ("interrupted", 3), "quick": ("ok", 0)}
    assert "task long interrupted" in err
    history = cli("history", "--json", env=FILE_STATE)
    recorded = {r["task"]: r["outcome"] for r in json.loads(history.stdout)["runs"]}
    # Both recorded for good: nothing is left "running" for the next run to call a crash.
    assert recorded == {"long": "interrupted", "quick": "ok"}


def test_escape_sequences_in_output_are_shown_not_obeyed(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "noisy"\nevery_minute = true\n'
            "command = \"printf '\\\\033]0;pwned\\\\007\\\\033[2J\\\\rtab\\\\there\\\\n'; exit 1\""
        ],
        header=STATE,
    )
    result = cli("run", "--now", at(0), env=FILE_STATE)
    assert result.returncode == 1
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "| ^[]0;pwned^G^[[2J^Mtab\there" in result.stderr
    (log,) = (tmp_path / "state" / "logs" / "noisy").iterdir()
    assert log.read_bytes() == b"\x1b]0;pwned\x07\x1b[2J\rtab\there\n"


def test_a_quiet_run_leaves_no_empty_log_file(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "quiet"\nevery_minute = true\ncommand = "true"',
            'name = "talky"\nevery_minute = true\ncommand = "echo hello"',
        ],
        header=STATE,
    )
    for minute in range(3):
        assert cli("run", "--now", at(minute), env=FILE_STATE).returncode == 0
    logs = tmp_path / "state" / "logs"
    assert not (logs / "quiet").exists() or not list((logs / "quiet").iterdir())
    assert len(list((logs / "talky").iterdir())) == 3
    said = cli("logs", "quiet", env=FILE_STATE)
    assert said.returncode == 0 and said.stdout == ""
    assert "printed nothing" in said.stderr


def test_a_task_stopped_at_work_shutdown_is_interrupted_not_failed(tmp_path: Path) -> None:
    # In process, so the test need not wait for a real minute boundary; the task is real.
    from cronctl.edge.schedfiles import load_paths
    from cronctl.edge.state.store import Store
    from cronctl.run.work import Worker

    path = write_schedule(
        tmp_path / "s.toml",
        [
            'name = "long"\nevery_minute = true\n'
            f'workdir = "{tmp_path}"\ncommand = "echo $$ > task.pid; exec sleep 60"'
        ],
    )
    ctx = local_context(tmp_path, {"PATH": os.environ["PATH"]})
    reports: list[object] = []
    worker = Worker(lambda: load_paths([path]), lambda: [path], ctx, reports.append, grace_s=10)
    worker._start(worker.watch().schedule, T0)
    task = int(wait_for(lambda: written(tmp_path / "task.pid"), "task.pid to be written"))
    try:
        worker.request_stop(signal.SIGTERM)
        assert worker._shutdown() == 0
    finally:
        kill_quietly(task)
    with Store.open(tmp_path / "state") as store:
        (run,) = store.history("long")
    assert (run.outcome, run.message) == ("interrupted", "killed by SIGTERM")


def test_a_task_that_ignores_the_forwarded_signal_is_killed_after_the_grace(
    tmp_path: Path,
) -> None:
    # In process with a short grace (the real one is 30 s); the signal and the task are real.
    import threading

    from cronctl.cli.wiring import _StopOnSignal
    from cronctl.edge.schedfiles import load_paths
    from cronctl.run.once import run_once

    path = write_schedule(
        tmp_path / "s.toml",
        [
            'name = "stubborn"\nevery_minute = true\n'
            f'workdir = "{tmp_path}"\ncommand = "trap \'\' TERM; echo $$ > task.pid; sleep 60"'
        ],
    )
    ctx = local_context(tmp_path, {"PATH": os.environ["PATH"]})
    stop = _StopOnSignal(grace_s=0.5)
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}

    def signal_me() -> None:
        wait_for(lambda: written(tmp_path / "task.pid"), "the task to set its trap")
        os.kill(os.getpid(), signal.SIGTERM)

    sender = threading.Thread(target=signal_me)
    try:
        installed = stop.install(ctx)
        sender.start()
        report = run_once(load_paths([path]), T0, installed)
    finally:
        sender.join(10)
        for number, handler in saved.items():
            signal.signal(number, handler)
        kill_quietly(-int((tmp_path / "task.pid").read_text()))
    assert stop.signum == signal.SIGTERM
    (run,) = report.runs
    assert (run.outcome, run.exit_code, run.message) == ("interrupted", None, "killed by SIGKILL")


def test_tasks_not_yet_started_when_run_is_stopped_never_start(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "first"\nevery_minute = true\ncommand = "echo $$ > task.pid; exec sleep 60"',
            'name = "second"\nevery_minute = true\ncommand = "touch second-ran"',
        ],
        header=STATE + "max_parallel = 1\n",
    )
    run = cli.popen("run", "--now", at(0), "--json", env=FILE_STATE)
    task = int(wait_for(lambda: written(tmp_path / "task.pid"), "task.pid to be written"))
    run.send_signal(signal.SIGTERM)
    try:
        out, err = run.communicate(timeout=20)
    finally:
        kill_quietly(-task)
    assert run.returncode == 143, err
    assert outcomes(out) == {"first": ("interrupted", None), "second": ("interrupted", None)}
    assert not (tmp_path / "second-ran").exists()
    assert "not started: cronctl was told to stop" in err


def test_logs_on_a_terminal_shows_escapes_and_a_pipe_gets_the_bytes(
    cli: Cli, tmp_path: Path
) -> None:
    import pty
    import subprocess

    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "noisy"\nevery_minute = true\ncommand = "printf \'\\\\033[2Jhi\\\\n\'"'],
        header=STATE,
    )
    cli("run", "--now", at(0), env=FILE_STATE)
    piped = cli("logs", "noisy", env=FILE_STATE)
    assert piped.stdout == "\x1b[2Jhi\n"
    leader, follower = pty.openpty()
    try:
        with subprocess.Popen(
            [sys.executable, "-m", "cronctl", "logs", "noisy"],
            cwd=tmp_path,
            env=_merged(cli.env, FILE_STATE),
            stdout=follower,
            stderr=subprocess.DEVNULL,
        ) as process:
            os.close(follower)
            assert process.wait(timeout=30) == 0
        shown = b""
        with contextlib.suppress(OSError):  # EIO once the terminal's other end is closed
            while chunk := os.read(leader, 4096):
                shown += chunk
    finally:
        os.close(leader)
    assert b"\x1b" not in shown
    assert b"^[[2Jhi" in shown
