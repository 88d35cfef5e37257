"""Which state and lock directories and which coordination store a schedule uses.

A quiet `run` asks too, so the schedule model is not imported here. Warnings about those
places: edge/dirwarnings.py; making and opening them safely: edge/safefiles.py.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cronctl.core.values import check_line
from cronctl.errors import UsageError

if TYPE_CHECKING:
    from cronctl.core.model import Schedule


def systemd_dir(env: Mapping[str, str], name: str) -> Path | None:
    """The first directory systemd hands over in ``$STATE_DIRECTORY`` or ``$CACHE_DIRECTORY``.

    A unit with several ``StateDirectory=`` entries gets them ``:``-separated, in order; the
    first is cronctl's. systemd only ever gives absolute paths, so anything else (empty,
    relative) is not systemd's and is ignored.
    """
    first = env.get(name, "").split(":", 1)[0]
    return Path(first) if first.startswith("/") else None


def default_state_dir(env: Mapping[str, str], is_root: bool) -> Path:
    """Return cronctl's default state directory for root or for an ordinary user.

    Root gets the FHS location ``/var/lib/cronctl``. Everyone else gets
    ``$XDG_STATE_HOME/cronctl``, or ``~/.local/state/cronctl`` when that variable is unset,
    empty or relative (the XDG spec says relative values must be ignored).
    """
    if is_root:
        return Path("/var/lib/cronctl")
    xdg = env.get("XDG_STATE_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "cronctl"
    home = env.get("HOME") or str(Path.home())
    return Path(home) / ".local" / "state" / "cronctl"


def resolve_dirs(
    *,
    flag_state: Path | None,
    flag_lock: Path | None,
    env: Mapping[str, str],
    file_state: Path | None,
    file_lock: Path | None,
    is_root: bool,
    project: str | None = None,
) -> tuple[Path, Path]:
    """Return ``(state_dir, lock_dir)``; for each, the first of flag, environment, file,
    systemd's ``$STATE_DIRECTORY``, default.

    The environment variables are ``CRONCTL_STATE_DIR`` and ``CRONCTL_LOCK_DIR``; an empty
    value is a usage error (it would otherwise fall through to a default without a word).
    ``file_state``/``file_lock`` come from the schedule file's ``[cronctl]`` table, already
    resolved against the file's own directory by the caller. ``$STATE_DIRECTORY`` is what a
    unit's ``StateDirectory=`` hands over: below every setting, so that a unit never moves a
    state directory the operator named, and above the default, so that a service user's
    state is where the unit said rather than in its home (for www-data, the web root).
    With a ``project`` (the [cronctl] table's, already validated), each directory chosen so
    far is a root shared by the machine's projects and the project's data lives in
    ``ROOT/projects/PROJECT`` below it, so two projects' tasks of one name never share a
    lock, a claim or a history; without one, the layout is the shared one of old.
    ``lock_dir`` defaults to ``STATE_DIR/locks`` of the state directory chosen here. Relative
    flag or environment values are made absolute against the current directory now, so that every
    later message names one unambiguous path.
    """
    for name in ("CRONCTL_STATE_DIR", "CRONCTL_LOCK_DIR"):
        if env.get(name) == "":
            raise UsageError(
                f"{name} is set but empty; unset it or give it a directory ({name}=/path)"
            )
    state = _first(flag_state, env.get("CRONCTL_STATE_DIR"), file_state)
    if state is None:
        state = systemd_dir(env, "STATE_DIRECTORY")
    if state is None:
        state = default_state_dir(env, is_root)
    if project is not None:
        state = state / "projects" / project
    lock = _first(flag_lock, env.get("CRONCTL_LOCK_DIR"), file_lock)
    if lock is None:
        lock = state / "locks"
    elif project is not None:
        lock = lock / "projects" / project
    return state.absolute(), lock.absolute()


def _first(*candidates: Path | str | None) -> Path | None:
    for candidate in candidates:
        if candidate is not None and str(candidate) != "":
            return Path(candidate)
    return None


def data_dirs(
    schedule: Schedule, flag_state: Path | None, flag_lock: Path | None, env: Mapping[str, str]
) -> tuple[Path, Path]:
    """(state_dir, lock_dir): flag, environment, [cronctl] table, default."""
    return resolve_dirs(
        flag_state=flag_state,
        flag_lock=flag_lock,
        env=env,
        file_state=schedule.settings.state_dir,
        file_lock=schedule.settings.lock_dir,
        is_root=os.geteuid() == 0,
        project=schedule.settings.project,
    )


def coordination_url(schedule: Schedule, flag: str | None, env: Mapping[str, str]) -> str | None:
    """The coordination store's URL: --coordination, $CRONCTL_COORDINATION, [cronctl], or None
    (files in lock_dir). An empty value counts as unset, as for lock_dir."""
    for value, source in ((flag, "--coordination"), (env.get("CRONCTL_COORDINATION"), None)):
        if not value:
            continue
        if not value.startswith(("postgresql://", "postgres://")):
            # Never echo the value: it may hold a password.
            raise UsageError(
                f"{source or 'CRONCTL_COORDINATION'} must be a postgresql:// URL, e.g. "
                "postgresql://cronctl@db.internal/ops?sslmode=verify-full"
            )
        if bad := check_line(source or "CRONCTL_COORDINATION", value):
            raise UsageError(bad)  # an escape would reach stderr raw in every store message
        return value
    return schedule.settings.coordination
