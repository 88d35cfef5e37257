"""One APScheduler 4 process of pg_share.py's fleet (run by the Python that has apscheduler,
sqlalchemy and asyncpg; never a dependency of cronctl): JOBS schedules every minute on the
shared PostgreSQL data store, each job a shell command that appends (task, minute, host,
start time) to `marks` in the working directory and sleeps, as the cronctl side's do.

    python bench/pg_share_aps.py URL HOST JOBS SLEEP MAX_CONCURRENT

URL: ``postgresql://USER@/DB?host=SOCKET_DIR``. Runs until SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from apscheduler import AsyncScheduler, ConflictPolicy, current_job
from apscheduler.datastores.sqlalchemy import SQLAlchemyDataStore
from apscheduler.eventbrokers.asyncpg import AsyncpgEventBroker
from apscheduler.triggers.cron import CronTrigger
from sqlalchemy.ext.asyncio import create_async_engine

HOST = sys.argv[2]
SLEEP = sys.argv[4]


async def job(name: str) -> None:
    """The job: its shell command, as cronctl's tasks run theirs."""
    fired = current_job.get().scheduled_fire_time
    assert fired is not None
    minute = fired.strftime("%Y-%m-%dT%H:%M:%SZ")
    mark = f'echo "{name} {minute} {HOST} $(date +%s.%N)" >> marks'
    proc = await asyncio.create_subprocess_shell(f"{mark}; sleep {SLEEP}")
    await proc.wait()


async def main() -> None:
    url, _, jobs, _, concurrent = sys.argv[1:6]
    engine = create_async_engine(url.replace("postgresql://", "postgresql+asyncpg://", 1))
    store = SQLAlchemyDataStore(engine)
    broker = AsyncpgEventBroker.from_async_sqla_engine(engine)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with AsyncScheduler(
        store, broker, identity=HOST, max_concurrent_jobs=int(concurrent)
    ) as scheduler:
        for i in range(int(jobs)):
            name = f"j{i:04d}"
            # A task each: a task runs one job at a time by default, as a cronctl task does.
            await scheduler.configure_task(name, func=job)
            await scheduler.add_schedule(
                name,
                CronTrigger(minute="*"),
                id=name,
                args=[name],
                conflict_policy=ConflictPolicy.do_nothing,
            )
        await scheduler.start_in_background()
        await stop.wait()
    await engine.dispose()


if __name__ == "__main__":
    asyncio.run(main())
