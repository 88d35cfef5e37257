"""A command's resource caps (`memory_max`, `cpu_max`, `nice`, `ionice`): cgroup v2, else
setrlimit (docs/schedule-file.md, docs/containers.md); imported only for a capped task.

With a delegated cgroup, each run gets a child ``run-<run id>`` the child joins before exec.
A cgroup may hold processes or give controllers to children, not both, so the first capped
run moves cronctl into a leaf, ``supervisor``, once it is alone there. The fallback turns
``cpu_max`` into a budget of CPU seconds (share times timeout): there is no rate to set.
The ``preexec_fn`` runs only a few system calls prepared in the parent (a forked child of a
threaded process must not lock, import or allocate).
"""

from __future__ import annotations

import errno
import math
import os
import resource
import signal
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from cronctl.core.model import format_duration
from cronctl.edge.process.stream import human_size

CPU_PERIOD_US = 100_000
# RLIMIT_CPU's hard limit this far past the soft one: SIGKILL for a task ignoring SIGXCPU.
CPU_GRACE_S = 2
SUPERVISOR = "supervisor"
# The exit status of a child that could not apply its caps (as a shell's "cannot execute").
CAPS_FAILED = 126
_RUN_PREFIX = "run-"
_lock = threading.Lock()
# cronctl's cgroup once it held a run's: cronctl has moved into its leaf since, so
# /proc/self/cgroup no longer names it.
_found: tuple[Path, str] | None = None
# ioprio_set's system call number by machine: Python has no call for it. ``who`` 1 is
# IOPRIO_WHO_PROCESS, and pid 0 the calling process.
_SYS_IOPRIO_SET = {"x86_64": 251, "aarch64": 30, "i686": 289, "armv7l": 314, "riscv64": 30,
                   "ppc64le": 273, "s390x": 282}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Caps:
    memory_max: int = 0
    cpu_max: int = 0
    nice: int = 0
    timeout: timedelta | None = None
    ionice: int = 0  # the kernel's I/O priority value (core/capkeys.py); 0: none

    @property
    def controllers(self) -> tuple[str, ...]:
        return (("memory",) if self.memory_max else ()) + (("cpu",) if self.cpu_max else ())

    @property
    def cpu_seconds(self) -> int | None:
        if not self.cpu_max or self.timeout is None:
            return None
        return max(1, math.ceil(self.cpu_max / 100 * self.timeout.total_seconds()))


def find_cgroup(proc: Path = Path("/proc/self")) -> tuple[Path, str] | None:
    """cronctl's cgroup v2 directory and its path in the hierarchy; None without one."""
    try:
        lines = (proc / "cgroup").read_text().splitlines()
        mounts = (proc / "mountinfo").read_text().splitlines()
    except OSError:
        return None
    rel = next((line[3:] for line in lines if line.startswith("0::")), None)
    if rel is None:
        return None
    for mount in mounts:
        left, _, right = mount.partition(" - ")
        parts = left.split()
        if right.split()[:1] != ["cgroup2"] or len(parts) < 5:
            continue
        root, point = parts[3], parts[4]
        inside = os.path.relpath(rel, root)
        if not inside.startswith(".."):
            return (Path(point) if inside == "." else Path(point, inside)), rel
    return None


def cgroup_problem(base: Path, rel: str, controllers: tuple[str, ...]) -> str | None:
    """Why runs cannot get cgroups with these controllers under ``base``; None: they can."""
    try:
        offered = (base / "cgroup.controllers").read_text().split()
    except OSError as exc:
        return f"cannot read {base}/cgroup.controllers: {exc.strerror}"
    missing = [c for c in controllers if c not in offered]
    if missing:
        return f"the {' and '.join(missing)} controller is not offered to cronctl's cgroup {rel}"
    if not _delegated(base, rel):
        return f"cronctl's cgroup {rel} is not delegated to it (systemd: Delegate=yes)"
    if not (os.access(base, os.W_OK) and os.access(base / "cgroup.subtree_control", os.W_OK)):
        return f"cronctl cannot write its cgroup {base} (a read-only mount?)"
    return None


def _delegated(base: Path, rel: str) -> bool:
    """A namespace's root, a cgroup systemd marks delegated, or one given to this user."""
    if rel == "/":
        return True
    for name in ("trusted.delegate", "user.delegate"):
        with suppress(OSError):
            if os.getxattr(base, name) == b"1":
                return True
    euid = os.geteuid()
    try:
        return euid != 0 and base.stat().st_uid == euid
    except OSError:
        return False


def enable(base: Path, controllers: tuple[str, ...], pid: int) -> str | None:
    """Give ``controllers`` to ``base``'s children, moving cronctl into its leaf first; None
    when done, else why not (nothing changes while another process shares the cgroup)."""
    control = base / "cgroup.subtree_control"
    try:
        enabled = control.read_text().split()
        wanted = [c for c in controllers if c not in enabled]
        if not wanted:
            return None
        others = [p for p in (base / "cgroup.procs").read_text().split() if p != str(pid)]
        if others:
            return f"other processes share cronctl's cgroup {base} (pid {others[0]})"
        leaf = base / SUPERVISOR
        leaf.mkdir(exist_ok=True)
        (leaf / "cgroup.procs").write_text(str(pid))
        control.write_text(" ".join(f"+{c}" for c in wanted))
    except OSError as exc:
        return f"cannot set up cgroup {base}: {exc.strerror or exc}"
    return None


@dataclass(slots=True)
class Prepared:
    """How one run's caps are held: its cgroup, or None and ``fallback`` saying why."""

    caps: Caps
    preexec: Callable[[], None]
    cgroup: Path | None = None
    fallback: str | None = None
    _procs_fd: int | None = field(default=None, repr=False)

    def explain(self, exit_code: int | None, sig: int | None) -> str | None:
        caps = self.caps
        if self.cgroup is not None:
            if caps.memory_max and _oom_kills(self.cgroup):
                return (
                    f"memory_max {human_size(caps.memory_max)} reached: the kernel's OOM "
                    "killer ended the task (cgroup v2)"
                )
            return None
        why = f"; cgroup v2 is not usable here: {self.fallback}" if self.fallback else ""
        # A shell whose child RLIMIT_CPU killed says so only by its exit status, 128 + SIGXCPU.
        by_shell = sig is None and exit_code == 128 + signal.SIGXCPU
        if (by_shell or sig in (signal.SIGXCPU, signal.SIGKILL)) and caps.cpu_seconds is not None:
            timeout = format_duration(caps.timeout) if caps.timeout else "?"
            said = (
                f"killed by SIGXCPU for exceeding its CPU limit (its shell's exit {exit_code}): "
                if by_shell
                else ""
            )
            return (
                f"{said}cpu_max {caps.cpu_max}% of its {timeout} timeout used up: "
                f"{caps.cpu_seconds}s of CPU time, held by setrlimit (RLIMIT_CPU){why}"
            )
        if caps.memory_max and (exit_code or sig):
            return (
                f"under memory_max {human_size(caps.memory_max)}, held by setrlimit as an "
                f"address-space limit (RLIMIT_AS): past it, allocations fail{why}"
            )
        return None

    def close(self) -> None:
        fd, self._procs_fd = self._procs_fd, None
        if fd is not None:
            os.close(fd)
        if self.cgroup is not None:
            _remove(self.cgroup, kill=True)


def prepare(caps: Caps, name: str, proc: Path = Path("/proc/self")) -> Prepared:
    """The run's cgroup, or the fallback's limits, made ready in the parent; never raises."""
    base, why = _base(caps.controllers, proc) if caps.controllers else (None, None)
    if base is not None:
        try:
            path, fd = _create(base, name, caps)
        except OSError as exc:
            why = f"cannot create a cgroup under {base}: {exc.strerror or exc}"
        else:
            return Prepared(caps, _child(caps, fd, ()), path, None, fd)
    return Prepared(caps, _child(caps, None, _rlimits(caps)), None, why)


def _base(controllers: tuple[str, ...], proc: Path) -> tuple[Path | None, str | None]:
    # Asked at each capped run: another process may have left the cgroup since.
    global _found
    with _lock:
        found = _found or find_cgroup(proc)
        if found is None:
            return None, "no cgroup v2 hierarchy"
        base, rel = found
        why = cgroup_problem(base, rel, controllers) or enable(base, controllers, os.getpid())
        if why:
            return None, why
        if _found is None:
            _found = found
            _sweep(base)
        return base, None


def _create(base: Path, name: str, caps: Caps) -> tuple[Path, int]:
    path = base / f"{_RUN_PREFIX}{name}"
    path.mkdir()
    try:
        if caps.memory_max:
            (path / "memory.max").write_text(str(caps.memory_max))
            with suppress(OSError):  # before 4.19 there is none: the kernel ends one process
                (path / "memory.oom.group").write_text("1")
        if caps.cpu_max:
            (path / "cpu.max").write_text(f"{caps.cpu_max * CPU_PERIOD_US // 100} {CPU_PERIOD_US}")
        # O_CREAT changes nothing in a cgroup (the file is there); a test's fake has none.
        fd = os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        _remove(path, kill=False)
        raise
    return path, fd


def _rlimits(caps: Caps) -> tuple[tuple[int, int, int], ...]:
    # Within cronctl's own hard limits.
    wanted = []
    if caps.memory_max:
        wanted.append((resource.RLIMIT_AS, caps.memory_max, caps.memory_max))
    if (seconds := caps.cpu_seconds) is not None:
        wanted.append((resource.RLIMIT_CPU, seconds, seconds + CPU_GRACE_S))
    limits = []
    for which, soft, hard in wanted:
        own_hard = resource.getrlimit(which)[1]
        if own_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, own_hard), min(hard, own_hard)
        limits.append((which, soft, hard))
    return tuple(limits)


def _child(
    caps: Caps, procs_fd: int | None, rlimits: tuple[tuple[int, int, int], ...]
) -> Callable[[], None]:
    """The preexec_fn; a failure ends the child with CAPS_FAILED, never an uncapped run."""
    nice = caps.nice
    # Found in the parent: loading a library in the forked child of a threaded process may
    # deadlock on a lock another thread held at the fork.
    set_ioprio = _ioprio_setter() if caps.ionice else None

    def apply() -> None:
        try:
            if procs_fd is not None:
                os.write(procs_fd, str(os.getpid()).encode())
            if set_ioprio is not None:
                set_ioprio(caps.ionice)
            if nice:
                # Never below cronctl's own: an unprivileged process cannot lower it.
                current = os.getpriority(os.PRIO_PROCESS, 0)
                os.setpriority(os.PRIO_PROCESS, 0, max(nice, current))
            for which, soft, hard in rlimits:
                resource.setrlimit(which, (soft, hard))
        except (OSError, ValueError) as exc:
            os.write(2, f"cronctl: cannot apply the task's resource caps: {exc}\n".encode())
            os._exit(CAPS_FAILED)

    return apply


def _ioprio_setter() -> Callable[[int], None]:
    machine = os.uname().machine
    number = _SYS_IOPRIO_SET.get(machine)
    # Imported here, not at the top: only a task with `ionice` needs it.
    import ctypes

    syscall = ctypes.CDLL(None, use_errno=True).syscall

    def set_ioprio(value: int) -> None:
        if number is None:
            raise OSError(errno.ENOSYS, f"ionice is not supported on {machine}")
        if syscall(number, 1, 0, value) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"ioprio_set: {os.strerror(code)}")

    return set_ioprio


def _oom_kills(path: Path) -> int:
    with suppress(OSError, ValueError):
        for line in (path / "memory.events").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    return 0


def _remove(path: Path, *, kill: bool) -> None:
    """rmdir the cgroup; with ``kill``, first cgroup.kill what is left; else a later sweep."""
    for attempt in range(20):
        try:
            path.rmdir()
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or not kill:
                return
        if attempt == 0:
            with suppress(OSError):
                (path / "cgroup.kill").write_text("1")
        time.sleep(0.05)


def _sweep(base: Path) -> None:
    with suppress(OSError):
        for entry in base.iterdir():
            if entry.name.startswith(_RUN_PREFIX) and entry.is_dir():
                _remove(entry, kill=False)
