"""A stop signal the kernel hands to a thread other than the main one still stops `run` and
`work` at once (cronctl/edge/awake.py).

`kill` lets the kernel pick the thread; under load it sometimes picked a worker, and the
main thread, asleep in one long wait, ran the handler only when that wait ended. These tests
pick the thread themselves with tgkill(2), so the case happens every time.
"""

from __future__ import annotations

import ctypes
import signal
from pathlib import Path

from tests.helpers import (
    FILE_STATE,
    Cli,
    command_recorded,
    history,
    reaped,
    wait_for,
    write_schedule,
    written,
)
from tests.run.test_faults_processes import STATE, at
from tests.run.test_faults_runtime import _start_work as start_work

_LIBC = ctypes.CDLL(None, use_errno=True)
SLOW = (
    'name = "slow"\nevery_minute = true\nwithout_overlapping = true\n'
    'command = "date +%s > started; sleep 300"'
)


def _signal_a_worker_thread(pid: int, sig: int) -> int:
    """Send `sig` to one thread of `pid` that is not its main thread; that thread's id."""

    def signalled() -> int:
        tids = sorted(int(t.name) for t in Path(f"/proc/{pid}/task").iterdir())
        for tid in (t for t in tids if t != pid):
            if _LIBC.tgkill(pid, tid, sig) == 0:
                return tid
        return 0  # the threads it had have ended: look again

    return wait_for(signalled, f"a thread of {pid} other than its main one")


def _outcomes(cli: Cli) -> list[str]:
    return [str(r["outcome"]) for r in history(cli, env=FILE_STATE) if r["task"] == "slow"]


def test_run_acts_on_a_sigterm_another_thread_received(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", [SLOW], header=STATE)
    with reaped(cli.popen("run", "--now", at(0), env=FILE_STATE)) as run:
        wait_for(lambda: written(tmp_path / "started"), "started to be written")
        _signal_a_worker_thread(run.pid, signal.SIGTERM)
        # Before: the main thread slept in join() until `sleep 300` ended by itself.
        _, err = run.communicate(timeout=60)
    assert run.returncode == 143, err
    assert "killed by SIGTERM" in err
    assert _outcomes(cli) == ["interrupted"]


def test_work_acts_on_a_sigterm_another_thread_received(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", [SLOW], header=STATE)
    with reaped(start_work(cli, tmp_path, "5")) as work:
        wait_for(lambda: written(tmp_path / "started"), "started to be written")
        # Past the moment `work` notes the command as running: a stop before it counts none.
        wait_for(lambda: command_recorded(tmp_path, "slow"), "the holder record to name it")
        _signal_a_worker_thread(work.pid, signal.SIGTERM)
        # Before: the main thread slept until a second before the next minute (~58 s).
        _, err = work.communicate(timeout=30)
    assert work.returncode == 0, err
    assert "stopping; signalled 1 running task(s)" in err
    assert _outcomes(cli) == ["interrupted"]
