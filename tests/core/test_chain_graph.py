"""The chain graph (core/chains.py): roots, depth, cycles, the upstream occurrences."""

from __future__ import annotations

import doctest
from dataclasses import replace
from datetime import UTC, datetime

from cronctl.core import chains
from cronctl.core.chains import Chains, read_after
from cronctl.core.model import Task
from tests.helpers import make_task


def _after(name: str, *after: str) -> Task:
    return replace(make_task("0 2 * * *", name=name), cron=None, schedule_key="after", after=after)


def test_the_doctests_hold() -> None:
    assert doctest.testmod(chains).failed == 0


def test_a_diamond_has_one_root_and_its_longest_path_as_depth() -> None:
    graph = Chains(
        [
            make_task("0 2 * * *", name="extract"),
            _after("a", "extract"),
            _after("b", "a"),
            _after("join", "extract", "b"),
        ]
    )
    assert graph.roots("join") == ("extract",)
    assert graph.depth("join") == 3
    assert graph.depth("extract") == 0
    assert graph.downstream("extract") == ("a", "join")
    assert graph.upstream("join") == ("extract", "b")
    assert graph.cycles() == []


def test_a_task_below_a_cycle_has_no_roots_and_the_cycle_is_said_once() -> None:
    graph = Chains(
        [make_task("0 2 * * *", name="x"), _after("b", "c"), _after("c", "b"), _after("d", "c")]
    )
    assert graph.cycles() == [("b", "c", "b")]
    assert graph.roots("d") == ()
    assert graph.depth("d") is None


def test_a_chain_of_thousands_of_links_needs_no_recursion() -> None:
    tasks = [make_task("0 2 * * *", name="t0")]
    tasks += [_after(f"t{i}", f"t{i - 1}") for i in range(1, 5000)]
    graph = Chains(tasks)
    assert graph.depth("t4999") == 4999
    assert graph.roots("t4999") == ("t0",)
    ring = Chains([_after(f"t{i}", f"t{(i + 1) % 5000}") for i in range(5000)]).cycles()
    assert len(ring) == 1 and len(ring[0]) == 5001


def test_a_chained_task_occurs_at_its_roots_times() -> None:
    graph = Chains([make_task("0 2 * * *", name="extract"), _after("load", "extract")])
    start = datetime(2026, 8, 3, 8, 0, tzinfo=UTC)
    assert graph.occurrences("load", start, 2) == [
        datetime(2026, 8, 4, 2, 0, tzinfo=UTC),
        datetime(2026, 8, 5, 2, 0, tzinfo=UTC),
    ]
    assert graph.occurrences("extract", start, 1) == [datetime(2026, 8, 4, 2, 0, tzinfo=UTC)]


def test_after_reads_a_string_as_one_name_and_counts_a_repeated_name_once() -> None:
    assert read_after("extract", "load").names == ("extract",)
    assert read_after(["a", "b", "a"], "load").names == ("a", "b")
