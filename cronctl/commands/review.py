"""Use case behind `check --diff REF`: the schedule at a git revision against the work tree."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from cronctl.core.assemble import build_schedule
from cronctl.core.diff import ScheduleDiff, diff_schedules
from cronctl.core.model import Schedule
from cronctl.edge import git
from cronctl.edge.schedfiles import parse_bytes


def schedule_at(ref: str, given: list[Path] | None, current: list[Path]) -> Schedule:
    """The schedule files as they were at `ref`; files the revision lacks are left out."""
    paths = list(current)
    for candidate in _given(given):
        if candidate.is_dir():
            paths += [p for p in git.tomls_at(ref, candidate) if p not in paths]
    results = []
    for path in paths:
        data = git.show(ref, path)
        if data is not None:
            results.append(parse_bytes(path, data))
    return build_schedule(results)


def _given(given: list[Path] | None) -> list[Path]:
    if given:
        return list(given)
    env = os.environ.get("CRONCTL_FILE")
    return [Path(p) for p in env.split(os.pathsep) if p] if env else []


def diff_against(ref: str, given: list[Path] | None, new: Schedule, now: datetime) -> ScheduleDiff:
    """Compare the work tree's schedule `new` with the same files at `ref`."""
    anchor = new.files[0].parent if new.files else Path.cwd()
    git.verify_ref(anchor, ref)
    return diff_schedules(schedule_at(ref, given, list(new.files)), new, now)
