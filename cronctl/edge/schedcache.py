"""Entries of `run`'s cache (the schedule, edge/schedentry.py; a quiet minute's hint,
run/quiet.py), each used only while all its parse read is unchanged, so never stale
(docs/commands.md, "The schedule cache"). An entry is a ``marshal`` of plain values (nothing
in it can name a class or a function) in a private directory: it holds commands. Anything
wrong with the cache costs only the parse it would have saved; it never fails a run."""

from __future__ import annotations

import marshal
import os
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from cronctl._version import __version__
from cronctl.core.values import resolve_path
from cronctl.edge.dirs import systemd_dir
from cronctl.edge.safefiles import open_dir, open_nofollow
from cronctl.edge.schedpaths import read_bytes
from cronctl.errors import CronctlError, UsageError

FORMAT = 2  # bumped whenever the entry's layout changes
ENV = "CRONCTL_CACHE_DIR"
# A larger entry is not read (far more than the entry of a schedule of 10,000 tasks).
MAX_ENTRY = 256 * 1024 * 1024
# A temporary entry older than this was left by a writer that died (kill -9 mid-write).
STALE_TEMP_S = 3600


def cache_dir(env: Mapping[str, str], is_root: bool) -> Path | None:
    """$CRONCTL_CACHE_DIR ("off": None), $CACHE_DIRECTORY, /var/cache/cronctl for root, else
    $XDG_CACHE_HOME/cronctl or ~/.cache/cronctl; None when there is no home."""
    given = env.get(ENV)
    if given is not None:
        if given == "off":
            return None
        if not given.startswith("/"):
            raise UsageError(
                f"{ENV}={given!r} is not an absolute directory; give one ({ENV}=/path), "
                f"{ENV}=off to keep no cache, or unset it"
            )
        return Path(given)
    if (unit_given := systemd_dir(env, "CACHE_DIRECTORY")) is not None:
        return unit_given
    if is_root:
        return Path("/var/cache/cronctl")
    xdg = env.get("XDG_CACHE_HOME", "")
    if xdg.startswith("/"):
        return Path(xdg) / "cronctl"
    home = env.get("HOME", "")
    return Path(home) / ".cache" / "cronctl" if home.startswith("/") else None


class Lookup:
    """The schedule files one `run` read, and where their parse is kept (``key`` None: no
    cache); ``resolved``: the paths its text resolved to, once known (still_resolved)."""

    __slots__ = ("contents", "key", "name", "paths", "resolved", "where")

    def __init__(self, paths: Sequence[Path], env: Mapping[str, str]) -> None:
        self.paths = paths
        self.contents = [read_bytes(p) for p in paths]
        self.where = cache_dir(env, os.geteuid() == 0)
        self.key = _key(paths, self.contents, env) if self.where is not None else None
        self.name = _entry_name(self.key) if self.key is not None else ""
        self.resolved: tuple[Any, ...] | None = None

    def read(self, kind: str) -> Any:
        """The value kept as `kind` ("schedule", "quiet") for this very key, or None."""
        if self.where is None or self.key is None:
            return None
        found = _read(self.where, f"{kind}-{self.name}")
        try:
            stored_key, value = found
        except (TypeError, ValueError):
            return None
        return value if stored_key == self.key else None

    def keep(self, kind: str, value: Any) -> None:
        if self.where is None or self.key is None:
            return
        try:
            data = marshal.dumps((self.key, value))
        except ValueError:  # a value marshal cannot hold
            return
        _write(self.where, f"{kind}-{self.name}", data)


def _key(paths: Sequence[Path], contents: Sequence[bytes], env: Mapping[str, str]) -> Any:
    """What the parse depends on but resolved paths and zones (checked on use); None: unknown."""
    stamp = _code_stamp()
    if stamp is None:
        return None
    try:
        cwd = str(Path.cwd())
    except OSError:  # the working directory was removed: relative paths mean nothing
        return None
    files = tuple((os.fspath(p), data) for p, data in zip(paths, contents, strict=True))
    return (FORMAT, cwd, sys.hexversion, stamp, env.get("HOME"), files)


def _entry_name(key: Any) -> str:
    """One entry per working directory and file list: an edited file replaces its entry."""
    _, cwd, _, _, _, files = key
    value = 0x811C9DC5  # FNV-1a, 32 bits: zlib would be one more import a run
    for byte in repr((cwd, [name for name, _ in files])).encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{value:08x}"


def _code_stamp() -> tuple[Any, ...] | None:
    # core/, the parse, the decoding, this module and the hint: an edited cronctl misses.
    edge = Path(__file__).parent
    try:
        with os.scandir(edge.parent / "core") as entries:
            files = [
                (e.name, e.stat().st_size, e.stat().st_mtime_ns)
                for e in entries
                if e.name.endswith(".py")
            ]
        own_files = (edge / "schedfiles.py", edge / "schedentry.py", Path(__file__))
        for own in (*own_files, edge.parent / "run" / "quiet.py"):
            st = own.stat()
            files.append((f"{own.parent.name}/{own.name}", st.st_size, st.st_mtime_ns))
    except OSError:
        return None
    return (__version__, tuple(sorted(files)))


def _read(where: Path, name: str) -> Any:
    try:
        dir_fd, _ = open_dir(where)
        try:
            fd = open_nofollow(name, os.O_RDONLY, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        with os.fdopen(fd, "rb") as file:
            if os.fstat(fd).st_size > MAX_ENTRY:
                return None
            # Our own file in a private directory, as the state database is; marshal runs
            # nothing, and edge/schedentry.py's decoder takes only its own tagged plain values.
            return marshal.loads(file.read())  # noqa: S302
    except (OSError, CronctlError, EOFError, ValueError, TypeError):
        return None


def still_resolved(resolved: Any) -> bool:
    for (kind, base, text), then in resolved:
        try:
            if str(resolve_path(kind, Path(base), text)) != then:
                return False
        except (OSError, RuntimeError, ValueError):
            return False
    return True


def _write(where: Path, name: str, data: bytes) -> None:
    temp = f".{name}.{os.getpid()}.tmp"
    try:
        where.mkdir(0o700, parents=True, exist_ok=True)  # open_dir judges what is there
        dir_fd, _ = open_dir(where)
    except (OSError, CronctlError):
        return
    try:
        _sweep_temps(dir_fd)
        fd = open_nofollow(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except (OSError, CronctlError):
        with suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def _sweep_temps(dir_fd: int) -> None:
    # Only when writing: a miss is rare.
    cutoff = time.time() - STALE_TEMP_S
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                with suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        os.unlink(entry.name, dir_fd=dir_fd)
