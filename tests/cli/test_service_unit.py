"""The shipped docs/cronctl.service starts cleanly as written, under a real service user.

The unit once set `User=app` and `StateDirectory=cronctl`, but cronctl ignored
`$STATE_DIRECTORY` and wrote under the user's home (for www-data: the web root), and its
`CRONCTL_ENV=production` stopped `work` at once over the local lock_dir of a single machine.
Here systemd-analyze checks the unit, and a throwaway user (`useradd`) runs its ExecStart
with its environment and the directories systemd would hand over.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT, clean_env, wait_for, write_schedule

UNIT = REPO_ROOT / "docs" / "cronctl.service"
BINARY = "/usr/local/bin/cronctl"


def _setting(text: str, key: str) -> list[str]:
    """The values of `key=` lines (not comments) of a unit file."""
    return re.findall(rf"^{key}=(.*)$", text, flags=re.MULTILINE)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_the_shipped_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    # Only the binary moves to this checkout's: /usr/local/bin/cronctl is not on a test box.
    cronctl = Path(sys.executable).with_name("cronctl")
    unit = tmp_path / "cronctl.service"
    unit.write_text(UNIT.read_text().replace(BINARY, str(cronctl)))
    verify = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(unit)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stderr
    assert verify.stderr == ""


def test_the_units_documentation_link_is_installed_by_its_own_instructions() -> None:
    text = UNIT.read_text()
    (link,) = _setting(text, "Documentation")
    assert link.startswith("file:/"), link
    target = link.removeprefix("file:")
    # The header's install line copies a file of docs/ to exactly that place.
    install = re.search(rf"install -D -m 644 (docs/\S+) {re.escape(target)}$", text, re.MULTILINE)
    assert install is not None, "the header does not install the Documentation= file"
    assert (REPO_ROOT / install.group(1)).is_file()


def _launcher(base: Path) -> Path:
    """An executable `cronctl` for this checkout that a service user can start.

    The suite's own interpreter may live where only root can reach (/root/.pyenv): the
    launcher uses the system's Python of the same version, with this checkout's packages."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    python = shutil.which(f"python{version}", path="/usr/bin:/usr/local/bin")
    if python is None:
        pytest.skip(f"needs a system python{version} a service user can run")
    launcher = base / "bin" / "cronctl"
    launcher.parent.mkdir(mode=0o755)
    purelib = sysconfig.get_paths()["purelib"]
    launcher.write_text(
        f"#!{python}\nimport site, sys\nsys.path.insert(0, {str(REPO_ROOT)!r})\n"
        f"site.addsitedir({purelib!r})\nfrom cronctl.cli.main import entry\nentry()\n"
    )
    launcher.chmod(0o755)
    return launcher


@pytest.fixture
def service_user() -> Iterator[tuple[str, Path]]:
    """A real system user with a home of its own, in a directory it can reach (/tmp/...)."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd to create a real service user")
    base = Path(tempfile.mkdtemp(prefix="cronctl-unit-", dir="/tmp"))
    base.chmod(0o755)
    name = f"cronctl-u{os.getpid() % 100000}"
    home = base / "home"
    subprocess.run(
        ["useradd", "--system", "--home-dir", str(home), "--create-home",
         "--shell", "/usr/sbin/nologin", name],
        check=True, capture_output=True,
    )  # fmt: skip
    try:
        yield name, base
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_work_runs_as_the_units_user_with_the_directories_systemd_hands_over(
    service_user: tuple[str, Path],
) -> None:
    user, base = service_user
    text = UNIT.read_text()
    (exec_start,) = _setting(text, "ExecStart")
    assert _setting(text, "User") == ["app"] and _setting(text, "StateDirectory") == ["cronctl"]
    app = base / "srv-app"
    app.mkdir()
    write_schedule(
        app / "schedules.toml",
        ['name = "backup"\ncommand = "true"\nevery_minute = true\non_one_server = true'],
    )
    # What systemd does for StateDirectory=cronctl, CacheDirectory=cronctl and User=: create
    # them for the user with the unit's modes, and say where in the environment.
    unit_dirs = {}
    for kind, variable in (("State", "STATE_DIRECTORY"), ("Cache", "CACHE_DIRECTORY")):
        made = base / f"{kind.lower()}-cronctl"
        made.mkdir(mode=int(_setting(text, f"{kind}DirectoryMode")[0], 8))
        shutil.chown(made, user, user)
        unit_dirs[variable] = str(made)
    home = base / "home"
    env = {k: v for k, v in clean_env(home).items() if not k.startswith(("CRONCTL_", "XDG_"))}
    env.update(unit_dirs, USER=user, LOGNAME=user)
    for assignment in _setting(text, "Environment"):
        key, _, value = assignment.partition("=")
        env[key] = value
    argv = exec_start.replace(BINARY, str(_launcher(base)))
    argv = argv.replace("/srv/app", str(app))
    worker = subprocess.Popen(
        argv.split(), cwd=app, env=env, user=user, group=user,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    state = Path(unit_dirs["STATE_DIRECTORY"])
    try:
        opened = (state / "state.db").is_file
        wait_for(lambda: opened() or worker.poll() is not None, "work to open its state", 60)
        assert worker.poll() is None, "work stopped at once"
        assert not (home / ".local").exists() and not (home / ".cache").exists()
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
    # The refusal would come before the state is opened: past it, work is up. SIGTERM may
    # come before its handler is installed (-15); a refusal or a crash would be exit 2 or 1.
    assert worker.returncode in (0, -signal.SIGTERM), err
    assert "refusing" not in err
