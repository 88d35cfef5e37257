"""The parsed schedule kept between `run`s, so a minute whose files did not change skips
tomllib and the schema: their imports and the parse (for 100 tasks, about a quarter of the
instructions of a `run` with nothing due; docs/benchmarks.md, fifth round).

An entry is used only when everything the parse read is as it was then, so it can never be
stale; anything else is a miss, and a miss parses the files as if there were no cache:

- the bytes of every file, and the paths they were named by, from the same working
  directory;
- ``$HOME`` (``~`` in a path) and cronctl's own parsing code (version, Python, and the size
  and modification time of each source file in ``cronctl/core``, of ``edge/files.py`` and
  of this module);
- every path the files' text was resolved to (``workdir`` and the ``[cronctl]`` paths),
  resolved again now: a link swapped under a workdir (a deploy's ``current``) is a miss;
- every IANA time zone, looked up again in the time zone database as the parse does.

A schedule with errors is never kept. The entry is a ``marshal`` of plain values (no pickle:
nothing in it can name a class or a function to call), in a private directory: the cache
holds commands, so it gets the state directory's care (0700, never through a link, files
0600 owned by this user). Anything wrong with the cache itself (an unsafe directory, a full
disk, a damaged entry) costs only the parse it would have saved; it never fails a run.
"""

from __future__ import annotations

import marshal
import os
import sys
from collections.abc import Mapping, Sequence
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path, PosixPath

from cronctl.core.cronexpr import CronExpr
from cronctl.core.model import Problem, Schedule, Settings, Task
from cronctl.core.zones import Zone, parse_zone
from cronctl.errors import CronctlError, UsageError

TYPE_CHECKING = False  # see cronctl.core.record: `run` never imports typing
if TYPE_CHECKING:
    from typing import Any

#: Bumped whenever the entry's layout changes.
FORMAT = 1
#: The variable naming the cache directory; "off" turns the cache off.
ENV = "CRONCTL_CACHE_DIR"
#: A larger entry is not read (100 tasks make ~46 KB, 10,000 about 3.5 MB).
MAX_ENTRY = 256 * 1024 * 1024

_RECORDS: dict[str, Any] = {
    cls.__name__: cls for cls in (Schedule, Task, Settings, Problem, CronExpr)
}


class _Uncacheable(Exception):
    """A value the entry cannot hold, or an entry that does not decode: parse instead."""


def cache_dir(env: Mapping[str, str], is_root: bool) -> Path | None:
    """Where entries live: $CRONCTL_CACHE_DIR ("off": nowhere), else /var/cache/cronctl for
    root, else $XDG_CACHE_HOME/cronctl or ~/.cache/cronctl; None when there is no home."""
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
    if is_root:
        return Path("/var/cache/cronctl")
    xdg = env.get("XDG_CACHE_HOME", "")
    if xdg.startswith("/"):
        return Path(xdg) / "cronctl"
    home = env.get("HOME", "")
    return Path(home) / ".cache" / "cronctl" if home.startswith("/") else None


def load(paths: Sequence[Path], env: Mapping[str, str]) -> Schedule:
    """The schedule of these files: from the cache when nothing it was parsed from changed,
    else parsed (and kept for the next run when it has no errors)."""
    from cronctl.edge.files import parse_all, read_bytes

    contents = [read_bytes(p) for p in paths]
    where = cache_dir(env, os.geteuid() == 0)
    key = _key(paths, contents, env) if where is not None else None
    if where is None or key is None:
        return parse_all(paths, contents)[0]
    name = _entry_name(key)
    found = _read(where, name)
    if found is not None:
        schedule = _use(found, key)
        if schedule is not None:
            return schedule
    schedule, resolved = parse_all(paths, contents)
    if not schedule.errors:
        _write(where, name, key, schedule, resolved)
    return schedule


# --- the key ------------------------------------------------------------------------------


def _key(paths: Sequence[Path], contents: Sequence[bytes], env: Mapping[str, str]) -> Any:
    """What the parse depends on, besides resolved paths and zones (checked on use); None
    when it cannot be told (cronctl's sources cannot be found)."""
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
    return f"schedule-{_crc(repr((cwd, [name for name, _ in files])).encode())}"


def _code_stamp() -> tuple[Any, ...] | None:
    """cronctl's version and its parsing code's files (size, mtime): every module of
    cronctl/core, edge/files.py (the decoding) and this one. An edited or upgraded cronctl
    never reads an entry an older one wrote."""
    from cronctl import __version__

    edge = Path(__file__).parent
    try:
        with os.scandir(edge.parent / "core") as entries:
            files = [
                (e.name, e.stat().st_size, e.stat().st_mtime_ns)
                for e in entries
                if e.name.endswith(".py")
            ]
        for own in (edge / "files.py", Path(__file__)):
            st = own.stat()
            files.append((f"edge/{own.name}", st.st_size, st.st_mtime_ns))
    except OSError:
        return None
    return (__version__, tuple(sorted(files)))


def _crc(data: bytes) -> str:
    """A short name for an entry (FNV-1a, 32 bits: zlib would be one more import a run)."""
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{value:08x}"


# --- reading and writing entries ----------------------------------------------------------


def _read(where: Path, name: str) -> Any:
    """The decoded entry `name`, or None (none, unsafe, damaged: all a miss)."""
    from cronctl.edge.paths import open_dir, open_nofollow

    try:
        dir_fd, _ = open_dir(where)
    except (OSError, CronctlError):
        return None
    try:
        fd = open_nofollow(name, os.O_RDONLY, dir_fd=dir_fd)
    except (OSError, CronctlError):
        return None
    finally:
        os.close(dir_fd)
    try:
        size = os.fstat(fd).st_size
        if size > MAX_ENTRY:
            return None
        data = _read_all(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        # Our own file, in a directory only this user can write, as the state database is;
        # marshal runs nothing, and _Decoder takes nothing but its own tagged plain values.
        return marshal.loads(data)  # noqa: S302
    except (EOFError, ValueError, TypeError):
        return None


def _read_all(fd: int, size: int) -> bytes:
    parts: list[bytes] = []
    while True:
        chunk = os.read(fd, max(size, 65536))
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)


def _use(found: Any, key: Any) -> Schedule | None:
    """The entry's schedule if it was parsed from what is there now, else None."""
    try:
        stored_key, resolved, payload = found
        if stored_key != key or not _still_resolved(resolved):
            return None
        schedule = _Decoder().value(payload)
    except Exception:  # whatever an entry does wrong, the files are parsed instead
        return None
    return schedule if isinstance(schedule, Schedule) else None


def _still_resolved(resolved: Any) -> bool:
    """Whether every path the files named resolves to what it did when they were parsed."""
    from cronctl.core.values import resolve_path

    for (kind, base, text), then in resolved:
        try:
            if str(resolve_path(kind, Path(base), text)) != then:
                return False
        except (OSError, RuntimeError, ValueError):
            return False
    return True


def _write(
    where: Path, name: str, key: Any, schedule: Schedule, resolved: Mapping[Any, Path]
) -> None:
    """Keep the entry (write, then rename into place); any failure just keeps none."""
    from cronctl.edge.paths import open_dir, open_nofollow

    try:
        payload = _encode(schedule)
        data = marshal.dumps((key, tuple((k, str(v)) for k, v in resolved.items()), payload))
    except (_Uncacheable, ValueError, AttributeError):  # a value no entry can hold
        return
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


#: A temporary entry older than this was left by a writer that died (kill -9 mid-write).
STALE_TEMP_S = 3600


def _sweep_temps(dir_fd: int) -> None:
    """Remove the temporary entries dead writers left (only when writing: a miss is rare)."""
    import time

    cutoff = time.time() - STALE_TEMP_S
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            if entry.name.startswith(".schedule-") and entry.name.endswith(".tmp"):
                with suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        os.unlink(entry.name, dir_fd=dir_fd)


# --- the entry's values: plain data marshal can hold ---------------------------------------
#
# Every container is a tuple whose first item is a one-letter tag, so a tuple of the schedule
# (a command's argv) and a tuple of the encoding can never be taken for each other. Scalars
# and frozensets of scalars (a CronExpr's fields) are kept as they are.

_SCALARS = (str, int, float, bool, type(None), bytes)


def _encode(value: Any) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is tuple:
        return ("t", tuple(_encode(v) for v in value))
    if kind is list:
        return ("l", tuple(_encode(v) for v in value))
    if kind is dict:
        return ("d", tuple((_encode(k), _encode(v)) for k, v in value.items()))
    if kind is frozenset and all(type(v) in _SCALARS for v in value):
        return value
    if kind is PosixPath:
        return ("p", str(value))
    if kind is timedelta:
        return ("T", value.days, value.seconds, value.microseconds)
    if kind is datetime and value.tzinfo is UTC:
        return ("D", value.year, value.month, value.day, value.hour, value.minute,
                value.second, value.microsecond)  # fmt: skip
    if kind is Zone:
        return ("Z", value.name)
    name = kind.__name__
    if _RECORDS.get(name) is kind:
        from cronctl.core.record import field_values

        return ("R", name, tuple(_encode(v) for v in field_values(value)))
    raise _Uncacheable(f"{kind.__qualname__} is not kept in the schedule cache")


class _Decoder:
    """The values back from the entry. Records get their fields through `__setstate__` (what
    pickle uses: no `__init__` to compile), and equal paths are one Path object."""

    def __init__(self) -> None:
        self.paths: dict[str, Path] = {}

    def value(self, value: Any) -> Any:
        if type(value) is not tuple:
            return value
        tag = value[0]
        if tag == "R":
            cls = _RECORDS.get(value[1])
            if cls is None or len(value[2]) != len(cls.__record_fields__):
                raise _Uncacheable(value[1])
            made = cls.__new__(cls)
            made.__setstate__([v if type(v) is not tuple else self.value(v) for v in value[2]])
            return made
        if tag == "t":
            return tuple([v if type(v) is not tuple else self.value(v) for v in value[1]])
        if tag == "p":
            path = self.paths.get(value[1])
            if path is None:
                path = self.paths[value[1]] = Path(value[1])
            return path
        if tag == "d":
            return {self.value(k): self.value(v) for k, v in value[1]}
        if tag == "Z":  # as parsing gives it now: a zone gone from the database is a miss
            return parse_zone(value[1])
        if tag == "T":
            return timedelta(value[1], value[2], value[3])
        if tag == "D":
            year, month, day, hour, minute, second, micro = value[1:]
            return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)
        if tag == "l":
            return [self.value(v) for v in value[1]]
        raise _Uncacheable(repr(tag))
