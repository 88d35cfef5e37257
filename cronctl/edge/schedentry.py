"""The parsed schedule as an entry of `run`'s cache: decoded on a hit, kept after a parse
(never with errors). A hit skips tomllib, the schema and the parse (docs/benchmarks.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path, PosixPath
from typing import Any

from cronctl.core.cronexpr import CronExpr
from cronctl.core.model import Problem, Schedule, Settings, Task
from cronctl.core.zones import Zone, parse_zone
from cronctl.edge.schedcache import Lookup, still_resolved
from cronctl.edge.schedpaths import read_bytes

# The record classes an entry may hold, by name (an allow-list: nothing else is made).
_RECORDS: dict[str, Any] = {
    cls.__name__: cls for cls in (Schedule, Task, Settings, Problem, CronExpr)
}
# Plain data marshal can hold: every container a tuple tagged by its first item (so a tuple of
# the schedule, an argv, is never taken for one of the encoding); scalars and frozensets of
# scalars (a CronExpr's fields) as they are.
_SCALARS = (str, int, float, bool, type(None), bytes)


class _Uncacheable(Exception):
    """A value the entry cannot hold, or an entry that does not decode: parse instead."""


def load(paths: Sequence[Path], env: Mapping[str, str], look: Lookup | None = None) -> Schedule:
    """From the cache when nothing it was parsed from changed, else parsed (and kept)."""
    look = look or Lookup(paths, env)
    found = look.read("schedule")
    schedule = None if found is None else _use(found, look)
    if schedule is not None:
        return schedule
    schedule, resolved = _parse(look.paths, look.contents)
    if not schedule.errors and look.key is not None:
        try:
            payload = _encode(schedule)
        except (_Uncacheable, ValueError, AttributeError):  # a value no entry can hold
            return schedule
        look.resolved = tuple((k, str(v)) for k, v in resolved.items())
        look.keep("schedule", (look.resolved, payload))
    return schedule


def load_uncached(paths: Sequence[Path]) -> Schedule:
    """For `check`, which never trusts a cache."""
    return _parse(paths, [read_bytes(p) for p in paths])[0]


def _parse(
    paths: Sequence[Path], contents: Sequence[bytes]
) -> tuple[Schedule, dict[tuple[str, str, str], Path]]:
    # Imported here, not at the top: a hit never needs the parser (tomllib, the schema).
    from cronctl.edge import schedfiles

    return schedfiles.parse_all(paths, contents)


def _use(found: Any, look: Lookup) -> Schedule | None:
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


def _encode(schedule: Any) -> Any:
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
            return ("D", *value.timetuple()[:6], value.microsecond)
        if kind is Zone:
            return ("Z", value.name)
        name = kind.__name__
        if _RECORDS.get(name) is kind:
            done = shared.get(id(value))
            if done is None:
                values = tuple(encode(getattr(value, f.name)) for f in fields(value))
                done = shared[id(value)] = ("R", name, values)
            return done
        raise _Uncacheable(f"{kind.__qualname__} is not kept in the schedule cache")

    return encode(schedule)


@cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


class _Decoder:
    """The values back from the entry: records' fields set directly (no `__init__`), equal
    paths one Path, a record the parse shared (one CronExpr per text) one object again."""

    def __init__(self) -> None:
        self.paths: dict[str, Path] = {}
        self.made: dict[int, Any] = {}

    def value(self, value: Any) -> Any:
        if type(value) is not tuple:
            return value
        tag = value[0]
        if tag == "R":
            made = self.made.get(id(value))
            if made is not None:
                return made
            cls = _RECORDS.get(value[1])
            if cls is None or len(value[2]) != len(names := _field_names(cls)):
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
            return parse_zone(value[1])
        if tag == "T":
            return timedelta(*value[1:])
        if tag == "D":
            year, month, day, hour, minute, second, micro = value[1:]
            return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)
        if tag == "l":
            return [self.value(v) for v in value[1]]
        raise _Uncacheable(repr(tag))
