"""Requests that ask the dashboard the same question at once share one computation."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest

from cronctl.web import shared_answers
from cronctl.web.shared_answers import SharedAnswers
from tests.helpers import wait_for


@pytest.fixture
def waiting(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """How many callers have asked for a computation's answer so far (those that wait for
    another caller's, until it is made)."""
    lock, asked = threading.Lock(), [0]

    class Counted(Future[Any]):
        def result(self, timeout: float | None = None) -> Any:
            with lock:
                asked[0] += 1
            return super().result(timeout)

    monkeypatch.setattr(shared_answers, "Future", Counted)
    return lambda: asked[0]


def _ask_together(
    shared: SharedAnswers[int], compute: object, callers: int, waiting: Callable[[], int]
) -> list[object]:
    answers: list[object] = []
    lock = threading.Lock()
    ready = threading.Barrier(callers + 1)

    def ask() -> None:
        ready.wait(10)
        try:
            answer: object = shared.get("k", compute)  # type: ignore[arg-type]
        except ValueError as exc:
            answer = exc
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=ask) for _ in range(callers)]
    for thread in threads:
        thread.start()
    ready.wait(10)
    # The first computes (until the test lets it end), the others wait for its answer.
    wait_for(lambda: waiting() == callers - 1, "every other caller to wait")
    return [threads, answers]


def test_callers_of_the_same_key_share_one_computation_then_it_is_computed_anew(
    waiting: Callable[[], int],
) -> None:
    shared: SharedAnswers[int] = SharedAnswers()
    release = threading.Event()
    started = threading.Event()
    calls: list[int] = []

    def compute() -> int:
        calls.append(1)
        started.set()
        release.wait(10)
        return 42

    threads, answers = _ask_together(shared, compute, 20, waiting)
    assert started.wait(10)
    release.set()
    for thread in threads:  # type: ignore[attr-defined]
        thread.join(10)
    assert answers == [42] * 20
    assert len(calls) == 1  # those that came while it ran waited for it
    assert shared.get("k", lambda: 7) == 7  # nothing is kept once answered


def test_every_waiting_caller_hears_the_error(waiting: Callable[[], int]) -> None:
    shared: SharedAnswers[int] = SharedAnswers()
    release = threading.Event()

    def compute() -> int:
        release.wait(10)
        raise ValueError("the state is gone")

    threads, answers = _ask_together(shared, compute, 10, waiting)
    release.set()
    for thread in threads:  # type: ignore[attr-defined]
        thread.join(10)
    assert len(answers) == 10
    assert all(isinstance(a, ValueError) for a in answers)
    with pytest.raises(KeyError):
        shared.get("k", lambda: {}["x"])
