"""`cronctl work`: wakes on the minute boundary, reloads edits safely, stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cronctl.edge.schedfiles import load_paths
from cronctl.run.work import Worker
from tests.helpers import (
    Cli,
    changed,
    command_recorded,
    local_context,
    reaped,
    wait_for,
    write_schedule,
    written,
)

SLOW_TASK = (
    'name = "slow"\nevery_minute = true\nwithout_overlapping = true\n'
    "command = \"trap 'echo term > got-term; exit 0' TERM; echo $CRONCTL_OCCURRENCE >> started; "
    'sleep 120 & wait"'
)


def clock_from(start: str) -> str:
    """`python -c` code running cronctl with `work`'s clock shifted so that its first reading
    is `start` (an expression of `now`, the real time then), and going on from there: the
    real process, its threads and signals, at a chosen instant."""
    return _CLOCK_FROM.replace("{start}", start)


_CLOCK_FROM = """
import sys
from datetime import UTC, datetime, timedelta
from cronctl.run import work
from cronctl.core.minutes import minute_floor

real = work.Worker.__init__
shift = []

def clock():
    # Set at the first reading, which the loop takes just before it waits for the boundary.
    now = datetime.now(UTC)
    shift.append(shift[0] if shift else ({start}) - now)
    return now + shift[-1]

def init(self, *args, **kwargs):
    kwargs.setdefault("clock", clock)
    real(self, *args, **kwargs)

work.Worker.__init__ = init
sys.argv = ["cronctl", *sys.argv[1:]]
from cronctl.cli.main import main
main()
"""
#: Half a second before the next real minute's boundary: no waiting up to a minute for it.
NEAR_BOUNDARY = clock_from("minute_floor(now) + timedelta(seconds=59.5)")


def test_work_starts_tasks_at_the_boundary_and_forwards_sigterm(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", [SLOW_TASK])
    launched = datetime.now(UTC)
    with reaped(cli.popen_code(NEAR_BOUNDARY, "work", "--grace", "10")) as worker:
        wait_for(lambda: written(tmp_path / "started"), "the task to set its trap")
        # Past the moment `work` notes the command as running (the holder record comes just
        # after): a SIGTERM before it counted no task ("no task running, finishing").
        wait_for(lambda: command_recorded(tmp_path, "slow"), "the holder record to name it")
        # The tick ran the minute that began at the (shifted) boundary, and only that one:
        # the boundary after `work`'s first clock reading, which came after the launch and
        # before now, however slowly it started.
        (occurrence,) = (tmp_path / "started").read_text().split()
        at = datetime.fromisoformat(occurrence)
        assert at.second == 0 and at.microsecond == 0
        assert launched < at <= datetime.now(UTC) + timedelta(minutes=1)
        worker.send_signal(signal.SIGTERM)
        # A bound against hanging: unforwarded, the task would outlive the 10 s grace.
        _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert (tmp_path / "got-term").read_text() == "term\n"
    assert "signalled 1 running task" in err


def _worker(tmp_path: Path, path: Path) -> Worker:
    ctx = local_context(tmp_path)
    return Worker(
        load=lambda: load_paths([path]), paths=lambda: [path], ctx=ctx, report=lambda _report: None
    )


def test_reload_applies_a_good_edit(tmp_path: Path) -> None:
    path = write_schedule(tmp_path / "s.toml", ['name = "a"\ncommand = "true"\nhourly = true'])
    worker = _worker(tmp_path, path)
    watched = worker.watch()
    write_schedule(path, ['name = "b"\ncommand = "true"\ndaily = true'])
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    reloaded = worker.refresh(watched)
    assert [t.name for t in reloaded.schedule.tasks] == ["b"]


def test_a_broken_edit_is_reported_and_the_last_good_schedule_keeps_running(
    tmp_path: Path, capsys: object
) -> None:
    path = write_schedule(tmp_path / "s.toml", ['name = "a"\ncommand = "true"\nhourly = true'])
    worker = _worker(tmp_path, path)
    watched = worker.watch()
    path.write_text('[[task]]\nname = "a"\ncommand = "true"\ncron = "61 * * * *"\n')
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    kept = worker.refresh(watched)
    assert [t.name for t in kept.schedule.tasks] == ["a"]
    assert kept.schedule.tasks[0].schedule == "0 * * * *"
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert "schedule change not applied" in err and "s.toml:4" in err
    # The broken edit is reported once, not every minute.
    assert worker.refresh(kept) is kept


def test_work_refuses_to_start_on_a_broken_schedule(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "schedules.toml").write_text('[[task]]\nname = "x"\ncommand = "true"\n')
    result = cli("work")
    assert result.returncode == 2
    assert "schedules.toml:2" in result.stderr


def test_waiting_for_the_boundary_never_ends_before_it_even_when_the_timer_wakes_early() -> None:
    # A timer that wakes at 90 % of each sleep (or a clock slewed slow): the wait goes on
    # sleeping what is left, and ends at the boundary itself, not a hair before nor after.
    from cronctl.run.work import wait_until

    for second in (0.0, 0.2, 29.5, 59.999):
        now = [datetime(2026, 8, 3, 9, 0, tzinfo=UTC) + timedelta(seconds=second)]
        boundary = datetime(2026, 8, 3, 9, 1, tzinfo=UTC)
        sleeps: list[float] = []

        def early(seconds: float, now: list[datetime] = now, sleeps: list[float] = sleeps) -> bool:
            sleeps.append(seconds)
            now[0] += timedelta(seconds=seconds * 0.9)
            return False

        assert wait_until(boundary, lambda now=now: now[0], early, lambda: False) is False
        assert now[0] == boundary
        assert 1 < len(sleeps) < 20


def test_waiting_for_the_boundary_ends_at_once_on_a_stop() -> None:
    from cronctl.run.work import wait_until

    start = datetime(2026, 8, 3, 9, 0, 30, tzinfo=UTC)
    boundary = start + timedelta(seconds=30)
    assert wait_until(boundary, lambda: start, lambda _s: True, lambda: False) is True
    assert wait_until(boundary, lambda: start, lambda _s: False, lambda: True) is True


def test_a_slow_task_of_the_last_tick_is_not_taken_for_a_crash(tmp_path: Path) -> None:
    # `work` ticks in threads of one process, so last minute's still-running row has our pid.
    import threading

    from cronctl.edge.process.runner import CommandResult
    from cronctl.edge.state.store import Store
    from cronctl.run.once import run_once

    path = write_schedule(
        tmp_path / "s.toml", ['name = "slow"\ncommand = "x"\nevery_minute = true']
    )
    schedule = load_paths([path])
    release = threading.Event()

    starts: list[object] = []

    class Blocking:
        """The first start stands for a slow task; later ones finish at once."""

        def __init__(self) -> None:
            self.slow = not starts
            starts.append(self)

        def wait(self) -> CommandResult:
            if self.slow:
                release.wait(10)
            now = datetime.now(UTC)
            return CommandResult("ok", 0, None, now, now, 0.0, "")

        def signal(self, sig: int) -> None:
            pass

    ctx = changed(_worker(tmp_path, path)._ctx, start=lambda spec: Blocking())
    t0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)
    first = threading.Thread(target=run_once, args=(schedule, t0, ctx))
    first.start()

    def running() -> bool:
        if not (tmp_path / "state" / "state.db").exists():
            return False
        with Store.open(tmp_path / "state") as store:
            return any(r.outcome == "running" for r in store.history("slow"))

    wait_for(running, "the first run to be marked running")
    second = run_once(schedule, t0.replace(minute=1), ctx)
    release.set()
    first.join(10)
    assert [r.outcome for r in second.runs] == ["ok"]
    with Store.open(tmp_path / "state") as store:
        assert sorted(r.outcome for r in store.history("slow")) == ["ok", "ok"]
