"""One computation for the requests that ask the same question at the same time (fifty
viewers of an overview cost one); nothing is kept once answered."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Generic, TypeVar

T = TypeVar("T")


class SharedAnswers(Generic[T]):
    """``get(key, compute)``: its answer (or exception), shared by concurrent callers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[Hashable, Future[T]] = {}

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        with self._lock:
            future = self._running.get(key)
            mine = future is None
            if future is None:
                future = self._running[key] = Future()
        if not mine:
            return future.result()
        try:
            future.set_result(compute())
        except BaseException as exc:
            future.set_exception(exc)
            raise
        finally:
            with self._lock:
                del self._running[key]
        return future.result()
