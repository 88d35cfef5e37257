"""Start one command in its own process group, capture its output, enforce its timeout.

SPEC 4.4: a string command runs as ``SHELL -c COMMAND``, an array is executed directly; stdin
is ``/dev/null``; stdout and stderr go together into a per-run log file (0600); a timeout
sends SIGTERM to the whole process group and SIGKILL ``kill_grace`` seconds later, so a
shell's grandchildren die with it. A command that cannot start is a result, never an
exception: the run is recorded as ``error`` with the reason in its log.

The group is the unit throughout because a task is rarely one process: ``sh -c "a | b"``
alone is three. Children are started with ``start_new_session=True`` rather than a
``preexec_fn``, which would run Python's at-fork hooks (filelock's among them) in the child.
"""

from __future__ import annotations

import os
import signal as signals
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from cronctl.edge.paths import open_nofollow

__all__ = [
    "CommandResult",
    "Outcome",
    "RunSpec",
    "RunningCommand",
    "run_condition",
    "start",
    "sweep_logs",
]

Outcome = Literal["ok", "failed", "timeout", "error"]

_TAIL_BYTES = 4096
_TAIL_LINES = 20
_POLL_S = 0.05
_UTF8_CONTINUATION = bytes(range(0x80, 0xC0))


@dataclass(frozen=True, slots=True)
class RunSpec:
    """Everything needed to run one command; ``env`` is complete (the runner merges nothing)."""

    command: str | tuple[str, ...]
    shell: str
    workdir: Path
    env: Mapping[str, str]
    timeout: timedelta | None
    log_path: Path
    pass_fds: tuple[int, ...] = ()
    kill_grace: float = 10.0
    # Each output line, as it comes, besides the log (`cronctl exec`, `work --output`).
    stream: Callable[[str], None] | None = None

    def argv(self) -> list[str]:
        """The argument vector: ``[shell, "-c", command]`` for a string, the array otherwise."""
        if isinstance(self.command, str):
            return [self.shell, "-c", self.command]
        return list(self.command)


@dataclass(frozen=True, slots=True)
class CommandResult:
    """How a command ended.

    ``exit_code`` is None when the command did not start or was killed by a signal, and
    ``signal`` then names the signal. ``tail`` is the end of the output (at most 20 lines
    and 4 KiB), or the reason it could not start. ``message`` is that reason, else None.
    """

    outcome: Outcome
    exit_code: int | None
    signal: int | None
    started: datetime
    ended: datetime
    duration_s: float
    tail: str
    message: str | None = None


class RunningCommand:
    """A started command (or one that failed to start); :meth:`wait` supervises it to the end."""

    def __init__(
        self,
        spec: RunSpec,
        process: subprocess.Popen[bytes] | None,
        started: datetime,
        t0: float,
        failure: str | None = None,
    ) -> None:
        """Wrap ``process``, started at ``started`` (monotonic ``t0``); see :func:`start`."""
        self.spec = spec
        self._process = process
        self._started = started
        self._t0 = t0
        self._failure = failure
        self._result: CommandResult | None = None
        self._wait_lock = threading.Lock()
        self.tee: threading.Thread | None = None  # copies a streamed command's output

    @property
    def pid(self) -> int | None:
        """The command's pid, which is also its process group id; None if it did not start."""
        return self._process.pid if self._process is not None else None

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the command's whole process group (``cronctl work`` forwards SIGTERM).

        Does nothing once the command has been reaped, so a recycled pid is never signalled.
        """
        if self._process is not None and self._process.returncode is None:
            _killpg(self._process.pid, sig)

    def wait(self) -> CommandResult:
        """Wait for the command, killing its group on timeout; safe to call more than once."""
        with self._wait_lock:
            if self._result is None:
                self._result = self._supervise()
            return self._result

    def _supervise(self) -> CommandResult:
        process = self._process
        if process is None:
            message = self._failure or "cannot start"
            return self._finish("error", None, None, _read_tail(self.spec.log_path) or message)
        timed_out = False
        try:
            timeout = self.spec.timeout
            remaining = None if timeout is None else timeout.total_seconds() - self._elapsed()
            process.wait(timeout=None if remaining is None else max(remaining, 0.0))
        except subprocess.TimeoutExpired:
            timed_out = True
            self._terminate_group(process)
        returncode = process.returncode
        exit_code = returncode if returncode >= 0 else None
        signal = -returncode if returncode < 0 else None
        outcome: Outcome = "timeout" if timed_out else ("ok" if returncode == 0 else "failed")
        if self.tee is not None:
            # A grandchild left in the background may keep the pipe open: do not wait for it.
            self.tee.join(_TEE_JOIN_S)
        return self._finish(outcome, exit_code, signal, _read_tail(self.spec.log_path))

    def _terminate_group(self, process: subprocess.Popen[bytes]) -> None:
        pgid = process.pid
        _killpg(pgid, signals.SIGTERM)
        deadline = time.monotonic() + self.spec.kill_grace
        while time.monotonic() < deadline:
            # The leader may exit at once while a grandchild ignores SIGTERM: wait for both.
            if process.poll() is not None and not _group_alive(pgid):
                return
            time.sleep(_POLL_S)
        _killpg(pgid, signals.SIGKILL)
        process.wait()
        # Members can outlive the leader; the reaped leader's pid stays reserved as a group id
        # while any member exists, so this cannot hit an unrelated process.
        _killpg(pgid, signals.SIGKILL)
        _wait_group_gone(pgid)

    def _elapsed(self) -> float:
        return time.monotonic() - self._t0

    def _finish(
        self, outcome: Outcome, exit_code: int | None, signal: int | None, tail: str
    ) -> CommandResult:
        elapsed = self._elapsed()
        return CommandResult(
            outcome=outcome,
            exit_code=exit_code,
            signal=signal,
            started=self._started,
            ended=self._started + timedelta(seconds=elapsed),
            duration_s=round(elapsed, 3),
            tail=tail,
            message=self._failure,
        )


def start(spec: RunSpec) -> RunningCommand:
    """Start ``spec``'s command in a new session and process group, output to its log file.

    The log file is created (or truncated) with mode 0600 and ``O_NOFOLLOW``; its directory
    must exist. ``spec.pass_fds`` stay open in the child, which is how an overlap lock
    outlives cronctl. Never raises for a command that cannot start: the returned command's
    :meth:`~RunningCommand.wait` reports ``error`` and the log says why.
    """
    started, t0 = datetime.now(UTC), time.monotonic()
    try:
        log_fd = _open_log(spec.log_path)
    except OSError as exc:
        failure = f"cannot open log file {spec.log_path}: {exc}"
        return RunningCommand(spec, None, started, t0, failure)
    pipe = _stream_pipe(spec, log_fd)
    try:
        argv = spec.argv()
        try:
            if not argv:
                raise ValueError("the command is empty")
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log_fd if pipe is None else pipe[1],
                stderr=subprocess.STDOUT,
                cwd=spec.workdir,
                env=dict(spec.env),
                start_new_session=True,
                pass_fds=spec.pass_fds,
            )
        except (OSError, ValueError) as exc:
            failure = _start_failure(exc, spec, argv)
            os.write(log_fd, f"cronctl: {failure}\n".encode(errors="replace"))
            if pipe is not None:
                os.close(pipe[0])
                os.close(pipe[2])
            return RunningCommand(spec, None, started, t0, failure)
    finally:
        # The child has its own copy; keeping ours would only hold the file open.
        os.close(log_fd)
        if pipe is not None:
            os.close(pipe[1])
    running = RunningCommand(spec, process, started, t0)
    if pipe is not None:
        running.tee = _start_tee(pipe[0], pipe[2], spec)
    return running


_TEE_JOIN_S = 2.0


def _stream_pipe(spec: RunSpec, log_fd: int) -> tuple[int, int, int] | None:
    """(read end, write end, a copy of the log descriptor) for a streamed command, else None."""
    if spec.stream is None:
        return None
    read_end, write_end = os.pipe()  # both close-on-exec: no other task inherits them
    return read_end, write_end, os.dup(log_fd)


def _start_tee(read_fd: int, log_fd: int, spec: RunSpec) -> threading.Thread:
    from cronctl.edge.stream import tee

    assert spec.stream is not None
    thread = threading.Thread(
        target=tee, args=(read_fd, log_fd, spec.stream), name="cronctl-tee", daemon=True
    )
    thread.start()
    return thread


def _open_log(path: Path) -> int:
    # Refuses a planted symlink or FIFO (UnsafeDirectoryError is a PermissionError).
    fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
    try:
        # O_CREAT's mode only applies to a new file; a log left by an older run keeps its own.
        os.fchmod(fd, 0o600)
    except OSError:
        os.close(fd)
        raise
    return fd


def _start_failure(exc: OSError | ValueError, spec: RunSpec, argv: list[str]) -> str:
    if not isinstance(exc, OSError):
        return f"cannot start: {exc}"
    if exc.filename is not None and os.fspath(exc.filename) == os.fspath(spec.workdir):
        return f"cannot start: working directory {spec.workdir}: {exc.strerror}"
    what = "shell" if isinstance(spec.command, str) else "command"
    program = argv[0] if argv else "(empty command)"
    return f"cannot start: {what} {program}: {exc.strerror or exc}"


def _read_tail(path: Path) -> str:
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except OSError:
        return ""
    try:
        offset = max(0, os.fstat(fd).st_size - _TAIL_BYTES)
        data = os.pread(fd, _TAIL_BYTES, offset)
    except OSError:
        return ""
    finally:
        os.close(fd)
    if offset > 0:
        # Cut mid-line, maybe mid-character: drop the broken character but keep the rest of the
        # line (the end of a long error line is worth reading), and mark the cut.
        data = b"\xe2\x80\xa6" + data.lstrip(_UTF8_CONTINUATION)
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-_TAIL_LINES:])


def _killpg(pgid: int, sig: int) -> None:
    # A group that is already gone is what we wanted.
    with suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a member changed uid (setuid program): it exists
    return _has_live_member(pgid)


def _wait_group_gone(pgid: int, timeout_s: float = 2.0) -> None:
    # SIGKILL is delivered when each member is next scheduled; waiting a moment means the
    # caller's "timeout" really means "nothing left", which the next run's lock relies on.
    deadline = time.monotonic() + timeout_s
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.01)


def _has_live_member(pgid: int) -> bool:
    # kill(0) also succeeds for zombies, and in a container whose pid 1 does not reap, orphaned
    # grandchildren stay zombies forever; /proc tells the living from the dead.
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return True
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_bytes()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = raw.rpartition(b")")[2].split()
        if len(fields) > 2 and fields[0] != b"Z" and int(fields[2]) == pgid:
            return True
    return False


def run_condition(
    command: str,
    *,
    shell: str,
    workdir: Path,
    env: Mapping[str, str],
    timeout_s: float = 60,
) -> bool:
    """Run a ``when``/``skip`` condition: True when it exits 0.

    Output is discarded. A condition still running after ``timeout_s`` has its whole group
    killed (SIGKILL at once: a condition is a quick check, not a job with state to save) and
    counts as False, as does a condition that cannot start (missing shell or workdir).
    """
    try:
        process = subprocess.Popen(
            [shell, "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=workdir,
            env=dict(env),
            start_new_session=True,
        )
    except (OSError, ValueError):
        return False
    try:
        return process.wait(timeout=timeout_s) == 0
    except subprocess.TimeoutExpired:
        return False
    finally:
        if process.returncode is None:
            _killpg(process.pid, signals.SIGKILL)
            process.wait()
            _wait_group_gone(process.pid)


def sweep_logs(log_dir: Path, *, now: datetime, max_age: timedelta = timedelta(days=14)) -> int:
    """Delete ``*.log`` files under ``log_dir`` last written more than ``max_age`` ago.

    ``now`` must be aware. Returns how many were deleted. Only regular files named ``*.log``
    are touched (never a symlink, never a directory, which a concurrent run may be about to
    write into), and a file that vanishes or resists deletion is skipped: housekeeping never
    fails a run.
    """
    cutoff = now.timestamp() - max_age.total_seconds()
    removed = 0
    for root, _dirs, files in os.walk(log_dir):
        for name in files:
            if not name.endswith(".log"):
                continue
            path = Path(root, name)
            try:
                st = path.lstat()
                if st.st_mtime < cutoff and stat.S_ISREG(st.st_mode):
                    path.unlink()
                    removed += 1
            except OSError:
                continue
    return removed
