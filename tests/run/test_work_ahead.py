"""`work` decides each task's minute just before the boundary (plan_ahead); at the boundary a
decision is used only if the task and its state are still what it was decided from."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cronctl.coord.files.adapter import FilesCoordinator
from cronctl.edge.safefiles import ensure_private_dir
from cronctl.edge.schedfiles import load_paths
from cronctl.edge.state.store import Store, StoredState, TaskState
from cronctl.run.once import run_once
from cronctl.run.planning import plan_ahead
from tests.helpers import Cli, ledger_task, local_context, plan_ahead_at, write_schedule

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def test_a_decision_made_ahead_is_not_used_when_another_process_dealt_with_the_minute(
    cli: Cli, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    path = write_schedule(tmp_path / "s.toml", [ledger_task("a", ledger)])
    schedule = load_paths([path])
    ctx = local_context(tmp_path)
    run_once(schedule, T0 - MINUTE, ctx)  # 08:59 dealt with
    ahead = plan_ahead_at(schedule, tmp_path, T0)  # from that: 09:00 is due
    assert ahead.decided["a"][2].run == [T0]
    # Between the snapshot and the boundary, another cronctl deals with 09:00.
    ran = cli(
        "run", "-f", str(path), "--now", "2026-08-03T09:00:00Z",
        "--state-dir", str(ctx.state_dir), "--lock-dir", str(ctx.lock_dir),
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    report = run_once(schedule, T0, ctx, ahead)
    assert report.runs == []
    assert ledger.read_text().split() == ["2026-08-03T08:59:00Z", "2026-08-03T09:00:00Z"]
    with Store.open(ctx.state_dir) as store:
        assert store.states()["a"].last_occurrence == T0


def test_a_decision_made_ahead_is_not_used_for_a_task_whose_schedule_changed(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger"
    path = write_schedule(tmp_path / "s.toml", [ledger_task("a", ledger, "hourly_at = 30")])
    before = load_paths([path])
    ctx = local_context(tmp_path)
    run_once(before, T0 - MINUTE, ctx)
    ahead = plan_ahead_at(before, tmp_path, T0)  # hourly at :30: nothing at 09:00
    assert ahead.decided["a"][2].run == []
    write_schedule(path, [ledger_task("a", ledger)])  # the edit: every minute
    after = load_paths([path])
    report = run_once(after, T0, ctx, ahead)
    assert [(r.task, r.occurrence, r.outcome) for r in report.runs] == [("a", T0, "ok")]
    with Store.open(ctx.state_dir) as store:
        state = store.states()["a"]
    assert state.fingerprint == after.tasks[0].fingerprint != before.tasks[0].fingerprint


def test_a_decision_made_ahead_for_another_minute_is_not_used(tmp_path: Path) -> None:
    # A tick that comes late or early (a clock step) plans its own minute afresh.
    ledger = tmp_path / "ledger"
    path = write_schedule(tmp_path / "s.toml", [ledger_task("a", ledger)])
    schedule = load_paths([path])
    ctx = local_context(tmp_path)
    run_once(schedule, T0 - MINUTE, ctx)
    ahead = plan_ahead_at(schedule, tmp_path, T0)
    report = run_once(schedule, T0 + MINUTE, ctx, ahead)
    runs = sorted((r.occurrence, r.outcome) for r in report.runs)
    assert runs == [(T0, "missed"), (T0 + MINUTE, "ok")]  # coalesced, as at the boundary
    assert ahead.take(T0) is None  # handed over (and dropped) once


def test_a_paused_tasks_dropped_occurrences_are_skipped_not_missed_when_decided_ahead(
    tmp_path: Path,
) -> None:
    # The decision ahead counts 08:57-08:59 missed; the pause, read at the boundary, makes
    # them skipped (MISSED used to grow while a task was paused).
    ledger = tmp_path / "ledger"
    path = write_schedule(tmp_path / "s.toml", [ledger_task("a", ledger)])
    schedule = load_paths([path])
    ctx = local_context(tmp_path)
    run_once(schedule, T0 - 4 * MINUTE, ctx)
    ahead = plan_ahead_at(schedule, tmp_path, T0)
    assert ahead.decided["a"][2].missed_count == 3
    coord = FilesCoordinator(ctx.lock_dir, host="test", pid=1)
    coord.set_pause("a", reason="move", now=T0, user="ops")
    report = run_once(schedule, T0, ctx, ahead)
    assert {r.outcome for r in report.runs} == {"skipped: paused"} and len(report.runs) == 4
    with Store.open(ctx.state_dir) as store:
        assert store.states()["a"].missed_total == 0
    assert ledger.read_text().split() == ["2026-08-03T08:56:00Z"]


def test_a_tick_planned_ahead_deals_with_the_same_occurrences_as_one_planned_at_the_boundary(
    tmp_path: Path,
) -> None:
    tasks = [
        ledger_task("every", tmp_path / "every"),
        ledger_task("quiet", tmp_path / "quiet", "daily_at = '03:00'"),
        ledger_task("berlin", tmp_path / "b", "cron = '*/2 * * * *'\ntimezone = 'Europe/Berlin'"),
    ]  # fmt: skip
    path = write_schedule(tmp_path / "s.toml", tasks)
    schedule = load_paths([path])
    seen: dict[bool, list[tuple[str, datetime, str]]] = {}
    for early in (False, True):
        root = tmp_path / f"early-{early}"
        root.mkdir()
        ctx = local_context(root)
        rows = []
        for k in range(-1, 4):
            now = T0 + k * MINUTE
            ahead = plan_ahead_at(schedule, root, now) if early and k >= 0 else None
            rows += [
                (r.task, r.occurrence, r.outcome) for r in run_once(schedule, now, ctx, ahead).runs
            ]
        with Store.open(ctx.state_dir) as store:
            rows += [(s.name, s.last_occurrence, s.fingerprint) for s in store.states().values()]
        seen[early] = sorted(rows)
    assert seen[True] == seen[False]
    assert ("berlin", T0 + 2 * MINUTE, "ok") in seen[True]


def _no_parse(row: StoredState) -> TaskState:
    raise AssertionError(f"no stored row to parse: {row!r}")


def test_planning_ahead_stops_when_told_and_the_tasks_left_are_planned_at_the_boundary(
    tmp_path: Path,
) -> None:
    ledgers = [tmp_path / f"l{i}" for i in range(120)]
    path = write_schedule(
        tmp_path / "s.toml", [ledger_task(f"t{i}", ledger) for i, ledger in enumerate(ledgers)]
    )
    schedule = load_paths([path])
    calls = iter(range(10))
    ahead = plan_ahead(
        schedule, {}, _no_parse, T0, stop=lambda: next(calls) >= 1
    )  # after 100 tasks
    assert len(ahead.decided) == 100
    ctx = local_context(tmp_path)
    report = run_once(schedule, T0, ctx, ahead)
    assert len([r for r in report.runs if r.outcome == "ok"]) == 120


# Run in a fresh interpreter: `work`'s first tick, once `work` has imported (and compiled)
# what it does before its first boundary; prints the cronctl modules imported and the code
# compiled from the tick's start to its first command's.
_FIRST_TICK_IMPORTS = textwrap.dedent(
    """
    import os, sys
    from datetime import datetime
    from pathlib import Path
    from cronctl.edge.schedfiles import load_paths
    from cronctl.coord import open_coordinator
    from cronctl.edge.process.runner import start as start_command
    from cronctl.run.context import RunContext, World
    from cronctl.run.once import run_once
    import cronctl.run.work  # what `work` has imported before its first boundary
    schedule_path, state, now = sys.argv[1:]
    seen, compiled, ticking = [], [], []

    def start(spec):
        if not ticking:
            return start_command(spec)
        ticking.clear()
        seen.extend(sorted(m for m in set(sys.modules) - before if m.startswith("cronctl")))
        seen.extend(compiled)
        return start_command(spec)

    def hook(event, args):
        if event == "compile" and ticking:
            compiled.append("compiled:" + repr(args[0])[:60])

    locks = Path(state) / "locks"
    ctx = RunContext(
        state_dir=Path(state), lock_dir=locks, host="test", env={}, world=World(start=start),
        coord=open_coordinator(None, locks, host="test", pid=os.getpid()),
    )
    schedule = load_paths([Path(schedule_path)])
    before = set(sys.modules)
    sys.addaudithook(hook)
    ticking.append(True)
    run_once(schedule, datetime.fromisoformat(now), ctx)
    print(" ".join(seen) or "nothing")
    """
)


def test_works_first_tick_imports_nothing_before_its_first_start(tmp_path: Path) -> None:
    # An import at the boundary delays the start (the file coordinator and the outbox: ~1.5
    # ms), as does code compiled on first use; `work` does both before its first boundary.
    path = write_schedule(tmp_path / "s.toml", [ledger_task("a", tmp_path / "ledger")])
    state = ensure_private_dir(tmp_path / "state")
    ran = subprocess.run(
        [sys.executable, "-c", _FIRST_TICK_IMPORTS, str(path), str(state), T0.isoformat()],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["nothing"]
    assert (tmp_path / "ledger").read_text().split() == ["2026-08-03T09:00:00Z"]
