"""Fixtures shared by every test module."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cronctl.edge.process import reaper
from tests.helpers import Cli, clean_env


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """A Cli whose working directory and HOME are this test's tmp_path."""
    home = tmp_path / "home"
    home.mkdir()
    return Cli(tmp_path, clean_env(home))


# The machine's own state: tests run as root, where the default state dir is
# /var/lib/cronctl; as another user it is ~/.local/state/cronctl. No test may touch either,
# nor the default cache directory of `run`'s parsed schedules (cronctl/edge/schedcache.py).
_DEFAULT_STATE_DIRS = (
    Path("/var/lib/cronctl"),
    Path.home() / ".local" / "state" / "cronctl",
    Path("/var/cache/cronctl"),
    Path.home() / ".cache" / "cronctl",
)
# Tests that call cronctl in this process, or pass this process's environment on, keep their
# schedule caches here (one directory a worker); clean_env gives each test its own.
os.environ["CRONCTL_CACHE_DIR"] = tempfile.mkdtemp(prefix="cronctl-test-cache-")
atexit.register(shutil.rmtree, os.environ["CRONCTL_CACHE_DIR"], ignore_errors=True)
# The suite starts cronctl as a subprocess over a thousand times. Where the environment says
# PYTHONDONTWRITEBYTECODE (this project's CI machines do), each of them compiled every cronctl
# module from source again: about a quarter of a second of CPU each, most of the suite's time on
# two cores. The subprocesses keep their bytecode here instead (one directory a worker, outside
# the checkout); Python checks each file against its source, so an edit is never missed.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="cronctl-test-pycache-")
atexit.register(shutil.rmtree, os.environ["PYTHONPYCACHEPREFIX"], ignore_errors=True)


@pytest.fixture(autouse=True)
def _no_reaper_outlives_its_test() -> Iterator[None]:
    """Stop the orphan reaper (edge/process/reaper.py) that a test running cronctl in this
    process started. Left running, it reaped the exited `cronctl` subprocesses of later tests
    before their Popen did, which then read exit 0: now and then, under load, a `run` or a
    `check` that printed an error "exited 0"."""
    yield
    reaper.reaper.stop()


@pytest.fixture(scope="session", autouse=True)
def _no_default_state_dir_appears() -> Iterator[None]:
    """Fail the session if a test wrote to a default state dir (it must use tmp_path)."""
    before = {path for path in _DEFAULT_STATE_DIRS if path.exists()}
    yield
    appeared = [str(path) for path in _DEFAULT_STATE_DIRS if path.exists() and path not in before]
    assert not appeared, f"a test created a default state dir: {appeared}"


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject's addopts): one worker more than the cores, at most four, none
    on one core.

    Most tests wait on subprocesses, so a third worker on two cores fills their waits:
    `.ci/run` took 9 min 16 s with three, 10 min 05 s with two. A fourth saved 15 s of
    2,594 tests' 10 minutes and made timing-bound tests fail. Every worker starts its own
    PostgreSQL. `-n 0` on the command line runs the suite in one process."""
    cores = len(os.sched_getaffinity(0))
    return 0 if cores < 2 else min(cores + 1, 4)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Start the tests marked `long` first: one worker takes the simulated days while the
    others work through the rest, instead of the soak starting last and running alone."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
