"""Use case behind `check --diff REF`: the schedule at a git revision against the work tree."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from cronctl.core.assemble import build_schedule
from cronctl.core.diff import ScheduleDiff, diff_schedules
from cronctl.core.model import Problem, Schedule
from cronctl.edge import git
from cronctl.edge.schedfiles import parse_files


def schedule_at(ref: str, given: list[Path] | None, current: list[Path]) -> Schedule:
    """The schedule files (a directory's too) as they were at `ref`, where it has them."""
    paths = list(current)
    env = os.environ.get("CRONCTL_FILE") or ""
    for candidate in given or [Path(p) for p in env.split(os.pathsep) if p]:
        if candidate.is_dir():
            paths += [p for p in git.tomls_at(ref, candidate) if p not in paths]
    found = [(path, data) for path in paths if (data := git.show(ref, path)) is not None]
    return build_schedule(parse_files([p for p, _ in found], [d for _, d in found]))


class UnreadableRevision(Exception):
    """The schedule at the revision has an error: a diff against it would be made up."""

    def __init__(self, ref: str, problem: Problem) -> None:
        super().__init__(
            f"no diff: the schedule at {ref} could not be read ({problem.describe()}); "
            "comparing with it would show its tasks as added. Compare with another revision."
        )


def diff_against(ref: str, given: list[Path] | None, new: Schedule, now: datetime) -> ScheduleDiff:
    """Compare the work tree's schedule `new` with the same files at `ref`; refused when a
    file at `ref` has an error (the old side would not be what ran)."""
    anchor = new.files[0].parent if new.files else Path.cwd()
    git.verify_ref(anchor, ref)
    old = schedule_at(ref, given, list(new.files))
    broken = next((p for p in old.problems if p.severity == "error"), None)
    if broken is not None:
        raise UnreadableRevision(ref, broken)
    return diff_schedules(old, new, now)
