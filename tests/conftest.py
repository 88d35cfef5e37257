"""Fixtures shared by every test module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import Cli, clean_env


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """A Cli whose working directory and HOME are this test's tmp_path."""
    home = tmp_path / "home"
    home.mkdir()
    return Cli(tmp_path, clean_env(home))


# The machine's own state: tests run as root, where the default state dir is
# /var/lib/cronctl; as another user it is ~/.local/state/cronctl. No test may touch either.
_DEFAULT_STATE_DIRS = (Path("/var/lib/cronctl"), Path.home() / ".local" / "state" / "cronctl")


@pytest.fixture(scope="session", autouse=True)
def _no_default_state_dir_appears() -> Iterator[None]:
    """Fail the session if a test wrote to a default state dir (it must use tmp_path)."""
    before = {path for path in _DEFAULT_STATE_DIRS if path.exists()}
    yield
    appeared = [str(path) for path in _DEFAULT_STATE_DIRS if path.exists() and path not in before]
    assert not appeared, f"a test created a default state dir: {appeared}"
