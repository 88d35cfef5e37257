"""Tasks that share a schedule share the work of `list` and `check`, never each other's answers.

`list` searches each (schedule, zone) pair's next run once, the DST warnings are worked
out once per (schedule, zone, misfire) and the words once per expression; each task must
still get exactly what it would get alone.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

from cronctl.commands.schedule import list_tasks
from cronctl.core.analysis import task_warnings
from cronctl.core.describe import describe
from cronctl.core.model import Schedule, Settings, Task
from tests.core.test_calendar import make_task

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def task(name: str, expr: str, zone: str, misfire: str = "coalesce") -> Task:
    return make_task(expr, zone, name, misfire=misfire)


def mixed() -> list[Task]:
    """The same expression in three zones and under two policies, and a one-shot twice."""
    tasks = [
        task("utc", "30 2 * * *", "UTC"),
        task("berlin", "30 2 * * *", "Europe/Berlin"),
        task("berlin-catch-up", "30 2 * * *", "Europe/Berlin", "catch-up"),
        task("new-york", "30 2 * * *", "America/New_York"),
        task("new-york-too", "30 2 * * *", "America/New_York"),
    ]
    once = task("once", "0 0 * * *", "UTC")
    for name, at in (("once", "2026-03-05T10:00:00+00:00"), ("twice", "2026-04-05T10:00:00+00:00")):
        at_time = datetime.fromisoformat(at)
        tasks.append(dataclasses.replace(once, name=name, cron=None, at=at_time))
    return tasks


def test_list_gives_each_task_its_own_next_run() -> None:
    tasks = mixed()
    schedule = Schedule((Path("schedules.toml"),), tuple(tasks), (), Settings())
    rows = list_tasks(schedule, NOW, []).rows
    assert [r.next_run for r in rows] == [t.next_run(NOW) for t in tasks]
    assert len({r.next_run for r in rows}) == 5  # three zones, two one-shots


def test_dst_warnings_follow_each_task_policy_and_zone() -> None:
    by_name = {t.name: t for t in mixed()}

    def gap(name: str) -> list[str]:
        return [p.message for p in task_warnings(by_name[name], NOW) if p.code == "dst-gap"]

    assert gap("utc") == []
    assert 'misfire = "catch-up"' not in gap("berlin")[0] and "Europe/Berlin" in gap("berlin")[0]
    assert 'misfire = "catch-up"' in gap("berlin-catch-up")[0]
    assert "America/New_York" in gap("new-york")[0]
    assert [p.task for p in task_warnings(by_name["new-york-too"], NOW)] == ["new-york-too"]


def test_words_name_each_task_zone() -> None:
    words = {t.name: describe(t) for t in mixed()}
    assert words["utc"] == "at 02:30"
    assert words["berlin"] == "at 02:30 (Europe/Berlin time)"
    assert words["new-york"] == "at 02:30 (America/New_York time)"
