"""In-process drives of `run_once` with a pinned clock: sleeps advance it, never wait."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cronctl import load
from cronctl.core.model import Schedule
from cronctl.run.context import RunContext, RunReport
from cronctl.run.once import run_once
from tests.helpers import changed, local_context, write_schedule

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)


@dataclass
class FakeClock:
    """The time a run sees; `sleep` moves it forward and records how long was asked for."""

    now: datetime = T0
    slept: list[float] = field(default_factory=list)

    def __call__(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += timedelta(seconds=seconds)


@dataclass
class Drive:
    """A schedule in tmp_path and a RunContext over real processes and a fake clock."""

    root: Path
    clock: FakeClock = field(default_factory=FakeClock)
    warnings: list[str] = field(default_factory=list)
    host: str = "web-1"

    def schedule(self, *tasks: str, header: str = "") -> Schedule:
        schedule = load(write_schedule(self.root / "schedules.toml", list(tasks), header))
        assert not schedule.errors, schedule.errors
        return schedule

    def ctx(self, **changes: object) -> RunContext:
        """Over real processes and the fake clock; `changes` as helpers.changed takes them."""
        base = local_context(
            self.root, {"PATH": os.environ["PATH"]}, host=self.host, clock=self.clock,
            sleep=self.clock.sleep, warn=self.warnings.append,
        )  # fmt: skip
        return changed(base, **changes)

    def run(self, schedule: Schedule, at: datetime = T0, **changes: object) -> RunReport:
        self.clock.now = at
        return run_once(schedule, at, self.ctx(**changes))


@pytest.fixture
def drive(tmp_path: Path) -> Drive:
    return Drive(tmp_path)
