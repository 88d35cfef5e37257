"""Requests that ask the dashboard the same question at once share one computation."""

from __future__ import annotations

import threading
import time

import pytest

from cronctl.web.shared_answers import SharedAnswers


def _ask_together(shared: SharedAnswers[int], compute: object, callers: int) -> list[object]:
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
    time.sleep(0.3)  # they are all at get() by now: the first computes, the others wait
    return [threads, answers]


def test_callers_of_the_same_key_share_one_computation_then_it_is_computed_anew() -> None:
    shared: SharedAnswers[int] = SharedAnswers()
    release = threading.Event()
    started = threading.Event()
    calls: list[int] = []

    def compute() -> int:
        calls.append(1)
        started.set()
        release.wait(10)
        return 42

    threads, answers = _ask_together(shared, compute, 20)
    assert started.wait(10)
    release.set()
    for thread in threads:  # type: ignore[attr-defined]
        thread.join(10)
    assert answers == [42] * 20
    assert len(calls) < 20  # those that came while it ran waited for it
    assert shared.get("k", lambda: 7) == 7  # nothing is kept once answered


def test_every_waiting_caller_hears_the_error() -> None:
    shared: SharedAnswers[int] = SharedAnswers()
    release = threading.Event()

    def compute() -> int:
        release.wait(10)
        raise ValueError("the state is gone")

    threads, answers = _ask_together(shared, compute, 10)
    release.set()
    for thread in threads:  # type: ignore[attr-defined]
        thread.join(10)
    assert len(answers) == 10
    assert all(isinstance(a, ValueError) for a in answers)
    with pytest.raises(KeyError):
        shared.get("k", lambda: {}["x"])
