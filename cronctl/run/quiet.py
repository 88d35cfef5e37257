"""A minute with nothing due, dealt with without the schedule model from the hint the last
planning run kept beside its cache entry (docs/commands.md#a-quiet-minute). For each task the
hint holds ``since`` and ``next``, with no occurrence in ``(since, next)``: a stored window
ending at L with ``since <= L < N < next`` only moves to N, which is written (under the store's
write lock) when every row says so; anything else plans as usual."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cronctl.edge.dirs import resolve_dirs
from cronctl.edge.safefiles import ensure_private_dir
from cronctl.edge.schedcache import Lookup, still_resolved
from cronctl.edge.state.store import Store, parse_time

if TYPE_CHECKING:  # types only: a quiet minute never imports the model (docs/architecture.md)
    from cronctl.core.model import Schedule, Task
    from cronctl.run.context import RunContext, RunReport

#: The companion entry's kind (edge/schedcache.py) and its layout's version.
KIND = "quiet"
FORMAT = 2  # 2: the project joined the [cronctl] directories

#: deal()'s answers: dealt with; plan and keep a new hint; plan (the hint still holds).
DONE, SPENT, DECLINED = "done", "spent", "declined"


class _Declined(Exception):
    """The rows are not what the hint covers: roll back, and answer its message."""


def deal(
    look: Lookup, env: Mapping[str, str], *, instant: datetime, pretended: bool, host: str,
    state_dir: Path | None, lock_dir: Path | None, coordination: str | None,
) -> str:  # fmt: skip
    """Move every window to the minute of `instant` (`pretended`: given by --now) if the hint
    proves nothing else is due (DONE); else SPENT or DECLINED, having changed nothing. Errors
    `run` would meet anyway (an unsafe directory, a foreign database) are raised as it would."""
    hint: Any = look.read(KIND)
    if not _well_formed(hint):
        return SPENT
    _, python, tz_env, tzpath, zones, only_host, dirs, resolved, tasks = hint
    if coordination or env.get("CRONCTL_COORDINATION"):
        return DECLINED
    if pretended and instant > datetime.now(UTC):
        return DECLINED  # possibly a rehearsal: `run` decides
    minute = int(instant.timestamp()) // 60 * 60
    if minute % 3600 == 0:
        return DECLINED  # the hourly sweep
    if any(nxt is not None and nxt <= minute for _, _, _, nxt, _ in tasks):
        return SPENT
    if (
        python != sys.base_prefix
        or tz_env != env.get("PYTHONTZPATH")
        or (only_host is not None and only_host != host)
        or not still_resolved(resolved)
        # Every IANA zone read from the same file, holding the same bytes.
        or _zone_files(tzpath, [zone[0] for zone in zones]) != tuple(map(tuple, zones))
    ):
        return SPENT
    return _move_windows(env, dirs, state_dir, lock_dir, tasks, minute)


def _move_windows(
    env: Mapping[str, str], dirs: tuple[str | None, str | None, str | None],
    state_flag: Path | None, lock_flag: Path | None, tasks: Any, minute: int,
) -> str:  # fmt: skip
    """Move each task's window to `minute` in one transaction if every row allows it (DONE);
    else SPENT (a row differs), or DECLINED (a run is unfinished: the hint still holds)."""
    file_state, file_lock, project = dirs
    state, lock = resolve_dirs(
        flag_state=state_flag, flag_lock=lock_flag, env=env,
        file_state=None if file_state is None else Path(file_state),
        file_lock=None if file_lock is None else Path(file_lock), is_root=os.geteuid() == 0,
        project=project,
    )  # fmt: skip
    ensure_private_dir(state)
    ensure_private_dir(lock)
    when = datetime.fromtimestamp(minute, UTC)
    try:
        with Store.open(state) as store, store.transaction() as tx:
            if tx.any_unfinished():
                raise _Declined(DECLINED)
            rows = tx.stored_states()
            moves = []
            for name, fingerprint, since, nxt, one_shot in tasks:
                row = rows.get(name)
                if row is None or row[1] != fingerprint:
                    raise _Declined(SPENT)
                try:
                    last = int(parse_time(row[2]).timestamp())
                except (TypeError, ValueError):
                    last = minute  # not a time cronctl wrote: planning says what is wrong
                if last >= minute:
                    raise _Declined(SPENT)  # or the clock went back
                if not row[4] and (last < since or (one_shot if nxt is None else nxt <= minute)):
                    raise _Declined(SPENT)
                moves.append((row, when))
            if tx.advance_states(moves) != len(moves):
                raise _Declined(SPENT)
    except _Declined as declined:
        return str(declined)
    return DONE


def _well_formed(hint: Any) -> bool:
    """Whether the hint has the layout keep() writes (a damaged one must never fail a run)."""
    try:
        fmt, python, tz_env, tzpath, zones, only_host, dirs, resolved, tasks = hint
        return (
            fmt == FORMAT
            and _all(str, (python,), tzpath)
            and _all((str, type(None)), (tz_env, only_host), dirs)
            and len(dirs) == 3
            and all(_all(str, (n, p)) and type(d) is bytes for n, p, d in zones)
            and all(_all(str, key, (then,)) and len(key) == 3 for key, then in resolved)
            and all(
                _all(str, (n, f)) and type(s) is int and type(x) in (int, type(None))
                and type(o) is bool
                for n, f, s, x, o in tasks
            )
        )  # fmt: skip
    except (TypeError, ValueError):
        return False


def _all(kinds: type | tuple[type, ...], *groups: Any) -> bool:
    """Whether every value of every group is of `kinds` (exactly: no subclasses)."""
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    return all(type(v) in kinds for group in groups for v in group)


def keep(
    look: Lookup, everything: Schedule, schedule: Schedule, report: RunReport, ctx: RunContext,
    env: Mapping[str, str],
) -> None:  # fmt: skip
    """After a run that planned (`deal` said SPENT): keep a new hint if the shortcut could
    serve this schedule (`everything`: before the tasks of other hosts were left out). A task
    that had occurrences this minute has dealt with every one up to it, so its empty window
    starts here; any other's starts where the one planning found empty did."""
    settings = schedule.settings
    if (
        look.resolved is None
        or report.plans is None
        or ctx.dry_run
        or ctx.rehearsal
        or ctx.coord.fleet is not None  # [cronctl] coordination too
        or settings.metrics_file is not None
        or (not settings.lock_dir_shared and any(t.on_one_server for t in schedule.tasks))
        # Then no minute is ever quiet; a chain's catch-up is looked for every minute.
        or any(_every_minute(t) or t.chained for t in schedule.tasks)
    ):
        return
    minute = report.now.replace(second=0, microsecond=0)
    tasks = []
    nexts: dict[object, int | None] = {}  # by schedule: many tasks share one
    for task in schedule.tasks:
        decided = report.plans.get(task.name)
        if decided is None or (decided.since is None and not decided.done):
            return  # the clock is behind this task's window
        since = minute if decided.since is None or decided.run or decided.missed else decided.since
        fingerprint = task.fingerprint  # the schedule and the zone: all next_run reads
        if fingerprint not in nexts:
            nxt = task.next_run(minute)
            nexts[fingerprint] = None if nxt is None else int(nxt.timestamp())
        tasks.append((
            task.name, fingerprint, int(since.timestamp()), nexts[fingerprint], task.at is not None
        ))  # fmt: skip
    import zoneinfo  # only here: a quiet minute never needs it

    names = sorted({t.zone.name for t in schedule.tasks if not t.zone.fixed})
    tzpath = tuple(zoneinfo.TZPATH) if names else ()
    if (files := _zone_files(tzpath, names)) is None:
        return
    only_host = ctx.host if any(t.hosts for t in everything.tasks) else None
    places = (settings.state_dir, settings.lock_dir, settings.project)
    dirs = tuple(None if d is None else str(d) for d in places)
    look.keep(KIND, (FORMAT, sys.base_prefix, env.get("PYTHONTZPATH"), tzpath, files,
                     only_host, dirs, look.resolved, tuple(tasks)))  # fmt: skip


def _every_minute(task: Task) -> bool:
    """Whether `task` has an occurrence in every minute (`* * * * *`, in any zone)."""
    cron = task.cron
    return (
        cron is not None
        and cron.day_star
        and cron.weekday_star
        and (len(cron.minutes), len(cron.hours), len(cron.months)) == (60, 24, 12)
    )


def _zone_files(tzpath: Any, names: Iterable[str]) -> tuple[Any, ...] | None:
    """For each IANA zone, the file on `tzpath` it is read from and its bytes; None when one
    does not come from a file there (the tzdata package), or cannot be read."""
    files = []
    for name in names:
        path = _zone_file(tzpath, name)
        if path is None:
            return None
        try:
            files.append((name, str(path), path.read_bytes()))
        except OSError:
            return None
    return tuple(files)


def _zone_file(tzpath: Any, name: str) -> Path | None:
    """Where zoneinfo reads zone `name` from: the first file of that name on the search path
    (None: none there; zoneinfo would then try the tzdata package)."""
    return next((p for p in (Path(d) / name for d in tzpath) if p.is_file()), None)
