"""Descendants stay cronctl's own: orphans reaped (PID 1 of a PID namespace), and processes that
called setsid killed at the timeout and at `work`'s stop."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cronctl.edge.process import reaper, runner
from tests.helpers import Cli, alive, children, stop_worker, wait_for, write_schedule

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or shutil.which("unshare") is None or os.geteuid() != 0,
    reason="needs Linux, unshare and root (new PID namespaces)",
)

UNSHARE = ["unshare", "--pid", "--fork", "--mount-proc"]

# `python -m cronctl` whose `work` minutes pass SPEED times faster than real ones (its clock and
# its sleeps scaled), so 50 runs take seconds: the real process, threads, signals, children.
FAST_WORK = """
import sys, time
from datetime import UTC, datetime, timedelta
from cronctl.run import work
from cronctl.core.minutes import minute_floor

SPEED = 30.0
t0 = time.monotonic()
start = minute_floor(datetime.now(UTC)) + timedelta(seconds=58)

def clock():
    return start + timedelta(seconds=(time.monotonic() - t0) * SPEED)

real = work.Worker.__init__

def init(self, *args, **kwargs):
    kwargs.setdefault("clock", clock)
    real(self, *args, **kwargs)
    self._wait = lambda seconds: self._stop.wait(seconds / SPEED)

work.Worker.__init__ = init
sys.argv = ["cronctl", *sys.argv[1:]]
from cronctl.cli.main import main
main()
"""


def _stat(pid: int) -> tuple[str, int] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw.rpartition(b")")[2].split()
    return fields[0].decode(), int(fields[1])


def _namespace_init(unshare: subprocess.Popen[str]) -> int:
    """The host pid of the namespace's PID 1 (unshare --fork's child)."""
    return wait_for(lambda: children(unshare.pid), "PID 1 in the namespace")[0]


def _by_cmdline(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if token.encode() in argv:
                found.append(int(entry.name))
    return found


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.fixture
def stray() -> Iterator[list[str]]:
    """Tokens of daemons a test starts; whatever survives the test is killed after it."""
    tokens: list[str] = []
    yield tokens
    for token in tokens:
        for pid in _by_cmdline(token):
            os.kill(pid, signal.SIGKILL)


def _zombies(init: int) -> list[int]:
    return [p for p in children(init) if (_stat(p) or ("", 0))[0] == "Z"]


def test_work_as_pid_1_leaves_no_zombie_after_50_runs(cli: Cli, tmp_path: Path) -> None:
    # Each run leaves five background sleeps behind: orphans, which come to PID 1.
    tasks = [
        f'name = "t{i}"\nevery_minute = true\n'
        'command = "for i in 1 2 3 4 5; do sleep 0.05 & done; echo x >> ran"'
        for i in range(10)
    ]
    write_schedule(tmp_path / "schedules.toml", tasks)
    process = subprocess.Popen(
        [*UNSHARE, sys.executable, "-c", FAST_WORK, "work", "--grace", "5"],
        cwd=tmp_path,
        env=dict(cli.env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    init = _namespace_init(process)
    try:
        wait_for(
            lambda: _lines(tmp_path / "ran") >= 50 or process.poll() is not None, "50 runs", 90
        )
        assert process.poll() is None, process.communicate()
        # The last sleeps end and are reaped: within a few reaping intervals, or seconds on
        # a loaded machine; a zombie that outlives them all is one PID 1 never reaped.
        wait_for(lambda: not _zombies(init), "PID 1 to reap every orphan")
        assert _stat(init) is not None and _stat(init)[0] != "Z"
    finally:
        # unshare does not pass SIGTERM on: the stop goes to `work`, PID 1 of the namespace.
        os.kill(init, signal.SIGTERM)
        err = stop_worker(process)
    assert process.returncode == 0, err


DAEMON = (
    # A daemon in a session of its own (setsid -f: a fork, then setsid), which says whether
    # cronctl's SIGTERM reached it; the task itself goes on running.
    'setsid -f sh -c \'trap \\"echo term >> {dir}/daemon; exit 0\\" TERM; '
    "sleep {token} & wait'; echo started > {dir}/up; sleep 300"
)


@pytest.mark.parametrize("namespace", [False, True], ids=["subreaper", "pid-1"])
def test_a_setsid_daemon_is_killed_at_the_timeout(
    cli: Cli, tmp_path: Path, stray: list[str], namespace: bool
) -> None:
    token = f"{4000 + namespace}.{os.getpid()}"
    stray.append(token)
    command = DAEMON.format(dir=tmp_path, token=token)
    write_schedule(
        tmp_path / "schedules.toml",
        [f'name = "d"\nevery_minute = true\ntimeout = "3s"\ncommand = "{command}"'],
    )
    argv = [sys.executable, "-m", "cronctl", "run", "--now", "2026-01-01T00:00:00Z"]
    result = subprocess.run(
        [*UNSHARE, *argv] if namespace else argv,
        cwd=tmp_path,
        env=dict(cli.env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (tmp_path / "up").exists(), result.stderr
    assert "timed out" in result.stderr
    # SIGTERM from cronctl (not the SIGKILL of a namespace torn down) ended the daemon.
    assert (tmp_path / "daemon").read_text() == "term\n"
    assert _by_cmdline(token) == []


def test_a_setsid_daemon_is_killed_when_work_stops(
    cli: Cli, tmp_path: Path, stray: list[str]
) -> None:
    token = f"4100.{os.getpid()}"
    stray.append(token)
    command = DAEMON.format(dir=tmp_path, token=token)
    write_schedule(
        tmp_path / "schedules.toml", [f'name = "d"\nevery_minute = true\ncommand = "{command}"']
    )
    process = cli.popen_code(FAST_WORK, "work", "--grace", "5")
    try:
        # Its sleep starts after the trap is set.
        wait_for(lambda: _by_cmdline(token) or process.poll() is not None, "the daemon", 60)
        assert process.poll() is None, process.communicate()
    finally:
        err = stop_worker(process)
    assert process.returncode == 0, err
    assert (tmp_path / "daemon").read_text().startswith("term\n"), err
    wait_for(lambda: not _by_cmdline(token), "the daemon to end")


def test_the_reaper_never_takes_the_exit_status_of_a_started_command(tmp_path: Path) -> None:
    # Commands that exit at once, while the reaper reaps all the time: each Popen must still
    # read its own status (a stolen one reads as exit 0).
    reaper.reaper.ensure()
    done = threading.Event()

    def hammer() -> None:
        while not done.is_set():
            reaper.reaper.reap()

    thread = threading.Thread(target=hammer, daemon=True)
    thread.start()
    results = []
    for i in range(40):
        spec = runner.RunSpec(
            command="exit 3",
            shell="/bin/sh",
            workdir=tmp_path,
            env={"PATH": os.environ["PATH"]},
            timeout=None,
            log_path=tmp_path / f"{i}.log",
        )
        results.append(runner.start(spec).wait().exit_code)
    done.set()
    thread.join()
    assert results == [3] * 40


def _zombie(code: int) -> subprocess.Popen[bytes]:
    """A child started without cronctl (as a test starts `cronctl`), exited, not waited for."""
    child = subprocess.Popen(["/bin/sh", "-c", f"exit {code}"])
    wait_for(lambda: not alive(child.pid), "the child to exit")
    return child


def test_a_running_reaper_takes_a_child_it_did_not_start_so_its_popen_reads_0() -> None:
    # Why the suite stops the reaper after each test (tests/conftest.py): left running in a
    # worker, it reaped later tests' `cronctl` subprocesses, which then "exited 0".
    reaper.reaper.ensure()
    child = _zombie(3)
    reaper.reaper.reap()  # or its thread did, a moment before
    assert child.wait() == 0  # the status is gone: subprocess reads ECHILD as 0


def test_a_stopped_reaper_leaves_children_alone_and_starts_again() -> None:
    reaper.reaper.ensure()
    reaper.reaper.stop()
    assert not [t for t in threading.enumerate() if t.name == "cronctl-reaper"]
    child = _zombie(3)
    time.sleep(2 * reaper.REAP_INTERVAL_S)  # what is tested: no reaping in that time
    assert child.wait() == 3
    reaper.reaper.ensure()
    assert [t for t in threading.enumerate() if t.name == "cronctl-reaper" and t.is_alive()]
