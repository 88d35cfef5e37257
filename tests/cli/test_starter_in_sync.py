"""The starter file exists three times: keep them one.

cronctl/data/starter.toml is what `cronctl init` writes; schedules.example.toml
is the copy people read on GitHub. Both must be the same bytes, and what `init`
writes must pass `cronctl check`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
STARTER = REPO_ROOT / "cronctl" / "data" / "starter.toml"
EXAMPLE = REPO_ROOT / "schedules.example.toml"


def _cronctl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # A private state dir, so `check` never looks at the machine's own.
    env = {**os.environ, "CRONCTL_STATE_DIR": str(cwd / "state")}
    return subprocess.run(
        [sys.executable, "-m", "cronctl", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_example_file_is_the_starter_byte_for_byte() -> None:
    assert EXAMPLE.read_bytes() == STARTER.read_bytes(), (
        "schedules.example.toml and cronctl/data/starter.toml differ: change both "
        "(cp cronctl/data/starter.toml schedules.example.toml)"
    )


def test_init_writes_the_starter_and_it_passes_check(tmp_path: Path) -> None:
    target = tmp_path / "schedules.toml"

    init = _cronctl("init", str(target), cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    assert target.read_bytes() == STARTER.read_bytes()

    check = _cronctl("check", "-f", str(target), cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
