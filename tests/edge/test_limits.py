"""Resource caps: which cgroup v2 files get which values, against a fake cgroup directory.

This machine's cgroup v2 hierarchy (if any) offers no memory or cpu controller to cronctl,
so the v2 path's decisions are held here against directories in tmp_path that stand for
/proc/self and a cgroup2 mount; the setrlimit fallback runs for real in
tests/run/test_caps.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from cronctl.edge.process import limits
from cronctl.edge.process.limits import Caps


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "_found", None)  # no cgroup remembered from another test


def _proc(tmp_path: Path, rel: str, mount_root: str = "/", point: Path | None = None) -> Path:
    """A fake /proc/self: cronctl in cgroup `rel` of a cgroup2 mounted at `point`."""
    proc = tmp_path / "proc"
    proc.mkdir(exist_ok=True)
    (proc / "cgroup").write_text(f"1:name=systemd:/x\n0::{rel}\n")
    point = point or tmp_path / "cg"
    (proc / "mountinfo").write_text(
        "22 1 0:20 / /proc rw,nosuid - proc proc rw\n"
        f"35 24 0:30 {mount_root} {point} rw,nosuid,nodev - cgroup2 cgroup2 rw\n"
    )
    return proc


def _cgroup(path: Path, controllers: str = "cpu memory pids", procs: str = "") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "cgroup.controllers").write_text(controllers + "\n")
    (path / "cgroup.subtree_control").write_text("\n")
    (path / "cgroup.procs").write_text(procs)
    return path


def test_find_cgroup_joins_the_mount_and_the_0_line(tmp_path: Path) -> None:
    proc = _proc(tmp_path, "/system.slice/cronctl.service")
    assert limits.find_cgroup(proc) == (
        tmp_path / "cg/system.slice/cronctl.service",
        "/system.slice/cronctl.service",
    )
    # A container's namespace root is the mount itself.
    assert limits.find_cgroup(_proc(tmp_path, "/")) == (tmp_path / "cg", "/")
    # A mount of a subtree: the path inside it.
    assert limits.find_cgroup(_proc(tmp_path, "/a/b/c", mount_root="/a")) == (
        tmp_path / "cg/b/c",
        "/a/b/c",
    )
    # cronctl outside the mounted subtree, or no v2 line at all (a v1-only machine).
    assert limits.find_cgroup(_proc(tmp_path, "/other", mount_root="/a")) is None
    (tmp_path / "proc/cgroup").write_text("4:memory:/x\n")
    assert limits.find_cgroup(tmp_path / "proc") is None
    assert limits.find_cgroup(tmp_path / "nothing") is None


def test_the_controllers_must_be_offered_and_the_cgroup_delegated(tmp_path: Path) -> None:
    base = _cgroup(tmp_path / "cg", controllers="hugetlb")
    assert limits.cgroup_problem(base, "/", ("memory",)) == (
        "the memory controller is not offered to cronctl's cgroup /"
    )
    assert "the memory and cpu controller" in (
        limits.cgroup_problem(base, "/", ("memory", "cpu")) or ""
    )
    base = _cgroup(tmp_path / "cg", controllers="cpu memory")
    assert limits.cgroup_problem(base, "/", ("memory", "cpu")) is None  # a namespace's root
    if os.geteuid() == 0:
        # root's cgroup elsewhere is delegated only when marked so (cron.service is not).
        assert limits.cgroup_problem(base, "/system.slice/cron.service", ("cpu",)) == (
            "cronctl's cgroup /system.slice/cron.service is not delegated to it "
            "(systemd: Delegate=yes)"
        )
        try:
            os.setxattr(base, "user.delegate", b"1")
        except OSError:
            pytest.skip("no user extended attributes on this file system")
        assert limits.cgroup_problem(base, "/system.slice/cronctl.service", ("cpu",)) is None
    else:
        # A cgroup given to this user (systemd chowns a delegated one to User=).
        assert limits.cgroup_problem(base, "/user.slice/x.service", ("cpu",)) is None
    assert limits.cgroup_problem(tmp_path / "gone", "/", ("cpu",)) is not None


def test_enable_moves_cronctl_into_its_leaf_then_gives_the_controllers(tmp_path: Path) -> None:
    base = _cgroup(tmp_path / "cg", procs="4242\n")
    assert limits.enable(base, ("memory", "cpu"), 4242) is None
    assert (base / "supervisor/cgroup.procs").read_text() == "4242"
    assert (base / "cgroup.subtree_control").read_text() == "+memory +cpu"


def test_enable_touches_nothing_while_another_process_shares_the_cgroup(tmp_path: Path) -> None:
    base = _cgroup(tmp_path / "cg", procs="4242\n777\n")
    assert limits.enable(base, ("memory",), 4242) == (
        f"other processes share cronctl's cgroup {base} (pid 777)"
    )
    assert not (base / "supervisor").exists()
    assert (base / "cgroup.subtree_control").read_text() == "\n"
    # Once given (by an earlier run), nothing more is asked of the cgroup.
    (base / "cgroup.subtree_control").write_text("memory cpu\n")
    assert limits.enable(base, ("memory", "cpu"), 4242) is None
    assert not (base / "supervisor").exists()


def test_a_run_gets_its_own_cgroup_with_its_caps_and_enters_it_before_exec(
    tmp_path: Path,
) -> None:
    base = _cgroup(tmp_path / "cg", procs=f"{os.getpid()}\n")
    (base / "run-old-1").mkdir()  # left by an earlier cronctl, empty: swept
    caps = Caps(memory_max=512 * 1024**2, cpu_max=250, nice=3, timeout=timedelta(hours=1))
    prepared = limits.prepare(caps, "R1-1", proc=_proc(tmp_path, "/"))
    run = base / "run-R1-1"
    assert (prepared.cgroup, prepared.fallback) == (run, None)
    assert not (base / "run-old-1").exists()
    assert (run / "memory.max").read_text() == str(512 * 1024**2)
    assert (run / "memory.oom.group").read_text() == "1"
    assert (run / "cpu.max").read_text() == "250000 100000"  # 2.5 CPUs of each 100 ms
    # The child writes its own pid into the run's cgroup, before exec, and takes its nice.
    child = subprocess.run(
        ["/bin/sh", "-c", "echo $$; cut -d' ' -f19 /proc/self/stat"],
        preexec_fn=prepared.preexec,
        capture_output=True,
        text=True,
        check=True,
    )
    pid, nice = child.stdout.split()
    assert (run / "cgroup.procs").read_text() == pid
    assert nice == "3"
    (run / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n")
    assert prepared.explain(None, signal.SIGKILL) == (
        "memory_max 512MB reached: the kernel's OOM killer ended the task (cgroup v2)"
    )
    prepared.close()


def test_only_the_controllers_a_task_needs_are_asked_for(tmp_path: Path) -> None:
    base = _cgroup(tmp_path / "cg", controllers="memory", procs=f"{os.getpid()}\n")
    proc = _proc(tmp_path, "/")
    memory_only = limits.prepare(Caps(memory_max=64 * 1024**2), "m-1", proc=proc)
    assert memory_only.cgroup == base / "run-m-1"
    assert not (base / "run-m-1/cpu.max").exists()
    assert (base / "cgroup.subtree_control").read_text() == "+memory"
    # cpu is not offered: that run falls back to setrlimit, and says why.
    cpu = limits.prepare(Caps(cpu_max=50, timeout=timedelta(seconds=10)), "c-1", proc=proc)
    assert cpu.cgroup is None
    assert cpu.fallback == "the cpu controller is not offered to cronctl's cgroup /"
    assert cpu.explain(None, signal.SIGXCPU) == (
        "cpu_max 50% of its 10s timeout used up: 5s of CPU time, held by setrlimit "
        "(RLIMIT_CPU); cgroup v2 is not usable here: the cpu controller is not offered to "
        "cronctl's cgroup /"
    )
    # A nice alone needs no cgroup at all.
    assert limits.prepare(Caps(nice=5), "n-1", proc=proc).cgroup is None
    assert not (base / "run-n-1").exists()


def test_the_fallback_budget_is_the_share_of_the_timeout() -> None:
    assert Caps(cpu_max=50, timeout=timedelta(hours=1)).cpu_seconds == 1800
    assert Caps(cpu_max=200, timeout=timedelta(seconds=3)).cpu_seconds == 6
    assert Caps(cpu_max=1, timeout=timedelta(seconds=1)).cpu_seconds == 1  # at least 1 s
    assert Caps(cpu_max=50).cpu_seconds is None  # no timeout: nothing to hold it by
