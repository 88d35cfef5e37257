"""`metrics_file` below a directory other users can write to: `check` and `doctor` warn, `run`
refuses to write it (docs/operating.md, Metrics for Prometheus).

The links and directories are planted by a real second user (uid 65534, `nobody`), through a
descriptor of the shared directory: the test's own directories are private to root, so that
user could not reach the shared one by its path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.commands.test_doctor import _no_crontab
from tests.helpers import Cli, write_schedule

T = "2026-08-03T09:00:00Z"
OTHER = 65534

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="plants as a second user: needs root")


def _as_other_user(directory: Path, plant: Callable[[int], None]) -> None:
    """Run `plant(dir_fd)` in a child that has become the other user."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 1
            try:
                os.setgroups([])
                os.setgid(OTHER)
                os.setuid(OTHER)
                plant(fd)
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, "the other user could not plant"
    finally:
        os.close(fd)


def _metrics_to(tmp_path: Path, metrics: Path) -> Path:
    return write_schedule(
        tmp_path / "s.toml",
        ['name = "a"\ncommand = "true"\ncron = "* * * * *"'],
        header=f'[cronctl]\nmetrics_file = "{metrics}"\n',
    )


def _shared(tmp_path: Path, mode: int = 0o1777) -> Path:
    public = tmp_path / "public"
    public.mkdir()
    public.chmod(mode)
    return public


def _warnings(cli: Cli, path: Path) -> list[dict[str, object]]:
    check = cli("check", "-f", str(path), "--now", T, "--format", "json")
    assert check.returncode == 0, check.stdout  # a warning: the schedule itself is fine
    problems = json.loads(check.stdout)["problems"]
    return [p for p in problems if p["code"] == "metrics-file-unsafe"]


def test_check_and_doctor_warn_of_a_link_another_user_planted(cli: Cli, tmp_path: Path) -> None:
    public, chosen = _shared(tmp_path), tmp_path / "chosen"
    chosen.mkdir()
    _as_other_user(public, lambda fd: os.symlink(chosen, "m", dir_fd=fd))
    assert (public / "m").is_symlink() and os.lstat(public / "m").st_uid == OTHER
    path = _metrics_to(tmp_path, public / "m" / "metrics.prom")

    [warning] = _warnings(cli, path)
    assert warning["severity"] == "warning" and warning["file"] == str(path)
    assert f"{public / 'm'} is a symbolic link in {public}" in str(warning["message"])
    assert cli("check", "-f", str(path), "--now", T, "--strict").returncode == 1
    doctor = cli("doctor", "-f", str(path), "--now", T, env=_no_crontab(tmp_path))
    assert doctor.returncode == 1, doctor.stdout
    assert f"WARN    metrics_file: metrics_file is not safe to write: {public / 'm'}" in (
        doctor.stdout
    )
    run = cli("run", "-f", str(path), "--now", T)
    assert run.returncode == 0 and "metrics_file not written" in run.stderr
    assert list(chosen.iterdir()) == []


def test_check_warns_of_a_directory_another_user_made(cli: Cli, tmp_path: Path) -> None:
    public = _shared(tmp_path)
    _as_other_user(public, lambda fd: os.mkdir("m", 0o777, dir_fd=fd))
    path = _metrics_to(tmp_path, public / "m" / "metrics.prom")
    [warning] = _warnings(cli, path)
    assert f"{public / 'm'} is owned by uid {OTHER} in {public}" in str(warning["message"])
    run = cli("run", "-f", str(path), "--now", T)
    assert run.returncode == 0 and "metrics_file not written" in run.stderr
    assert not (public / "m" / "metrics.prom").exists()


def test_a_shared_directory_without_the_sticky_bit_is_refused(cli: Cli, tmp_path: Path) -> None:
    """Root's own directory in a 0777 directory: the other user cannot plant a link there now,
    but can rename root's directory away between the check and the write and plant one in
    its place (a sticky directory lets only the owner rename an entry)."""
    public = _shared(tmp_path, 0o777)
    (public / "m").mkdir(0o755)
    path = _metrics_to(tmp_path, public / "m" / "metrics.prom")
    [warning] = _warnings(cli, path)
    assert f"{public} can be written by other users and has no sticky bit" in str(
        warning["message"]
    )
    run = cli("run", "-f", str(path), "--now", T)
    assert run.returncode == 0 and "metrics_file not written" in run.stderr
    assert not (public / "m" / "metrics.prom").exists()
    # The other user can indeed move root's directory away: the race is real.
    _as_other_user(public, lambda fd: os.rename("m", "moved", src_dir_fd=fd, dst_dir_fd=fd))
    assert (public / "moved").is_dir()


def test_a_safe_path_draws_no_warning_and_is_written(cli: Cli, tmp_path: Path) -> None:
    public = _shared(tmp_path)
    (public / "m").mkdir(0o755)  # root's own, in a sticky directory
    path = _metrics_to(tmp_path, public / "m" / "metrics.prom")
    assert _warnings(cli, path) == []
    doctor = cli("doctor", "-f", str(path), "--now", T, env=_no_crontab(tmp_path))
    assert "ok      metrics_file: " in doctor.stdout
    assert cli("run", "-f", str(path), "--now", T).returncode == 0
    assert "cronctl_" in (public / "m" / "metrics.prom").read_text()
