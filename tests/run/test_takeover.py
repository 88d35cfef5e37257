"""A second, unprivileged user on the machine cannot take over root's cronctl
(docs/guarantees.md, Safety).

Reproduced attack: with `chmod 1777` on state_dir and lock_dir, another user redirected
root's logs (a symlink at `logs`), paused root's task (a file in `paused/`) and supplied
the state database itself, then read the task's output from it. Here a real throwaway user
is created (`useradd`), plants each of those with `runuser`, and root's `cronctl run` must
refuse (exit 2, naming the path) without running the task or writing a byte for that user.
Skipped when not root: creating users and chowning need it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import FILE_STATE, Cli, write_schedule

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None or shutil.which("runuser") is None,
    reason="needs root, useradd and runuser to create a real second user",
)

TASK_OUTPUT = "private-output-7f2a"
NOW = "2026-08-03T09:00:00Z"


@pytest.fixture(scope="module")
def intruder() -> Iterator[str]:
    """A real unprivileged user, removed afterwards."""
    name = f"cronctl-t{os.getpid() % 100000}"
    subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
    )
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


@pytest.fixture
def site(cli: Cli) -> Iterator[Path]:
    """A directory the intruder can reach (pytest's tmp_path is 0700), with a schedule."""
    base = Path(tempfile.mkdtemp(prefix="cronctl-takeover-", dir="/tmp"))
    base.chmod(0o755)
    (base / "stolen").mkdir()
    (base / "stolen").chmod(0o1777)  # where the intruder wants root's writes to land
    write_schedule(
        base / "schedules.toml",
        [f'name = "beat"\ncommand = "echo {TASK_OUTPUT}; touch {base}/ran"\nevery_minute = true'],
        header='[cronctl]\nstate_dir = "state"\nlock_dir = "locks"\n',
    )
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def as_user(user: str, script: str) -> None:
    """Run a shell script as `user`, the way the attacker would."""
    subprocess.run(["runuser", "-u", user, "--", "sh", "-ec", script], check=True)


def run_as_root(cli: Cli, site: Path) -> subprocess.CompletedProcess[str]:
    return cli("run", "--now", NOW, "-f", str(site / "schedules.toml"), env=FILE_STATE)


def assert_nothing_leaked(site: Path, intruder: str) -> None:
    """The task did not run, nothing landed where the intruder pointed, no leak to them."""
    assert not (site / "ran").exists()
    assert list((site / "stolen").iterdir()) == []
    uid = int(subprocess.run(["id", "-u", intruder], capture_output=True, text=True).stdout)
    for path in site.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.stat().st_uid == uid:
            assert TASK_OUTPUT.encode() not in path.read_bytes(), path


def test_sticky_world_writable_state_and_lock_dirs_are_refused_before_anything_runs(
    cli: Cli, site: Path, intruder: str
) -> None:
    for name in ("state", "locks"):
        (site / name).mkdir()
        (site / name).chmod(0o1777)
    as_user(
        intruder,
        f"ln -s {site}/stolen {site}/state/logs; "
        f"mkdir {site}/locks/paused; echo '{{}}' > {site}/locks/paused/beat.pause; "
        f": > {site}/state/state.db; chmod 666 {site}/state/state.db",
    )

    result = run_as_root(cli, site)

    assert result.returncode == 2, result
    assert f"{site}/state is world-writable" in result.stderr
    assert_nothing_leaked(site, intruder)
    assert (site / "state" / "state.db").stat().st_size == 0


# What the intruder left behind while the directories were open; the operator has since
# closed them (0755, root's), but the planted entries remain.
PLANTED = {
    "logs-symlink": ("state/logs", "ln -s {site}/stolen {p}"),
    "paused-dir": ("locks/paused", "mkdir {p}; echo '{{}}' > {p}/beat.pause"),
    "state-db": ("state/state.db", ": > {p}; chmod 600 {p}"),
    "state-db-wal-symlink": ("state/state.db-wal", "ln -s {site}/stolen/wal {p}"),
    "notices-dir": ("state/notices", "mkdir {p}; ln -s /etc/passwd {p}/lock-dir-not-shared"),
    "overlap-dir": ("locks/overlap", "mkdir {p}; : > {p}/beat.lock"),
    "claims-dir": ("locks/claims", "mkdir {p}; : > {p}/beat@20260803T0900Z"),
}


@pytest.mark.parametrize("planted", PLANTED.values(), ids=PLANTED.keys())
def test_an_entry_another_user_planted_inside_is_refused_by_name(
    cli: Cli, site: Path, intruder: str, planted: tuple[str, str]
) -> None:
    where, script = planted
    for name in ("state", "locks"):
        (site / name).mkdir()
        (site / name).chmod(0o1777)
    as_user(intruder, script.format(site=site, p=site / where))
    for name in ("state", "locks"):
        (site / name).chmod(0o755)

    result = run_as_root(cli, site)

    assert result.returncode == 2, result
    assert str(site / where) in result.stderr
    assert "Traceback" not in result.stderr
    assert_nothing_leaked(site, intruder)


def test_with_nothing_planted_root_runs_the_task(cli: Cli, site: Path) -> None:
    # The control: the refusals above are about what was planted, not about the set-up.
    result = run_as_root(cli, site)
    assert result.returncode == 0, result
    assert (site / "ran").exists()
