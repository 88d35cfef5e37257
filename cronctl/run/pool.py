"""Threads `work` reuses: its tick and workers wake one that exists instead of creating one
at the minute boundary, behind every thread queued for a CPU on a busy machine."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

#: Idle threads kept at most; more, after a burst of long tasks, end.
_KEEP_IDLE = 16


@dataclass(slots=True, eq=False)
class Job:
    """A function handed to a pooled thread: join() waits for it to return."""

    target: Callable[[], None]
    name: str
    done: threading.Event = field(default_factory=threading.Event)

    def join(self, timeout: float | None = None) -> None:
        self.done.wait(timeout)

    def is_alive(self) -> bool:
        return not self.done.is_set()


class Pool:
    """Threads running one Job at a time; daemons, as an idle one must not hold the process
    up (Worker._shutdown waits for the ticks)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Pooled] = []

    def spawn(self, target: Callable[[], None], name: str) -> Job:
        """Run `target` on an idle thread, or a new one."""
        job = Job(target, name)
        with self._lock:
            pooled = self._idle.pop() if self._idle else None
        fresh = pooled is None
        pooled = pooled or _Pooled(self)
        pooled.hand(job)
        if fresh:
            pooled.start()
        return job

    def warm(self, count: int) -> None:
        """Have `count` idle threads ready (so the first tick needs none created either)."""
        with self._lock:
            missing = count - len(self._idle)
        for _ in range(missing):
            pooled = _Pooled(self)
            pooled.start()
            with self._lock:
                self._idle.append(pooled)

    def _done(self, pooled: _Pooled, reuse: bool) -> bool:
        """`pooled`'s job ended: whether the thread waits for another (else it ends)."""
        with self._lock:
            if not reuse or len(self._idle) >= _KEEP_IDLE:
                return False
            self._idle.append(pooled)
            return True


class _Pooled(threading.Thread):
    """Runs the job it is handed, then offers itself to the pool."""

    def __init__(self, pool: Pool) -> None:
        super().__init__(name="cronctl-pool", daemon=True)
        self._pool = pool
        self._ready = threading.Condition(threading.Lock())
        self._job: Job | None = None

    def hand(self, job: Job) -> None:
        with self._ready:
            self._job = job
            self._ready.notify()

    def run(self) -> None:
        while True:
            with self._ready:
                while self._job is None:
                    self._ready.wait()
                job, self._job = self._job, None
            self.name = job.name
            try:
                job.target()
            except BaseException:
                self._pool._done(self, reuse=False)
                job.done.set()
                raise  # the thread ends, as a thread of its own would
            self.name = "cronctl-pool"
            # Idle before the job is done: whoever joined it finds the thread free.
            reuse = self._pool._done(self, reuse=True)
            job.done.set()
            if not reuse:
                return
