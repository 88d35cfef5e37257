"""`work`'s minutes share one process's `max_parallel` when they claim: a minute claims as
many on_one_server occurrences as the slots left free by the tasks of earlier minutes that
still run (docs/fleets-postgresql.md#claims-are-leases)."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cronctl import load
from cronctl.coord.files.adapter import FilesCoordinator
from cronctl.coord.port import Claim
from cronctl.run.context import Tracker
from cronctl.run.once import run_once
from tests.helpers import changed, local_context, wait_for, write_schedule

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)


class _Asked(FilesCoordinator):
    """Files in lock_dir, noting how many claims each round trip asked for."""

    limits: list[int | None]

    def claim(self, claims: Sequence[Claim], **how: Any) -> set[Claim]:
        self.limits.append(how.get("limit"))
        return super().claim(claims, **how)


def test_a_minute_claims_only_the_slots_earlier_minutes_left_free(tmp_path: Path) -> None:
    wait = f"touch {tmp_path}/started; while [ ! -e {tmp_path}/release ]; do sleep 0.05; done"
    earlier = load(
        write_schedule(
            tmp_path / "a.toml", [f'name = "long"\ncron = "* * * * *"\ncommand = "{wait}"']
        )
    )
    shared = [f'name = "s{i}"\ncron = "* * * * *"\non_one_server = true\ncommand = "true"'
              for i in range(4)]  # fmt: skip
    later = load(write_schedule(tmp_path / "b.toml", shared, "[cronctl]\nlock_dir_shared = true\n"))
    assert not earlier.errors and not later.errors
    ctx = local_context(tmp_path, tracker=Tracker(), max_parallel=4, warn=lambda _: None)
    first = threading.Thread(target=run_once, args=(earlier, T0, changed(ctx, clock=lambda: T0)))
    first.start()
    try:
        wait_for((tmp_path / "started").exists, "the earlier minute's task to start")
        asked = _Asked(ctx.lock_dir, host=ctx.host, pid=os.getpid())
        asked.limits = []
        t1 = T0 + timedelta(minutes=1)
        report = run_once(later, t1, changed(ctx, clock=lambda: t1, coord=asked))
    finally:
        (tmp_path / "release").touch()
        first.join(30)
    assert {r.outcome for r in report.runs} == {"ok"}
    # One of the four slots is the earlier minute's: three claimed at first, not four.
    assert asked.limits[0] == 3
