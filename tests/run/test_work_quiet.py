"""`work` writes at the boundary only what the due starts need (their rows, their windows);
the quiet tasks' windows (nothing due, only the minute moves) follow in a second transaction
once the due tasks have started, as a compare-and-set; so do the first windows of recurring
tasks seen for the first time with nothing due, each inserted only where no row exists yet. A
second writer meanwhile keeps what it wrote; a crash between the two leaves windows that the
next tick scans again (or tasks it sees for the first time again), and it neither misses nor
doubles an occurrence."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronctl.core.model import Schedule
from cronctl.edge.process.runner import start as start_command
from cronctl.edge.safefiles import ensure_private_dir
from cronctl.edge.schedfiles import load_paths
from cronctl.edge.state.store import Store
from cronctl.run import planning
from cronctl.run.context import RunContext
from cronctl.run.once import run_once
from cronctl.run.planning import Ahead
from cronctl.run.work import Worker
from tests.helpers import (
    Cli,
    changed,
    ledger_task,
    local_context,
    plan_ahead_at,
    wait_for,
    write_schedule,
)

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def _every_soon_daily(tmp_path: Path, soon: str = "cron = '1 9 * * *'") -> Path:
    """`every` is due every minute; `soon` (at 09:01) and `daily` (03:00) are quiet at 09:00."""
    tasks = [
        ledger_task("every", tmp_path / "every.ledger"),
        ledger_task("soon", tmp_path / "soon.ledger", soon),
        ledger_task("daily", tmp_path / "daily.ledger", "daily_at = '03:00'"),
    ]
    return write_schedule(tmp_path / "s.toml", tasks)


def _windows(root: Path) -> dict[str, datetime]:
    """The windows as committed, read through a connection of its own."""
    with Store.open(root / "state") as store:
        return {name: s.last_occurrence for name, s in store.states().items()}


def _other_run(cli: Cli, path: Path, now: str, ctx: RunContext) -> subprocess.CompletedProcess[str]:
    """Another cronctl, `run --now now` on the same state and lock dirs."""
    state, locks = ("--state-dir", str(ctx.state_dir)), ("--lock-dir", str(ctx.lock_dir))
    return cli("run", "-f", str(path), "--now", now, *state, *locks)


def _ledger(root: Path, name: str) -> list[str]:
    path = root / f"{name}.ledger"
    return path.read_text().split() if path.exists() else []


def test_the_quiet_windows_are_written_once_the_due_task_has_started(tmp_path: Path) -> None:
    schedule = load_paths([_every_soon_daily(tmp_path)])
    ctx = local_context(tmp_path)
    run_once(schedule, T0 - MINUTE, ctx)
    seen: dict[str, Any] = {}

    def start(spec: Any) -> Any:
        seen["windows"] = _windows(tmp_path)
        with Store.open(ctx.state_dir) as other:
            seen["every"] = other.history("every", limit=1)[0].outcome
        return start_command(spec)

    waits: list[tuple[float, dict[str, datetime]]] = []

    def sleep(seconds: float) -> None:
        waits.append((seconds, _windows(tmp_path)))

    ahead = plan_ahead_at(schedule, tmp_path, T0)
    run_once(schedule, T0, changed(ctx, start=start, sleep=sleep), ahead)
    # At the start: the due task's window and its "running" mark committed, nothing else.
    assert seen == {
        "windows": {"every": T0, "soon": T0 - MINUTE, "daily": T0 - MINUTE},
        "every": "running",
    }
    # Then a short wait (the CPUs to the commands just started), then the quiet windows.
    assert waits == [(planning.QUIET_AFTER_S, seen["windows"])]
    assert _windows(tmp_path) == {"every": T0, "soon": T0, "daily": T0}


def _windows_at_starts(schedule: Schedule, root: Path, now: datetime) -> list[dict[str, datetime]]:
    """`work`'s tick at `now`, planned ahead: the windows committed as each command starts."""
    seen: list[dict[str, datetime]] = []

    def start(spec: Any) -> Any:
        seen.append(_windows(root))
        return start_command(spec)

    run_once(schedule, now, local_context(root, start=start), plan_ahead_at(schedule, root, now))
    return seen


def test_first_windows_are_written_once_the_due_task_has_started(tmp_path: Path) -> None:
    # An empty state dir: every task is seen for the first time at 09:00.
    schedule = load_paths([_every_soon_daily(tmp_path)])
    assert _windows_at_starts(schedule, tmp_path, T0) == [
        {"every": T0}
    ]  # only the due task's first window before its start
    assert _windows(tmp_path) == {"every": T0, "soon": T0, "daily": T0}
    assert _ledger(tmp_path, "every") == ["2026-08-03T09:00:00Z"]


def test_a_one_shot_tasks_first_window_is_written_before_the_starts(tmp_path: Path) -> None:
    # Seen again for the first time after its instant, an `at` task would never run: its
    # first window is not left for the second transaction.
    tasks = [
        ledger_task("every", tmp_path / "every.ledger"),
        ledger_task("once", tmp_path / "once.ledger", "at = 2026-08-03T09:05:00Z"),
    ]
    schedule = load_paths([write_schedule(tmp_path / "s.toml", tasks)])
    assert _windows_at_starts(schedule, tmp_path, T0) == [{"every": T0, "once": T0}]


def test_a_tick_with_nothing_due_writes_the_first_windows_in_its_one_transaction(
    tmp_path: Path,
) -> None:
    tasks = [
        ledger_task("soon", tmp_path / "soon.ledger", "cron = '1 9 * * *'"),
        ledger_task("daily", tmp_path / "daily.ledger", "daily_at = '03:00'"),
    ]
    schedule = load_paths([write_schedule(tmp_path / "s.toml", tasks)])
    ctx = local_context(tmp_path)
    assert run_once(schedule, T0, ctx, plan_ahead_at(schedule, tmp_path, T0)).runs == []
    assert _windows(tmp_path) == {"soon": T0, "daily": T0}


def test_run_writes_every_window_in_its_one_transaction(tmp_path: Path) -> None:
    # Without decisions made ahead (`run`), nothing is left for a second transaction.
    schedule = load_paths([_every_soon_daily(tmp_path)])
    ctx = local_context(tmp_path)
    run_once(schedule, T0 - MINUTE, ctx)
    seen: list[dict[str, datetime]] = []

    def start(spec: Any) -> Any:
        seen.append(_windows(tmp_path))
        return start_command(spec)

    run_once(schedule, T0, changed(ctx, start=start))
    assert seen == [{"every": T0, "soon": T0, "daily": T0}]


def test_the_quiet_windows_do_not_wait_for_the_due_task_to_end(tmp_path: Path) -> None:
    go = tmp_path / "go"
    tasks = [
        f'name = "long"\ncommand = "while [ ! -e {go} ]; do sleep 0.01; done"\nevery_minute = true',
        ledger_task("daily", tmp_path / "daily.ledger", "daily_at = '03:00'"),
    ]
    schedule = load_paths([write_schedule(tmp_path / "s.toml", tasks)])
    ctx = local_context(tmp_path)
    go.touch()
    run_once(schedule, T0 - MINUTE, ctx)
    go.unlink()
    ahead = plan_ahead_at(schedule, tmp_path, T0)
    tick = threading.Thread(target=run_once, args=(schedule, T0, ctx, ahead))
    tick.start()
    try:
        wait_for(lambda: _windows(tmp_path)["daily"] == T0, "daily's window to be committed")
        windows = _windows(tmp_path)
        wait_for(lambda: ahead.spent is None, "the tick to drop what planning used")
        # Neither the decisions made ahead nor those planning used are kept while it runs.
        held = (ahead.decisions, ahead.spent, ahead.quiet, ahead.fresh)
    finally:
        go.touch()
        tick.join()
    assert windows == {"long": T0, "daily": T0}  # while `long` still runs
    assert held == (None, None, [], [])


def _tick_with_a_run_between(
    cli: Cli, tmp_path: Path, other: Callable[[], Path], now: str, first: bool = False
) -> tuple[Schedule, RunContext]:
    """`work`'s 09:00 tick (08:59 dealt with before, unless `first`: an empty state dir) with,
    between its two transactions (as its due task starts), another cronctl's `run --now now`
    of the file `other()` writes."""
    schedule = load_paths([_every_soon_daily(tmp_path)])
    ctx = local_context(tmp_path)
    if not first:
        run_once(schedule, T0 - MINUTE, ctx)
    others: list[subprocess.CompletedProcess[str]] = []

    def start(spec: Any) -> Any:
        if not others:
            others.append(_other_run(cli, other(), now, ctx))
        return start_command(spec)

    run_once(schedule, T0, changed(ctx, start=start), plan_ahead_at(schedule, tmp_path, T0))
    assert others[0].returncode == 0, others[0].stderr
    return schedule, ctx


@pytest.mark.parametrize("first", [False, True], ids=["moved", "first"])
def test_a_late_quiet_write_never_moves_back_a_window_another_process_advanced(
    cli: Cli, tmp_path: Path, first: bool
) -> None:
    # The other cronctl deals with 09:01 (and runs `soon`) before the quiet windows are written
    # (`first`: before `work` writes the first windows, where it found no rows).
    schedule, ctx = _tick_with_a_run_between(
        cli, tmp_path, lambda: tmp_path / "s.toml", "2026-08-03T09:01:00Z", first
    )
    assert _windows(tmp_path) == {"every": T0 + MINUTE, "soon": T0 + MINUTE, "daily": T0 + MINUTE}
    # `work`'s own 09:01 tick finds it dealt with: `soon` ran once, by the other process.
    run_once(schedule, T0 + MINUTE, ctx, plan_ahead_at(schedule, tmp_path, T0 + MINUTE))
    assert _ledger(tmp_path, "soon") == ["2026-08-03T09:01:00Z"]
    assert sorted(_ledger(tmp_path, "every")) == [
        *(["2026-08-03T08:59:00Z"] if not first else []),
        "2026-08-03T09:00:00Z",
        "2026-08-03T09:01:00Z",
    ]


@pytest.mark.parametrize("first", [False, True], ids=["moved", "first"])
def test_a_late_quiet_write_keeps_the_window_of_a_schedule_edited_meanwhile(
    cli: Cli, tmp_path: Path, first: bool
) -> None:
    edited = tmp_path / "edited.toml"

    def edit() -> Path:  # `daily` moved to 04:00, as the other cronctl reads it
        tasks = [
            ledger_task("every", tmp_path / "every.ledger"),
            ledger_task("soon", tmp_path / "soon.ledger", "cron = '1 9 * * *'"),
            ledger_task("daily", tmp_path / "daily.ledger", "daily_at = '04:00'"),
        ]
        return write_schedule(edited, tasks)

    schedule, ctx = _tick_with_a_run_between(cli, tmp_path, edit, "2026-08-03T09:00:00Z", first)
    with Store.open(ctx.state_dir) as store:
        daily = store.states()["daily"]
    assert daily.fingerprint == load_paths([edited]).tasks[2].fingerprint
    assert daily.fingerprint != schedule.tasks[2].fingerprint


# Run in another process: one tick planned ahead, killed (SIGKILL) between its two
# transactions, that is once its due task has started and before the quiet windows are written.
_KILLED_BETWEEN = textwrap.dedent(
    """
    import os, signal, sys
    from datetime import datetime
    from pathlib import Path
    from cronctl.edge.schedfiles import load_paths
    from cronctl.edge.state.store import Store
    from cronctl.coord import open_coordinator
    from cronctl.run.context import RunContext
    from cronctl.run.once import run_once
    from cronctl.run import planning
    schedule_path, root, host, now = sys.argv[1:]
    now = datetime.fromisoformat(now)
    locks = Path(root) / "state" / "locks"
    ctx = RunContext(
        state_dir=Path(root) / "state", lock_dir=locks, host=host, env={},
        coord=open_coordinator(None, locks, host=host, pid=os.getpid()),
    )
    schedule = load_paths([Path(schedule_path)])
    with Store.open(ctx.state_dir) as store:
        stored = store.stored_states()
    ahead = planning.plan_ahead(schedule, stored, store.parse_state, now)
    planning.advance_quiet = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
    run_once(schedule, now, ctx, ahead)
    """
)


def _killed_between(path: Path, root: Path, ctx: RunContext, now: datetime) -> None:
    """`work`'s tick at `now`, planned ahead, killed between its two transactions."""
    ensure_private_dir(ctx.state_dir)
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_BETWEEN, str(path), str(root), ctx.host, now.isoformat()],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr


def _wait_for_ledger(root: Path, name: str, lines: int) -> None:
    """The command started by a killed cronctl outlives it: wait until it has written."""
    wait_for(lambda: len(_ledger(root, name)) >= lines, f"{lines} lines in {name}'s ledger")


@pytest.mark.parametrize("first", [False, True], ids=["moved", "first"])
def test_a_kill_between_the_two_transactions_neither_misses_nor_doubles_an_occurrence(
    tmp_path: Path, first: bool
) -> None:
    # `first`: the killed tick is the first on an empty state dir (every task first seen).
    schedule = load_paths([_every_soon_daily(tmp_path)])
    ctx = local_context(tmp_path)
    if not first:
        run_once(schedule, T0 - MINUTE, ctx)
    _killed_between(tmp_path / "s.toml", tmp_path, ctx, T0)
    # The tick committed its due task's window and "running" mark; the quiet ones are older,
    # or (first seen) not written at all.
    before = {} if first else {"soon": T0 - MINUTE, "daily": T0 - MINUTE}
    assert _windows(tmp_path) == {"every": T0, **before}
    _wait_for_ledger(tmp_path, "every", 1 if first else 2)
    report = run_once(schedule, T0 + MINUTE, ctx, plan_ahead_at(schedule, tmp_path, T0 + MINUTE))
    got = sorted((r.task, r.occurrence, r.outcome) for r in report.runs)
    # The killed tick's run is recovered now as of unknown outcome, unless it ended, and was
    # recorded as it ended, before the kill came; either way it never runs again.
    killed = [("every", T0, "error")] if got and got[0][1] == T0 else []
    assert got == [
        *killed,
        ("every", T0 + MINUTE, "ok"),
        ("soon", T0 + MINUTE, "ok"),  # neither missed (the window was older) nor doubled
    ]
    with Store.open(ctx.state_dir) as store:
        assert [r.outcome for r in store.runs_between("every", T0, T0 + MINUTE)] in (
            ["error"],
            ["ok"],
        )
    assert _windows(tmp_path) == {"every": T0 + MINUTE, "soon": T0 + MINUTE, "daily": T0 + MINUTE}
    assert _ledger(tmp_path, "every") == [
        f"2026-08-03T{t}:00Z" for t in ("08:59", "09:00", "09:01")[int(first) :]
    ]
    assert _ledger(tmp_path, "soon") == ["2026-08-03T09:01:00Z"]
    assert _ledger(tmp_path, "daily") == []


def test_a_first_window_lost_to_a_kill_makes_a_late_tick_see_the_task_for_the_first_time(
    tmp_path: Path,
) -> None:
    # The difference README states: the killed 09:00 tick saw `soon` for the first time and
    # its window was never written; the next tick comes late (09:10, the machine was down),
    # so `soon` is first seen then: its 09:01 is neither run nor counted missed, as for a task
    # added at 09:10. The one-shot `once` (09:05), written with the due task, still runs.
    tasks = [
        ledger_task("every", tmp_path / "every.ledger"),
        ledger_task("soon", tmp_path / "soon.ledger", "cron = '1 9 * * *'\nmisfire = 'catch-up'"),
        ledger_task("once", tmp_path / "once.ledger", "at = 2026-08-03T09:05:00Z"),
    ]
    path = write_schedule(tmp_path / "s.toml", tasks)
    schedule = load_paths([path])
    ctx = local_context(tmp_path)
    _killed_between(path, tmp_path, ctx, T0)
    assert _windows(tmp_path) == {"every": T0, "once": T0}
    _wait_for_ledger(tmp_path, "every", 1)
    late = T0 + 10 * MINUTE
    report = run_once(schedule, late, ctx, plan_ahead_at(schedule, tmp_path, late))
    got = sorted((r.task, r.occurrence, r.outcome) for r in report.runs if r.task != "every")
    assert got == [("once", T0 + 5 * MINUTE, "ok")]
    assert _windows(tmp_path)["soon"] == late
    assert _ledger(tmp_path, "soon") == []
    assert _ledger(tmp_path, "once") == ["2026-08-03T09:05:00Z"]


def _lose_quiet_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every tick ends as if killed right after its first transaction (as far as state goes)."""

    def lost(store: Store, ahead: Ahead, ctx: RunContext) -> None:
        ahead.quiet = []

    monkeypatch.setattr(planning, "advance_quiet", lost)


def test_ticks_whose_quiet_writes_are_lost_deal_with_the_same_occurrences(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Through an edit and a clock that steps back ten minutes and catches up, ticks whose
    # second transaction never happens run, skip and miss the same occurrences as ticks
    # whose does (a quiet window left at an older minute had nothing due in between).
    minutes = [0, 1, 2, 3, -7, 4, 5, 6, 7]
    seen: dict[bool, list[tuple[str, datetime, str]]] = {}
    for lose in (False, True):
        root = tmp_path / f"lose-{lose}"
        root.mkdir()
        path = _every_soon_daily(root, soon="cron = '*/3 * * * *'\ntimezone = 'Europe/Berlin'")
        schedule = load_paths([path])
        ctx = local_context(root)
        rows = [(r.task, r.occurrence, r.outcome) for r in run_once(schedule, T0, ctx).runs]
        if lose:
            _lose_quiet_writes(monkeypatch)
        for minute in minutes[1:]:
            now = T0 + minute * MINUTE
            if minute == 3:  # `daily` edited: every five minutes from now on
                write_schedule(
                    path,
                    [
                        ledger_task("every", root / "every.ledger"),
                        ledger_task("soon", root / "soon.ledger", "cron = '*/3 * * * *'\n"
                              "timezone = 'Europe/Berlin'"),
                        ledger_task("daily", root / "daily.ledger", "cron = '*/5 * * * *'"),
                    ],
                )  # fmt: skip
                schedule = load_paths([path])
            ahead = plan_ahead_at(schedule, root, now)
            rows += [
                (r.task, r.occurrence, r.outcome) for r in run_once(schedule, now, ctx, ahead).runs
            ]
        monkeypatch.undo()
        with Store.open(ctx.state_dir) as store:
            assert not store.unfinished_runs(None)
        seen[lose] = sorted(rows)
    assert seen[True] == seen[False]
    assert ("daily", T0 + 5 * MINUTE, "ok") in seen[True]
    assert ("soon", T0 + 6 * MINUTE, "ok") in seen[True]


def test_work_plans_every_task_ahead_from_the_stored_rows(tmp_path: Path) -> None:
    schedule = load_paths([_every_soon_daily(tmp_path)])
    ctx = local_context(tmp_path)
    run_once(schedule, T0 - MINUTE, ctx)
    lead = T0 - timedelta(seconds=1)  # its clock, a second before the boundary
    worker = Worker(lambda: schedule, lambda: [], ctx, lambda _r: None, clock=lambda: lead)
    ahead = worker._plan_ahead(schedule, T0)
    assert ahead is not None
    assert sorted(ahead.decided) == ["daily", "every", "soon"]
    assert ahead.decided["every"][2].run == [T0]


def _worker_ahead(schedule: Schedule, ctx: RunContext, now: datetime) -> Ahead:
    """What `work` plans in its lead, a second before `now`: its store kept for the tick."""
    lead = now - timedelta(seconds=1)
    worker = Worker(lambda: schedule, lambda: [], ctx, lambda _r: None, clock=lambda: lead)
    ahead = worker._plan_ahead(schedule, now)
    assert ahead is not None
    assert ahead.store is not None
    return ahead


def test_the_store_kept_from_the_lead_sees_a_commit_made_since(cli: Cli, tmp_path: Path) -> None:
    path = _every_soon_daily(tmp_path)
    schedule = load_paths([path])
    ctx = local_context(tmp_path)
    run_once(schedule, T0 - MINUTE, ctx)
    ahead = _worker_ahead(schedule, ctx, T0)
    ran = _other_run(cli, path, "2026-08-03T09:00:00Z", ctx)  # after the lead's snapshot
    assert ran.returncode == 0, ran.stderr
    assert run_once(schedule, T0, ctx, ahead).runs == []  # 09:00 dealt with: not run again
    assert _ledger(tmp_path, "every") == ["2026-08-03T08:59:00Z", "2026-08-03T09:00:00Z"]


def test_a_database_replaced_after_the_lead_is_not_written_through_the_kept_store(
    tmp_path: Path,
) -> None:
    schedule = load_paths([_every_soon_daily(tmp_path)])
    ctx = local_context(tmp_path)
    run_once(schedule, T0 - MINUTE, ctx)
    ahead = _worker_ahead(schedule, ctx, T0)
    db = ctx.state_dir / "state.db"
    for name in ("state.db", "state.db-wal", "state.db-shm"):
        (ctx.state_dir / name).unlink(missing_ok=True)
    # A fresh database where the old one was: the tick plans from it (first sight of each
    # task at 09:00), never from the kept connection to the old file.
    report = run_once(schedule, T0, ctx, ahead)
    assert sorted((r.task, r.outcome) for r in report.runs) == [("every", "ok")]
    assert db.exists()
    assert _windows(tmp_path) == {"every": T0, "soon": T0, "daily": T0}
    assert ahead.store is None
