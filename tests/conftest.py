"""Fixtures shared by every test module."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import Cli, clean_env


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """A Cli whose working directory and HOME are this test's tmp_path."""
    home = tmp_path / "home"
    home.mkdir()
    return Cli(tmp_path, clean_env(home))
