"""Start one command in its own process group, capture its output, enforce its timeout.

Output goes to a per-run 0600 log, written by the command or, when capped, masked or
streamed, copied there through a pipe. A timeout sends SIGTERM to the whole group, SIGKILL
``kill_grace`` later. A command that cannot start is an ``error`` result, never an exception.

The group is the unit because a task is rarely one process (``sh -c "a | b"`` is three);
processes that leave it (``setsid``) are found by ``CRONCTL_RUN_ID`` (reaper.py). Children
start with ``start_new_session=True``, not a ``preexec_fn``, which would run Python in the
forked child of a threaded process; only a capped task gets one (limits.py: a few syscalls).
"""

from __future__ import annotations

import math
import os
import select
import signal as signals
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from cronctl.core.envfile import Masker
from cronctl.core.model import KILL_GRACE_S
from cronctl.core.runs import Ended
from cronctl.edge.process import procs, reaper
from cronctl.edge.process.stream import CappedLog, CommandOutput, Tee
from cronctl.edge.safefiles import open_nofollow

if TYPE_CHECKING:
    from cronctl.edge.process.limits import Prepared

_TAIL_BYTES = 4096
_TAIL_LINES = 20
_POLL_S = 0.05
_LINGER_POLL_S = 0.5
_TEE_JOIN_S = 2.0
# The longest single poll() of _wait_for (its milliseconds must fit a C int: 24.8 days).
_MAX_POLL_S = 3600.0
_UTF8_CONTINUATION = bytes(range(0x80, 0xC0))


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class RunSpec:
    """Everything needed to run one command; ``env`` is complete (the runner merges nothing)."""

    command: str | tuple[str, ...]
    shell: str
    workdir: Path
    env: Mapping[str, str]
    timeout: timedelta | None
    log_path: Path | str
    pass_fds: tuple[int, ...] = ()
    kill_grace: float = KILL_GRACE_S
    # Each output line, as it comes, besides the log (`cronctl exec`, `work --output`).
    stream: Callable[[str], None] | None = None
    # Values replaced by *** in the captured output (the task's secrets), and the bytes its
    # log keeps (0: no cap). Either sends the output through cronctl (a pipe) to the log.
    mask: tuple[str, ...] = ()
    max_output: int = 0
    # Resource caps (limits.py): bytes, percent of one CPU, niceness, I/O priority; 0: none.
    memory_max: int = 0
    cpu_max: int = 0
    nice: int = 0
    ionice: int = 0

    @property
    def capped(self) -> bool:
        return bool(self.memory_max or self.cpu_max or self.nice or self.ionice)

    @property
    def piped(self) -> bool:
        return self.stream is not None or bool(self.mask) or self.max_output > 0

    def argv(self) -> list[str]:
        if isinstance(self.command, str):
            return [self.shell, "-c", self.command]
        return list(self.command)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class CommandResult:
    """How a command ended: ``tail`` is the output's end (20 lines, 4 KiB) or why it could
    not start; ``message`` that reason, or why a timeout struck after it exited; ``log_kept``
    False when it printed nothing and its empty log was removed."""

    outcome: Ended
    exit_code: int | None
    signal: int | None
    started: datetime
    ended: datetime
    duration_s: float
    tail: str
    message: str | None = None
    log_kept: bool = True


def signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass(eq=False, repr=False)
class RunningCommand:
    """A started command (or one that failed to start); :meth:`wait` supervises it to the end."""

    spec: RunSpec
    _process: subprocess.Popen[bytes] | None
    _started: datetime
    _t0: float
    _failure: str | None = None
    _log_fd: int | None = None  # cronctl's own read-write descriptor, closed by wait()
    _caps: Prepared | None = None
    # The output's copy into the log (None: the command writes there): on the thread that
    # waits, then, if a process left behind still holds the pipe, in one of its own.
    _tee: Tee | None = None
    _result: CommandResult | None = field(default=None, init=False)
    _wait_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _interrupted: bool = field(default=False, init=False)

    @property
    def pid(self) -> int | None:
        """Also its process group id; None if it did not start."""
        return self._process.pid if self._process is not None else None

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the whole group: cronctl was told to stop, the run is interrupted."""
        process = self._process
        if process is None or self._result is not None:
            return
        self._interrupted = True
        self._kill(process, sig)

    def _marker(self) -> str | None:
        run_id = self.spec.env.get("CRONCTL_RUN_ID")
        return f"CRONCTL_RUN_ID={run_id}" if run_id else None

    def _escaped(self, process: subprocess.Popen[bytes]) -> list[int]:
        leader = process.pid if process.returncode is None else None
        pgid = process.pid
        return [p for p in reaper.members(leader, self._marker()) if _pgid(p) != pgid]

    def _kill(self, process: subprocess.Popen[bytes], sig: int) -> None:
        """To the group (while it has members: a number never recycled) and those that left."""
        if process.returncode is None or procs.group_alive(process.pid):
            _killpg(process.pid, sig)
        found = {pid: procs.identify(pid) for pid in self._escaped(process)}
        if found:
            # Signalled only if still the process found (same start time), once pinned.
            reaper.signal_pids(list(found), sig, lambda pid: procs.identify(pid) == found[pid])

    def _members_alive(self, process: subprocess.Popen[bytes]) -> bool:
        return procs.group_alive(process.pid) or any(
            procs.identify(pid) is not None for pid in self._escaped(process)
        )

    def wait(self) -> CommandResult:
        """Wait for the command, killing its group on timeout; idempotent."""
        with self._wait_lock:
            if self._result is None:
                self._result = self._supervise()
            return self._result

    def _supervise(self) -> CommandResult:
        process = self._process
        if process is None:
            tail = _tail_of(self._log_fd) if self._log_fd is not None else ""
            return self._finish("error", None, None, tail or self._failure or "cannot start")
        timed_out = False
        try:
            _wait_for(process, self._remaining(), self._tee)
        except subprocess.TimeoutExpired:
            timed_out = True
            self._terminate_group(process)
        note = None
        if self._tee is not None and self.spec.pass_fds:
            # The output's end, which comes with the exit unless processes it left hold the
            # pipe: what they print while they are waited for below, in a thread of its own.
            self._tee.finish(_POLL_S)
        if not timed_out and self._lingering(process):
            # The shell is gone but processes it left in its group still hold the overlap
            # lock: the timeout applies to them too, or every later run is skipped forever.
            timed_out = True
            note = "its command exited but left processes that held the lock past the timeout"
            self._terminate_group(process)
        returncode = process.returncode
        reaper.release(process.pid)  # waited for: the reaper may take the number from now on
        exit_code = returncode if returncode >= 0 else None
        signal = -returncode if returncode < 0 else None
        if self._caps is not None:
            note = note or self._caps.explain(exit_code, signal)
            self._caps.close()
        outcome: Ended = "timeout" if timed_out else ("ok" if returncode == 0 else "failed")
        if self._interrupted and outcome != "timeout":
            outcome = "interrupted"
        copying = False
        if self._tee is not None:
            # A grandchild left in the background may keep the pipe open: do not wait for it.
            copying = not self._tee.finish(_TEE_JOIN_S)
        # start() hands every started command the log's descriptor: read through it. Whether
        # the log stays is asked first: its one fstat then also says where the tail starts.
        kept, size = True, None
        if self._log_fd is not None and not copying:
            kept, size = _keep_log(self.spec.log_path, process.pid, self._log_fd)
        tail = _tail_of(self._log_fd, size) if self._log_fd is not None and kept else ""
        return self._finish(outcome, exit_code, signal, tail, note, kept)

    def _remaining(self) -> float | None:
        timeout = self.spec.timeout
        if timeout is None:
            return None
        return max(timeout.total_seconds() - (time.monotonic() - self._t0), 0.0)

    def _lingering(self, process: subprocess.Popen[bytes]) -> bool:
        """Whether members left by the exited leader still live at the timeout. Only for a
        command handed a lock: elsewhere a process left on purpose is the task's business."""
        remaining = self._remaining()
        if remaining is None or not self.spec.pass_fds:
            return False
        return not _wait_until(lambda: not self._members_alive(process), remaining, _LINGER_POLL_S)

    def _terminate_group(self, process: subprocess.Popen[bytes]) -> None:
        pgid = process.pid
        self._kill(process, signals.SIGTERM)

        # The leader may exit at once while a grandchild ignores SIGTERM: wait for both.
        def gone() -> bool:
            return process.poll() is not None and not self._members_alive(process)

        if _wait_until(gone, self.spec.kill_grace, _POLL_S):
            return
        self._kill(process, signals.SIGKILL)
        process.wait()
        # Members can outlive the leader; the reaped leader's pid stays reserved as a group id
        # while any member exists, so this cannot hit an unrelated process.
        self._kill(process, signals.SIGKILL)
        _wait_group_gone(pgid)
        _wait_until(lambda: not self._escaped(process))

    def _finish(
        self,
        outcome: Ended,
        exit_code: int | None,
        signal: int | None,
        tail: str,
        note: str | None = None,
        kept: bool = True,
    ) -> CommandResult:
        elapsed = time.monotonic() - self._t0
        if self._log_fd is not None:
            os.close(self._log_fd)
            self._log_fd = None
        return CommandResult(
            outcome=outcome,
            exit_code=exit_code,
            signal=signal,
            started=self._started,
            ended=self._started + timedelta(seconds=elapsed),
            duration_s=round(elapsed, 3),
            tail=tail,
            message=self._failure or note,
            log_kept=kept,
        )


def start(spec: RunSpec) -> RunningCommand:
    """Start ``spec``'s command in a new session, output to its log (its directory must
    exist). ``pass_fds`` stay open in the child: an overlap lock outlives cronctl. Never
    raises for a command that cannot start: wait() reports ``error``, the log says why."""
    started, t0 = datetime.now(UTC), time.monotonic()
    try:
        log_fd = _open_log(spec.log_path, append=not spec.piped)
    except OSError as exc:
        return RunningCommand(
            spec, None, started, t0, f"cannot open log file {spec.log_path}: {exc}"
        )
    try:
        # Both ends close-on-exec: no other task inherits them.
        pipe = (*os.pipe(), os.dup(log_fd)) if spec.piped else None
    except OSError as exc:
        return RunningCommand(spec, None, started, t0, f"cannot capture the output: {exc}", log_fd)
    reaper.reaper.ensure()
    caps = _prepare_caps(spec) if spec.capped else None
    try:
        argv = spec.argv()
        try:
            if not argv:
                raise ValueError("the command is empty")
            with reaper.spawning() as owned:
                process = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log_fd if pipe is None else pipe[1],
                    stderr=subprocess.STDOUT,
                    cwd=spec.workdir,
                    env=spec.env,
                    start_new_session=True,
                    pass_fds=spec.pass_fds,
                    preexec_fn=caps.preexec if caps is not None else None,
                )
                owned(process.pid)
        except (OSError, ValueError) as exc:
            if caps is not None:
                caps.close()
            failure = _start_failure(exc, spec, argv)
            os.write(log_fd, f"cronctl: {failure}\n".encode(errors="replace"))
            if pipe is not None:
                os.close(pipe[0])
                os.close(pipe[2])
            return RunningCommand(spec, None, started, t0, failure, log_fd)
    finally:
        if pipe is not None:
            os.close(pipe[1])
    # Ours stays open (close-on-exec: no other task inherits it) for the tail and the
    # "printed nothing" check, one open per run instead of three.
    tee = None
    if pipe is not None:
        masker = Masker(list(spec.mask)) if spec.mask else None
        tee = Tee(pipe[0], CommandOutput(CappedLog(pipe[2], spec.max_output), masker, spec.stream))
        if spec.stream is not None:
            # Lines to a terminal, which may stall: never on the thread that keeps the timeout.
            tee.hand_off()
    return RunningCommand(spec, process, started, t0, None, log_fd, caps, tee)


def _prepare_caps(spec: RunSpec) -> Prepared:
    # Imported here, not at the top: a run without caps loads neither it nor `resource`.
    from cronctl.edge.process import limits

    caps = limits.Caps(spec.memory_max, spec.cpu_max, spec.nice, spec.timeout, spec.ionice)
    run_id = spec.env.get("CRONCTL_RUN_ID") or f"{os.getpid()}.{time.monotonic_ns()}"
    name = f"{run_id}-{spec.env.get('CRONCTL_ATTEMPT', '1')}"
    return limits.prepare(caps, name)


def _open_log(path: Path | str, *, append: bool) -> int:
    # Read and write: cronctl reads the tail through the same descriptor. Refuses a planted
    # symlink or FIFO (UnsafeDirectoryError is a PermissionError). O_APPEND (``append``) for
    # a command that writes to the log itself; output that cronctl copies is written at the
    # offsets the copy chooses (CappedLog), which O_APPEND would override.
    flags = os.O_RDWR | os.O_CREAT | (os.O_APPEND if append else 0)
    try:
        # A run id is new, so is its log: created here with mode 0600 (or less, by the umask).
        return open_nofollow(path, flags | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    fd = open_nofollow(path, flags | os.O_TRUNC, 0o600)
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


def _tail_of(fd: int, size: int | None = None) -> str:
    try:
        if size is None:
            size = os.fstat(fd).st_size
        if size == 0:
            return ""
        offset = max(0, size - _TAIL_BYTES)
        data = os.pread(fd, _TAIL_BYTES, offset)
    except OSError:
        return ""
    if offset > 0:
        # Cut mid-line, maybe mid-character: drop the broken character but keep the rest of the
        # line (the end of a long error line is worth reading), and mark the cut.
        data = b"\xe2\x80\xa6" + data.lstrip(_UTF8_CONTINUATION)
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
    # Lines end at "\n" only: a lone "\r" (which redraws a terminal line) stays for render to
    # show, rather than hiding what it would have overwritten.
    return "\n".join(text.rstrip("\n").split("\n")[-_TAIL_LINES:])


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _killpg(pgid: int, sig: int) -> None:
    # A group that is already gone is what we wanted.
    with suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _wait_group_gone(pgid: int) -> None:
    # SIGKILL is delivered when each member is next scheduled; waiting a moment means the
    # caller's "timeout" really means "nothing left", which the next run's lock relies on.
    _wait_until(lambda: not procs.group_alive(pgid))


def _wait_until(done: Callable[[], bool], timeout_s: float = 2.0, poll_s: float = 0.01) -> bool:
    """Poll ``done`` until it holds (True) or ``timeout_s`` has passed (False)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(poll_s, max(deadline - time.monotonic(), 0.0)))
    return True


def _keep_log(path: Path | str, pgid: int, fd: int) -> tuple[bool, int | None]:
    """Remove the log of a run that printed nothing (1,440 empty files a day otherwise);
    whether it stays, and its size when known. Kept while the group lives: a process left
    behind may still write to it."""
    # The group first, then the size: once no member is left, nothing can write any more
    # (the other way round, a member could write and exit in between, unseen).
    if procs.group_alive(pgid):
        return True, None
    try:
        size = os.fstat(fd).st_size
    except OSError:
        return True, None  # cannot tell: keep the path, so nobody is told "it printed nothing"
    if size:
        return True, size
    try:
        os.unlink(path)  # noqa: PTH108 (text or Path)
    except OSError:
        return True, 0
    return False, 0


def run_condition(
    command: str, *, shell: str, workdir: Path, env: Mapping[str, str], timeout_s: float = 60
) -> bool:
    """Run a ``when``/``skip`` condition: True when it exits 0. One still running after
    ``timeout_s`` is SIGKILLed at once (a quick check has no state to save) and is False."""
    reaper.reaper.ensure()
    try:
        with reaper.spawning() as owned:
            process = subprocess.Popen(
                [shell, "-c", command],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=workdir,
                env=dict(env),
                start_new_session=True,
            )
            owned(process.pid)
    except (OSError, ValueError):
        return False
    try:
        return _wait_for(process, timeout_s) == 0
    except subprocess.TimeoutExpired:
        return False
    finally:
        if process.returncode is None:
            _killpg(process.pid, signals.SIGKILL)
            process.wait()
            _wait_group_gone(process.pid)
        reaper.release(process.pid)


def _wait_for(
    process: subprocess.Popen[bytes], timeout: float | None, tee: Tee | None = None
) -> int:
    """``process.wait(timeout)``, woken by the exit itself through a pidfd: Popen's timed
    wait polls with sleeps up to 50 ms, late beside a short command and waking all along.
    The child is reaped only by its Popen, so the pidfd's pid is still its own. Meanwhile
    ``tee``, if it is left to this thread, copies the output as it comes (at a timeout it is
    handed off: the group is killed while it copies)."""
    if tee is not None and not tee.left_to_caller:
        tee = None
    if timeout is None and tee is None:
        return process.wait()
    try:
        fd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # no pidfd here, or the process was reaped already
        if tee is not None:
            tee.hand_off()
        return process.wait(timeout=timeout)
    limit = math.inf if timeout is None else timeout
    deadline = time.monotonic() + limit
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if tee is not None:
            poller.register(tee.fd, select.POLLIN)
        while True:
            left = min(max(deadline - time.monotonic(), 0.0), _MAX_POLL_S)
            ready = [got for got, _ in poller.poll(left * 1000)]
            if tee is not None and tee.fd in ready and not tee.pump():
                poller.unregister(tee.fd)
                tee = None
            if fd in ready:
                break
            if time.monotonic() >= deadline:
                if tee is not None:
                    tee.hand_off()
                raise subprocess.TimeoutExpired(process.args, limit)
    finally:
        os.close(fd)
    return process.wait()


def sweep_logs(log_dir: Path, *, now: datetime, max_age: timedelta = timedelta(days=14)) -> int:
    """Delete regular ``*.log`` files older than ``max_age``; housekeeping never fails a run."""
    cutoff = now.timestamp() - max_age.total_seconds()
    removed = 0
    for root, _dirs, files in os.walk(log_dir):
        for name in files:
            if not name.endswith(".log"):
                continue
            path = Path(root, name)
            with suppress(OSError):
                st = path.lstat()
                if st.st_mtime < cutoff and stat.S_ISREG(st.st_mode):
                    path.unlink()
                    removed += 1
    return removed
