"""The chains of a schedule (`after`): who follows whom, where each chain starts, how deep.

A chained task's occurrences are those of the timed tasks at the top of its chain, its
roots, which must share one schedule (docs/chains.md).

>>> from cronctl.core.cronexpr import parse_cron
>>> from cronctl.core.zones import parse_zone
>>> def task(name, *after):
...     cron = None if after else parse_cron("0 2 * * *")
...     return Task(name, "true", "cron", "", cron, None, parse_zone("UTC"), Path("s.toml"),
...                 1, after=after)
>>> chains = Chains([task("extract"), task("transform", "extract"), task("load", "transform")])
>>> chains.roots("load"), chains.depth("load"), chains.downstream("extract")
(('extract',), 2, ('transform',))
>>> Chains([task("a", "b"), task("b", "a")]).cycles()
[('a', 'b', 'a')]
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cronctl.core.model import AFTER_OUTCOMES, TASK_NAME, Problem, Task
from cronctl.core.values import did_you_mean

#: Links below a timed task a chain may reach: deeper is refused by `check`.
MAX_DEPTH = 20


class Chains:
    """The `after` graph of a list of tasks; names of no task are left out of it."""

    def __init__(self, tasks: Iterable[Task]) -> None:
        self.tasks = {task.name: task for task in tasks}
        known = self.tasks
        self._up = {
            name: tuple(dict.fromkeys(u for u in task.after if u in known)) if task.after else ()
            for name, task in known.items()
        }
        self._down: dict[str, list[str]] = {name: [] for name in self.tasks}
        for name, ups in self._up.items():
            for up in ups:
                self._down[up].append(name)
        self._roots: dict[str, tuple[str, ...]] = {}
        self._depth: dict[str, int] = {}
        self._held: dict[str, bool] = {}
        self._order()

    def upstream(self, name: str) -> tuple[str, ...]:
        return self._up[name]

    def downstream(self, name: str) -> tuple[str, ...]:
        return tuple(self._down.get(name, ()))

    def roots(self, name: str) -> tuple[str, ...]:
        """The timed tasks at the top of `name`'s chain (itself if timed); () in or below a
        cycle."""
        return self._roots.get(name, ())

    def depth(self, name: str) -> int | None:
        """Links from the farthest root down to `name`; None in or below a cycle."""
        return self._depth.get(name)

    def timed(self, name: str) -> Task | None:
        """The task whose times `name` follows (its first root); None in a cycle."""
        roots = self.roots(name)
        return self.tasks[roots[0]] if roots else None

    def held(self, name: str) -> bool:
        """Whether `paused = true` in the file stops the task: its own or an upstream's."""
        return self._held.get(name, True)

    def _order(self) -> None:
        """Roots and depths, upstream first (Kahn's order, no recursion: a hostile chain of
        thousands of links must not exhaust the stack)."""
        waiting = {name: len(ups) for name, ups in self._up.items() if ups}
        ready = [name for name in self.tasks if name not in waiting]
        while ready:
            name = ready.pop()
            task, ups = self.tasks[name], self._up[name]
            if not task.chained:
                self._roots[name], self._depth[name], self._held[name] = (name,), 0, task.paused
            else:
                found = (root for up in ups for root in self._roots[up])
                self._roots[name] = tuple(dict.fromkeys(found))
                self._depth[name] = 1 + max((self._depth[up] for up in ups), default=0)
                self._held[name] = task.paused or any(self._held[up] for up in ups)
            for down in self._down[name]:
                waiting[down] -= 1
                if waiting[down] == 0:
                    ready.append(down)

    def cycles(self) -> list[tuple[str, ...]]:
        """Each cycle once, in run order, from its first task in the schedule back to it."""
        order = {name: index for index, name in enumerate(self.tasks)}
        found: list[tuple[str, ...]] = []
        seen: set[str] = set()
        for start in self.tasks:
            if start in self._depth or start in seen:
                continue
            # Every task left out of the order has an upstream left out too: walking up
            # from one must come back to a task already on the walk.
            path: dict[str, int] = {}  # each task on the walk, and its place
            name = start
            while name not in path and name not in seen:
                path[name] = len(path)
                name = next(u for u in self.upstream(name) if u not in self._depth)
            seen.update(path)
            if name in path:
                ring = list(path)[path[name] :][::-1]  # walked upstream: turn it round
                first = min(range(len(ring)), key=lambda i: order[ring[i]])
                ring = ring[first:] + ring[:first]
                found.append((*ring, ring[0]))
        return found

    def around(self, name: str, limit: int = 60) -> tuple[list[str], int]:
        """The tasks above and below `name` and itself, upstream first, at most `limit`, and
        how many more there are."""
        found = {name: None}
        for step in (self.upstream, self.downstream):
            todo = [name]
            while todo:
                for other in step(todo.pop()):
                    if other not in found:
                        found[other] = None
                        todo.append(other)
        order = {task: index for index, task in enumerate(self.tasks)}
        shown = sorted(found, key=lambda t: (self.depth(t) or 0, order[t]))
        return shown[:limit], max(0, len(shown) - limit)

    def occurrences(self, name: str, after: datetime, count: int = 1) -> list[datetime]:
        """The next `count` occurrences of the task's roots strictly after `after`, each once."""
        tasks = [self.tasks[root] for root in self.roots(name)]
        merged = heapq.merge(*(task.next_runs(after, count) for task in tasks))
        return list(dict.fromkeys(merged))[:count]

    def problems(self, display: dict[Path, str]) -> list[Problem]:
        """`check`'s errors about the chains: cycles, upstream tasks that have no occurrence
        or disagree on their schedule, chains deeper than MAX_DEPTH."""
        found = [
            _at(
                self.tasks[ring[0]],
                display,
                "after-cycle",
                f"the chain runs in a circle ({' -> '.join(ring)}), "
                "so none of its tasks would ever run; remove one of these 'after' names",
            )
            for ring in self.cycles()
        ]
        for task in self.tasks.values():
            if task.chained and task.name in self._depth:
                found.extend(self._link_problems(task, display))
        return found

    def _link_problems(self, task: Task, display: dict[Path, str]) -> list[Problem]:
        ups = [self.tasks[up] for up in self.upstream(task.name)]
        times = {up.name: {timing(self.tasks[r]) for r in self.roots(up.name)} for up in ups}
        if starts := [up.name for up in ups if up.start_only]:
            code = "after-start-only"
            message = (
                f"{', '.join(starts)} {'has' if len(starts) == 1 else 'have'} no occurrences "
                "to follow: on_start only, it runs when cronctl work starts; give it a "
                "schedule key, or remove it from 'after'"
            )
        elif self._depth[task.name] == MAX_DEPTH + 1:
            code = "after-depth"
            message = (
                f"the chain above this task is {MAX_DEPTH + 1} links deep, and at most "
                f"{MAX_DEPTH} are allowed; start part of it from a schedule of its own"
            )
        # An upstream with several timings has its own error.
        elif len(set().union(*times.values())) > 1 and all(len(t) == 1 for t in times.values()):
            code = "after-schedules"
            message = (
                f"its upstream tasks run on different schedules: "
                f"{', '.join(self._runs(up) for up in times)}; a chained task runs once per "
                "occurrence they share: give them one schedule, or split the task"
            )
        else:
            return []
        return [_at(task, display, code, message)]

    def _runs(self, name: str) -> str:
        """'extract at "0 2 * * *" UTC', or 'load (after extract) at ...' for a chained task."""
        roots = self.roots(name)
        root = self.tasks[roots[0]]
        if root.cron is not None:
            when = f'"{root.cron.text}" {root.zone.name}'
        else:
            when = root.schedule if root.at is not None else "work start"
        if self.tasks[name].chained:
            return f"{name} (after {', '.join(roots)}) at {when}"
        return f"{name} at {when}"


def timing(task: Task) -> tuple[object, object]:
    """What two timed tasks must share to be upstream of one chained task: the cron
    expression (as cron reads it, not as written) and the zone, or the one-shot instant."""
    return (task.cron, task.zone.name) if task.cron is not None else (task.at, None)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class AfterValue:
    """The `after` of a task as read: its names, or what is wrong with them."""

    names: tuple[str, ...] = ()
    problem: str | None = None


def read_after(value: str | Sequence[str], own: object) -> AfterValue:
    """`after = "extract"` or `after = ["extract", "fetch"]`, checked against the name rule
    and the task's own name `own`.

    >>> read_after("extract", "load").names
    ('extract',)
    >>> read_after(["load"], "load").problem
    "a task cannot run after itself: remove 'load' from 'after'"
    """
    names = (value,) if isinstance(value, str) else tuple(value)
    if not names:
        return AfterValue(problem="'after' is empty: name the tasks this one runs after")
    for name in names:
        if not re.fullmatch(TASK_NAME, name):
            return AfterValue(problem=f"'after' names {name[:80]!r}, which is not a task name")
        if name == own:
            return AfterValue(
                problem=f"a task cannot run after itself: remove {name!r} from 'after'"
            )
    return AfterValue(tuple(dict.fromkeys(names)))


def outcome_problem(value: str) -> str | None:
    if value in AFTER_OUTCOMES:
        return None
    allowed = ", ".join(f'"{o}"' for o in AFTER_OUTCOMES)
    return (
        f"after_outcome {value[:80]!r} is not one of {allowed}{did_you_mean(value, AFTER_OUTCOMES)}"
    )


def unknown_problems(
    tasks: Iterable[Task], names: list[str], display: dict[Path, str]
) -> list[Problem]:
    """A located error for each `after` name that no task of any file has (`names`: every
    name defined, a task with errors too, so its followers are not blamed for them)."""
    known = set(names)
    return [
        _at(
            task,
            display,
            "after-unknown",
            f"'after' names {name!r}, and no task has that name{did_you_mean(name, names)}; "
            "fix the name or add the task",
        )
        for task in tasks
        for name in task.after
        if name not in known
    ]


def _at(task: Task, display: dict[Path, str], code: str, message: str) -> Problem:
    return Problem(
        display.get(task.source, str(task.source)), task.line, task.name, "error", code, message
    )
