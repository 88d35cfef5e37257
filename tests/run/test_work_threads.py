"""`work` starts its ticks and their workers on threads it keeps for reuse (execution.pool),
and keeps a connection to state.db between ticks so that the boundary's commit rewrites the
WAL in place (Worker._hold_wal, Store.checkpoint)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronctl.edge.process.runner import start as start_command
from cronctl.edge.schedfiles import load_paths
from cronctl.run.context import RunContext, new_thread
from cronctl.run.once import run_once
from cronctl.run.pool import Pool, _Pooled
from cronctl.run.work import Worker
from tests.helpers import ledger_task, local_context, wait_for, write_schedule

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def test_a_pooled_thread_runs_the_next_job_once_its_job_has_returned() -> None:
    pool = Pool()
    seen: list[int] = []
    first = pool.spawn(lambda: seen.append(threading.get_ident()), "first")
    first.join()
    second = pool.spawn(lambda: seen.append(threading.get_ident()), "second")
    second.join()
    assert not first.is_alive() and not second.is_alive()
    assert seen[0] == seen[1]


def test_a_job_runs_under_its_own_name_and_on_a_daemon_thread() -> None:
    pool = Pool()
    seen: list[tuple[str, bool]] = []

    def job() -> None:
        seen.append((threading.current_thread().name, threading.current_thread().daemon))

    pool.spawn(job, "tick-0900").join()
    assert seen == [("tick-0900", True)]


def test_jobs_handed_out_at_once_each_get_a_thread() -> None:
    pool = Pool()
    pool.warm(2)
    release = threading.Event()
    started: list[int] = []
    lock = threading.Lock()

    def job() -> None:
        with lock:
            started.append(threading.get_ident())
        release.wait(30)

    jobs = [pool.spawn(job, f"worker-{i}") for i in range(4)]  # more than were warmed
    wait_for(lambda: len(started) == 4, "four jobs to start")
    assert len(set(started)) == 4 and all(j.is_alive() for j in jobs)
    release.set()
    for j in jobs:
        j.join()
    assert not any(j.is_alive() for j in jobs)


def test_a_job_that_raises_ends_its_thread_and_the_pool_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failures: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", failures.append)
    pool = Pool()

    def boom() -> None:
        raise RuntimeError("boom")

    failing = pool.spawn(boom, "failing")
    failing.join()
    assert not failing.is_alive()
    ran: list[int] = []
    pool.spawn(lambda: ran.append(1), "next").join()
    assert ran == [1]
    # The hook runs as the thread ends, just after the job is done.
    wait_for(lambda: failures, "the excepthook")
    assert [type(f.exc_value) for f in failures] == [RuntimeError]


def test_run_starts_each_worker_on_a_thread_of_its_own(tmp_path: Path) -> None:
    assert local_context(tmp_path).world.spawn is new_thread


def _every_minute(tmp_path: Path) -> Path:
    return write_schedule(
        tmp_path / "s.toml",
        [ledger_task(f"every-{i}", tmp_path / f"every-{i}.ledger") for i in range(3)],
    )


def test_a_ticks_workers_start_their_commands_on_threads_the_worker_keeps(
    tmp_path: Path,
) -> None:
    path = _every_minute(tmp_path)
    idents: list[int] = []

    def start(spec: Any) -> Any:
        idents.append(threading.get_ident())
        return start_command(spec)

    ctx = local_context(tmp_path, start=start)
    worker = Worker(lambda: load_paths([path]), lambda: [path], ctx, lambda _r: None)
    schedule = worker.watch().schedule
    worker.check_store()
    pooled: list[set[int | None]] = []
    for minute in range(2):
        worker._start(schedule, T0 + minute * MINUTE)
        worker._threads[-1].join(30)
        # This worker's idle pooled threads only: an earlier test's pool in the same process
        # may have a thread that turns idle between the two samples.
        pooled.append({t.ident for t in threading.enumerate() if _idle_in(t, worker._pool)})
    assert worker._shutdown() == 0
    # Every start of both ticks on a thread the pool kept (idle once its job was done),
    # the second tick's on threads the first one's left: none was created for it.
    assert len(idents) == 6
    assert set(idents) <= pooled[0] == pooled[1]
    assert [_ledger_lines(tmp_path / f"every-{i}.ledger") for i in range(3)] == [2, 2, 2]


def _idle_in(thread: threading.Thread, pool: Pool) -> bool:
    return isinstance(thread, _Pooled) and thread._pool is pool and thread.name == "cronctl-pool"


def _wal(ctx: RunContext) -> Path:
    return ctx.state_dir / "state.db-wal"


def test_the_wal_outlives_a_tick_while_work_runs_and_goes_when_it_stops(tmp_path: Path) -> None:
    path = _every_minute(tmp_path)
    schedule = load_paths([path])
    ctx = local_context(tmp_path)
    run_once(schedule, T0 - MINUTE, ctx)
    assert not _wal(ctx).exists()  # the last connection to close took it
    lead = T0 - timedelta(seconds=1)
    worker = Worker(lambda: schedule, lambda: [path], ctx, lambda _r: None, clock=lambda: lead)
    ahead = worker._plan_ahead(schedule, T0)
    assert ahead is not None and ahead.store is not None
    report = run_once(schedule, T0, ctx, ahead)
    assert sorted(r.outcome for r in report.runs) == ["ok"] * 3
    assert _wal(ctx).exists()  # the tick's store closed, the held connection kept it
    worker._shutdown()
    assert not _wal(ctx).exists()


def test_the_lead_checkpoints_so_the_boundarys_commit_starts_the_wal_over(tmp_path: Path) -> None:
    tasks = [ledger_task("every", tmp_path / "every.ledger")]
    tasks += [f'name = "daily-{i}"\ncommand = "true"\ndaily_at = "03:00"' for i in range(300)]
    path = write_schedule(tmp_path / "s.toml", tasks)
    schedule = load_paths([path])
    ctx = local_context(tmp_path)
    run_once(schedule, T0 - MINUTE, ctx)
    clock = [T0]
    worker = Worker(lambda: schedule, lambda: [path], ctx, lambda _r: None, clock=lambda: clock[0])
    sizes = []
    for minute in range(3):
        now = T0 + minute * MINUTE
        clock[0] = now - timedelta(seconds=1)
        ahead = worker._plan_ahead(schedule, now)
        assert ahead is not None
        run_once(schedule, now, ctx, ahead)  # 300 quiet windows move: many pages
        sizes.append(_wal(ctx).stat().st_size)
    worker._shutdown()
    # Each tick writes about as many pages as the one before; rewritten from the WAL's
    # start after the lead's checkpoint, the file does not grow by a tick's worth each time.
    assert sizes[2] < sizes[1] * 1.5
    assert _ledger_lines(tmp_path / "every.ledger") == 4


def _ledger_lines(path: Path) -> int:
    return len(path.read_text().split())


def test_the_held_connection_follows_a_database_replaced_between_leads(tmp_path: Path) -> None:
    path = _every_minute(tmp_path)
    schedule = load_paths([path])
    ctx = local_context(tmp_path)
    run_once(schedule, T0 - MINUTE, ctx)
    lead = T0 - timedelta(seconds=1)
    worker = Worker(lambda: schedule, lambda: [path], ctx, lambda _r: None, clock=lambda: lead)
    ahead = worker._plan_ahead(schedule, T0)
    assert ahead is not None
    ahead.close()
    assert worker._wal_holder is not None
    old_holder, old_file = worker._wal_holder
    for name in ("state.db", "state.db-wal", "state.db-shm"):
        (ctx.state_dir / name).unlink(missing_ok=True)
    run_once(schedule, T0 - MINUTE, ctx)  # a new database where the old one was
    ahead = worker._plan_ahead(schedule, T0)
    assert ahead is not None
    ahead.close()
    assert worker._wal_holder is not None
    holder, opened = worker._wal_holder
    assert holder is not old_holder and opened != old_file
    assert holder.file_id() == opened
    worker._shutdown()
    assert worker._wal_holder is None


def test_the_lead_makes_the_log_directories_of_the_tasks_due_at_the_boundary(
    tmp_path: Path,
) -> None:
    tasks = [ledger_task("due", tmp_path / "due.ledger")]
    tasks += [ledger_task("later", tmp_path / "later.ledger", 'daily_at = "03:00"')]
    tasks += [ledger_task("planted", tmp_path / "planted.ledger")]
    path = write_schedule(tmp_path / "s.toml", tasks)
    schedule = load_paths([path])
    ctx = local_context(tmp_path)
    logs = ctx.state_dir / "logs"
    logs.mkdir(parents=True, mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (logs / "planted").symlink_to(elsewhere)  # never followed, by the lead or the start
    worker = Worker(
        lambda: schedule, lambda: [path], ctx, lambda _r: None, clock=lambda: T0 - MINUTE / 60
    )
    worker.check_store()  # as `work` starts: the state database made, no task run yet
    ahead = worker._plan_ahead(schedule, T0)
    assert ahead is not None
    assert (logs / "due").is_dir() and not (logs / "due").is_symlink()
    assert (logs / "due").stat().st_mode & 0o777 == 0o700
    assert not (logs / "later").exists()  # not due: its first run makes it
    report = run_once(schedule, T0, ctx, ahead)
    worker._shutdown()
    outcomes = {r.task: r.outcome for r in report.runs}
    assert outcomes["due"] == "ok" and outcomes["planted"] != "ok"
    assert list(elsewhere.iterdir()) == []
    assert _ledger_lines(tmp_path / "due.ledger") == 1
    assert not (tmp_path / "planted.ledger").exists()
