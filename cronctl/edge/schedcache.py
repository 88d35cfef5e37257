"""The parsed schedule kept between `run`s, so a minute whose files did not change skips
tomllib and the schema: their imports and the parse (for 100 tasks, about a quarter of the
instructions of a `run` with nothing due; docs/benchmarks.md, fifth round). `list` reads and
keeps the same entries (cli/common.load_cached); `check` never does.

An entry is used only when everything the parse read is as it was then, so it can never be
stale; anything else is a miss, and a miss parses the files as if there were no cache:

- the bytes of every file, and the paths they were named by, from the same working
  directory;
- ``$HOME`` (``~`` in a path) and cronctl's own parsing code (version, Python, and the size
  and modification time of each source file in ``cronctl/core``, of ``edge/schedfiles.py`` and
  of this module);
- every path the files' text was resolved to (``workdir`` and the ``[cronctl]`` paths),
  resolved again now: a link swapped under a workdir (a deploy's ``current``) is a miss;
- every IANA time zone, looked up again in the time zone database as the parse does.

Beside an entry, under the same key, `run` keeps the hint a quiet minute is dealt with from
(cronctl/run/quiet.py: `Lookup.read` and `Lookup.keep` serve both). A schedule with
errors is never kept. The entry is a ``marshal`` of plain values (no pickle:
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
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cronctl.errors import CronctlError, UsageError

if TYPE_CHECKING:
    from cronctl.core.model import Schedule

# The schedule model, the zones and datetime are imported by the functions that build or
# read an entry's schedule: a quiet minute (cronctl/run/quiet.py) reads only the key.

#: Bumped whenever the entry's layout changes.
FORMAT = 2
#: The variable naming the cache directory; "off" turns the cache off.
ENV = "CRONCTL_CACHE_DIR"
#: A larger entry is not read (100 tasks make ~46 KB, 10,000 about 3.5 MB).
MAX_ENTRY = 256 * 1024 * 1024


def _records() -> dict[str, Any]:
    """The record classes an entry may hold, by name (an allow-list: nothing else is made)."""
    from cronctl.core.cronexpr import CronExpr
    from cronctl.core.model import Problem, Schedule, Settings, Task

    return {cls.__name__: cls for cls in (Schedule, Task, Settings, Problem, CronExpr)}


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


class Lookup:
    """The schedule files one `run` read, and where their parse is kept: the entry's
    directory, its name and key (None: no cache here), and, once the schedule is known to be
    the entry's or was kept in it, the paths its text resolved to (see still_resolved)."""

    __slots__ = ("contents", "key", "name", "paths", "resolved", "where")

    def __init__(self, paths: Sequence[Path], env: Mapping[str, str]) -> None:
        """Read the files and work out the key (see _key)."""
        from cronctl.edge.schedfiles import read_bytes

        self.paths = paths
        self.contents = [read_bytes(p) for p in paths]
        self.where = cache_dir(env, os.geteuid() == 0)
        self.key = _key(paths, self.contents, env) if self.where is not None else None
        self.name = _entry_name(self.key) if self.key is not None else ""
        self.resolved: tuple[Any, ...] | None = None

    def read(self, kind: str) -> Any:
        """The value kept as `kind` ("schedule", or a companion such as "quiet") for this
        very key, or None (none, another key, unsafe, damaged: all a miss)."""
        if self.where is None or self.key is None:
            return None
        found = _read(self.where, f"{kind}-{self.name}")
        try:
            stored_key, value = found
        except (TypeError, ValueError):
            return None
        return value if stored_key == self.key else None

    def keep(self, kind: str, value: Any) -> None:
        """Keep `value` as `kind` for this key (write, then rename into place); any failure
        just keeps nothing."""
        if self.where is None or self.key is None:
            return
        try:
            data = marshal.dumps((self.key, value))
        except ValueError:  # a value marshal cannot hold
            return
        _write(self.where, f"{kind}-{self.name}", data)


def load(paths: Sequence[Path], env: Mapping[str, str], look: Lookup | None = None) -> Schedule:
    """The schedule of these files (already read, in `look`): from the cache when nothing it
    was parsed from changed, else parsed (and kept for the next run when it has no errors)."""
    from cronctl.edge.schedfiles import parse_all

    look = look or Lookup(paths, env)
    if look.key is None:
        return parse_all(look.paths, look.contents)[0]
    found = look.read("schedule")
    if found is not None:
        schedule = _use(found, look)
        if schedule is not None:
            return schedule
    schedule, resolved = parse_all(look.paths, look.contents)
    if not schedule.errors:
        try:
            payload = _encode(schedule)
        except (_Uncacheable, ValueError, AttributeError):  # a value no entry can hold
            return schedule
        look.resolved = tuple((k, str(v)) for k, v in resolved.items())
        look.keep("schedule", (look.resolved, payload))
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
    return _crc(repr((cwd, [name for name, _ in files])).encode())


def _code_stamp() -> tuple[Any, ...] | None:
    """cronctl's version and its parsing code's files (size, mtime): every module of
    cronctl/core, edge/schedfiles.py (the decoding) and this one. An edited or upgraded cronctl
    never reads an entry an older one wrote."""
    from cronctl._version import __version__

    edge = Path(__file__).parent
    try:
        with os.scandir(edge.parent / "core") as entries:
            files = [
                (e.name, e.stat().st_size, e.stat().st_mtime_ns)
                for e in entries
                if e.name.endswith(".py")
            ]
        for own in (edge / "schedfiles.py", Path(__file__), edge.parent / "run" / "quiet.py"):
            st = own.stat()
            files.append((f"{own.parent.name}/{own.name}", st.st_size, st.st_mtime_ns))
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


def _use(found: Any, look: Lookup) -> Schedule | None:
    """The entry's schedule if it was parsed from what is there now, else None."""
    from cronctl.core.model import Schedule

    try:
        resolved, payload = found
        if not still_resolved(resolved):
            return None
        schedule = _Decoder().value(payload)
    except Exception:  # whatever an entry does wrong, the files are parsed instead
        return None
    if not isinstance(schedule, Schedule):
        return None
    look.resolved = resolved
    return schedule


def still_resolved(resolved: Any) -> bool:
    """Whether every path the files named resolves to what it did when they were parsed."""
    from cronctl.core.values import resolve_path

    for (kind, base, text), then in resolved:
        try:
            if str(resolve_path(kind, Path(base), text)) != then:
                return False
        except (OSError, RuntimeError, ValueError):
            return False
    return True


def _write(where: Path, name: str, data: bytes) -> None:
    """Write entry `name` (then rename it into place); any failure just keeps none."""
    from cronctl.edge.paths import open_dir, open_nofollow

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
            if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                with suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        os.unlink(entry.name, dir_fd=dir_fd)


# --- the entry's values: plain data marshal can hold ---------------------------------------
#
# Every container is a tuple whose first item is a one-letter tag, so a tuple of the schedule
# (a command's argv) and a tuple of the encoding can never be taken for each other. Scalars
# and frozensets of scalars (a CronExpr's fields) are kept as they are.

_SCALARS = (str, int, float, bool, type(None), bytes)


def _encode(schedule: Any) -> Any:
    """A schedule (or any value of one) as the entry's tagged plain values."""
    from datetime import UTC, datetime, timedelta
    from pathlib import PosixPath

    from cronctl.core.zones import Zone

    records = _records()
    shared: dict[int, Any] = {}  # a record the parse shares is one tuple (marshal keeps that)

    def encode(value: Any) -> Any:
        kind = type(value)
        if kind in _SCALARS:
            return value
        if kind is tuple:
            return ("t", tuple(encode(v) for v in value))
        if kind is list:
            return ("l", tuple(encode(v) for v in value))
        if kind is dict:
            return ("d", tuple((encode(k), encode(v)) for k, v in value.items()))
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
        if records.get(name) is kind:
            done = shared.get(id(value))
            if done is None:
                values = tuple(encode(getattr(value, f.name)) for f in fields(value))
                done = shared[id(value)] = ("R", name, values)
            return done
        raise _Uncacheable(f"{kind.__qualname__} is not kept in the schedule cache")

    return encode(schedule)


class _Decoder:
    """The values back from the entry. Records get their fields set directly (as
    pickle uses: no `__init__` to compile), and equal paths are one Path object. A record the
    parse shared (one CronExpr per expression text, which `list` and `check` group tasks by)
    is one object again: its entry is one tuple, made once."""

    def __init__(self) -> None:
        from datetime import UTC, datetime, timedelta

        from cronctl.core.zones import parse_zone

        self.paths: dict[str, Path] = {}
        self.made: dict[int, Any] = {}
        self.records = _records()
        self.parse_zone = parse_zone
        self.timedelta, self.datetime, self.utc = timedelta, datetime, UTC
        self.names: dict[type, tuple[str, ...]] = {}

    def field_names(self, cls: type) -> tuple[str, ...]:
        """A record class's field names, in order (asked once per class)."""
        names = self.names.get(cls)
        if names is None:
            names = self.names[cls] = tuple(f.name for f in fields(cls))
        return names

    def value(self, value: Any) -> Any:
        if type(value) is not tuple:
            return value
        tag = value[0]
        if tag == "R":
            made = self.made.get(id(value))
            if made is not None:
                return made
            cls = self.records.get(value[1])
            if cls is None or len(value[2]) != len(names := self.field_names(cls)):
                raise _Uncacheable(value[1])
            made = self.made[id(value)] = cls.__new__(cls)
            for name, v in zip(names, value[2], strict=True):
                object.__setattr__(made, name, v if type(v) is not tuple else self.value(v))
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
            return self.parse_zone(value[1])
        if tag == "T":
            return self.timedelta(value[1], value[2], value[3])
        if tag == "D":
            year, month, day, hour, minute, second, micro = value[1:]
            return self.datetime(year, month, day, hour, minute, second, micro, tzinfo=self.utc)
        if tag == "l":
            return [self.value(v) for v in value[1]]
        raise _Uncacheable(repr(tag))
