"""Which state and lock directories and which coordination store a schedule uses (a quiet
`run` asks too, so the schedule model is not imported here)."""

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
    """The first of systemd's ``:``-separated directories in ``name``, if absolute."""
    first = env.get(name, "").split(":", 1)[0]
    return Path(first) if first.startswith("/") else None


def default_state_dir(env: Mapping[str, str], is_root: bool) -> Path:
    """``/var/lib/cronctl`` for root, else ``$XDG_STATE_HOME/cronctl`` (ignored when relative,
    as XDG says), else ``~/.local/state/cronctl``."""
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
    """``(state_dir, lock_dir)``, absolute; each the first of flag, environment, [cronctl]
    table, ``$STATE_DIRECTORY`` (a service user's home may be the web root), default
    (``lock_dir``: ``STATE_DIR/locks``). A ``project`` lives in ``ROOT/projects/PROJECT``:
    two projects' tasks of one name share no lock or history."""
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
    return next((Path(c) for c in candidates if c), None)  # "" is no setting


def data_dirs(
    schedule: Schedule, flag_state: Path | None, flag_lock: Path | None, env: Mapping[str, str]
) -> tuple[Path, Path]:
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
    """--coordination, $CRONCTL_COORDINATION (empty: unset), [cronctl], or None (files)."""
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
