"""`run`'s cache of parsed schedules (cronctl/edge/schedcache.py, the entries and their key;
cronctl/edge/schedentry.py, the schedule in an entry): a hit is exactly what a parse would give,
anything the parse read that changed is a miss, and nothing wrong with the cache itself ever
fails a run or makes cronctl follow a link."""

from __future__ import annotations

import dataclasses
import marshal
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from cronctl.edge import schedcache, schedentry
from cronctl.edge import schedfiles as files
from cronctl.edge.schedfiles import load_paths
from cronctl.errors import UsageError
from tests.helpers import REPO_ROOT, Cli, write_schedule

VALID = sorted((REPO_ROOT / "tests" / "data" / "valid").glob("*.toml"))
EXAMPLE = REPO_ROOT / "schedules.example.toml"
NOW = "2026-08-03T09:00:00Z"
HOURLY = 'name = "a"\ncommand = "true"\nhourly = true'


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, ...]]:
    """Every parse schedentry.load asks for (a hit asks for none)."""
    seen: list[tuple[Path, ...]] = []
    real = files.parse_all

    def counted(paths: Any, contents: Any) -> Any:
        seen.append(tuple(paths))
        return real(paths, contents)

    monkeypatch.setattr(files, "parse_all", counted)
    return seen


def load(paths: list[Path], cache: Path, **env: str) -> Any:
    return schedentry.load(paths, {"CRONCTL_CACHE_DIR": str(cache), "HOME": "/root", **env})


def same(a: object, b: object, where: str = "schedule") -> None:
    """Equal, and of the same types all the way down (a str is not a Path, a list no tuple)."""
    assert type(a) is type(b), f"{where}: {type(a)} != {type(b)}"
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, tuple | list):
        assert len(a) == len(b), where  # type: ignore[arg-type]
        for i, (x, y) in enumerate(zip(a, b, strict=True)):  # type: ignore[call-overload]
            same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where  # type: ignore[attr-defined]
        for key in a:
            same(a[key], b[key], f"{where}[{key!r}]")  # type: ignore[index]
    else:
        assert a == b, where


def entries(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


# --- a hit is the parse -------------------------------------------------------------------


@pytest.mark.parametrize("path", [EXAMPLE, *VALID], ids=lambda p: p.name)
def test_a_hit_gives_exactly_what_parsing_gives(
    path: Path, tmp_path: Path, cache: Path, parses: list[tuple[Path, ...]]
) -> None:
    copy = shutil.copy(path, tmp_path / path.name)
    parsed = load_paths([Path(copy)])
    first = load([Path(copy)], cache)
    second = load([Path(copy)], cache)
    assert len(parses) == 1, "the second load parsed again"
    same(parsed, first)
    same(parsed, second)
    assert second.tasks and len(entries(cache)) == 1
    assert sharing(second) == sharing(parsed)


def sharing(schedule: Any) -> list[tuple[int, int]]:
    """Which tasks share one expression object and one zone object (what `list` and `check`
    group tasks by): the first task holding each, per task."""
    firsts: dict[int, int] = {}
    return [
        (firsts.setdefault(id(t.cron), i), firsts.setdefault(id(t.zone), i))
        for i, t in enumerate(schedule.tasks)
    ]


def test_a_hit_shares_each_expression_as_the_parse_does(tmp_path: Path, cache: Path) -> None:
    tasks = [f'name = "t{i}"\ncommand = "true"\ncron = "{i % 3} * * * *"' for i in range(9)]
    path = write_schedule(tmp_path / "s.toml", tasks)
    parsed = load_paths([path])
    load([path], cache)
    hit = load([path], cache)
    assert hit.tasks[0].cron is hit.tasks[3].cron is hit.tasks[6].cron
    assert hit.tasks[0].cron is not hit.tasks[1].cron
    assert sharing(hit) == sharing(parsed) == [(i % 3, 0) for i in range(9)]


def test_several_files_make_one_entry_and_a_hit(
    tmp_path: Path, cache: Path, parses: list[tuple[Path, ...]]
) -> None:
    a = write_schedule(tmp_path / "a.toml", ['name = "a"\ncommand = "true"\nevery_minute = true'])
    b = write_schedule(tmp_path / "b.toml", ['name = "b"\ncommand = "true"\nhourly = true'])
    same(load_paths([a, b]), load([a, b], cache))
    same(load_paths([a, b]), load([a, b], cache))
    assert len(parses) == 1
    load([b, a], cache)  # another order is another schedule (the first definition wins)
    assert len(parses) == 2


def test_an_edited_file_is_parsed_again_even_with_its_old_size_and_time(
    tmp_path: Path, cache: Path, parses: list[tuple[Path, ...]]
) -> None:
    path = write_schedule(tmp_path / "s.toml", ['name = "a"\ncommand = "echo 1"\nhourly = true'])
    load([path], cache)
    before = path.stat()
    path.write_text(path.read_text().replace("echo 1", "echo 2"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert load([path], cache).tasks[0].command == "echo 2"
    assert len(parses) == 2
    assert load([path], cache).tasks[0].command == "echo 2"
    assert len(parses) == 2  # the new parse replaced the entry
    assert len(entries(cache)) == 1


@pytest.mark.parametrize("through", ["workdir", "file"])
def test_a_link_swapped_under_a_workdir_is_a_miss(
    through: str, tmp_path: Path, cache: Path, parses: list[tuple[Path, ...]]
) -> None:
    # A deploy's `current -> releases/N`: the bytes do not change, the directory does. The
    # link is named by `workdir`, or it leads to the file, whose directory is the default.
    for release in ("r1", "r2"):
        (tmp_path / release).mkdir()
        write_schedule(tmp_path / release / "s.toml", [HOURLY])
    (tmp_path / "current").symlink_to("r1")
    if through == "workdir":
        path = write_schedule(tmp_path / "s.toml", [f'{HOURLY}\nworkdir = "current"'])
    else:
        path = tmp_path / "current" / "s.toml"
    assert load([path], cache).tasks[0].workdir == tmp_path / "r1"
    assert load([path], cache).tasks[0].workdir == tmp_path / "r1"
    (tmp_path / "current").unlink()
    (tmp_path / "current").symlink_to("r2")
    assert load([path], cache).tasks[0].workdir == tmp_path / "r2"
    assert len(parses) == 2


def test_home_and_the_working_directory_are_part_of_the_key(
    tmp_path: Path, cache: Path, parses: list[tuple[Path, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    for d in ("one", "two"):
        (tmp_path / d).mkdir()
        write_schedule(
            tmp_path / d / "s.toml",
            ['name = "a"\ncommand = "true"\nhourly = true\nworkdir = "~/w"'],
        )

    def workdir(home: str) -> Path:
        monkeypatch.setenv("HOME", home)  # expanduser reads this process's HOME
        task = load([Path("s.toml")], cache, HOME=home).tasks[0]
        assert task.source == Path("s.toml")
        return task.workdir  # type: ignore[no-any-return]

    monkeypatch.chdir(tmp_path / "one")
    assert workdir("/home/ann") == Path("/home/ann/w")
    assert workdir("/home/bob") == Path("/home/bob/w")
    monkeypatch.chdir(tmp_path / "two")
    assert workdir("/home/bob") == Path("/home/bob/w")
    assert len(parses) == 3
    monkeypatch.chdir(tmp_path / "one")
    workdir("/home/bob")
    assert len(parses) == 3, "one/s.toml's entry was lost to two/s.toml's"


def test_a_schedule_with_errors_is_never_kept(tmp_path: Path, cache: Path) -> None:
    bad = write_schedule(
        tmp_path / "bad.toml", [HOURLY.replace("hourly = true", 'cron = "61 * *"')]
    )
    assert load([bad], cache).errors
    assert load([bad], cache).errors
    assert entries(cache) == []


def test_problems_and_settings_round_trip(tmp_path: Path) -> None:
    from dataclasses import replace

    from cronctl.core.model import Problem, Settings

    schedule = replace(
        load_paths([EXAMPLE]),
        problems=(Problem("f.toml", 3, "a", "warning", "code", "message"),),
        settings=Settings(state_dir=tmp_path, metrics_file=tmp_path / "m.prom", max_parallel=3),
    )
    same(schedule, schedentry._Decoder().value(schedentry._encode(schedule)))


# --- a damaged, planted or unusable cache -------------------------------------------------


def _primed(tmp_path: Path, cache: Path) -> tuple[Path, Path]:
    path = write_schedule(tmp_path / "s.toml", [HOURLY])
    load([path], cache)
    (entry,) = cache.iterdir()
    return path, entry


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"\x00garbage",
        marshal.dumps(("not", "an", "entry")),
        marshal.dumps((1, 2)),
        None,  # the real entry cut in half
    ],
    ids=["empty", "garbage", "wrong-shape", "short", "truncated"],
)
def test_a_damaged_entry_is_parsed_again_and_replaced(
    damage: bytes | None, tmp_path: Path, cache: Path, parses: list[tuple[Path, ...]]
) -> None:
    path, entry = _primed(tmp_path, cache)
    good = entry.read_bytes()
    entry.write_bytes(good[: len(good) // 2] if damage is None else damage)
    assert load([path], cache).tasks[0].name == "a"
    assert len(parses) == 2
    assert entry.read_bytes() == good


def _with_payload(entry: Path, payload: object) -> bytes:
    """The entry's bytes with its key and resolved paths kept and another payload."""
    key, (resolved, _) = marshal.loads(entry.read_bytes())  # noqa: S302  (the test's own file)
    return marshal.dumps((key, (resolved, payload)))


def test_an_entry_with_a_foreign_record_or_tag_is_a_miss(
    tmp_path: Path, cache: Path, parses: list[tuple[Path, ...]]
) -> None:
    path, entry = _primed(tmp_path, cache)
    for payload in [("R", "Popen", ()), ("?", 1), ("R", "Task", ("t", ()))]:
        entry.write_bytes(_with_payload(entry, payload))
        assert load([path], cache).tasks[0].name == "a"
    assert len(parses) == 4


def test_a_link_planted_at_the_entry_is_never_followed(
    tmp_path: Path, cache: Path, parses: list[tuple[Path, ...]]
) -> None:
    path, entry = _primed(tmp_path, cache)
    # A valid entry for these very files, but another command, placed where a link points.
    other = write_schedule(tmp_path / "other.toml", [HOURLY.replace('"true"', '"evil"')])
    planted = _with_payload(entry, schedentry._encode(load_paths([other])))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(planted)
    entry.write_bytes(planted)
    assert load([path], cache).tasks[0].command == "evil", "the planted entry is not valid"
    entry.unlink()
    entry.symlink_to(elsewhere)
    assert load([path], cache).tasks[0].command == "true"
    assert len(parses) == 2
    assert elsewhere.read_bytes() == planted, "the link's target was written"
    assert not entry.is_symlink(), "the new entry was not put in the link's place"
    assert load([path], cache).tasks[0].command == "true"
    assert len(parses) == 2


def test_a_group_writable_entry_or_unsafe_directory_is_not_used(
    tmp_path: Path, cache: Path, parses: list[tuple[Path, ...]]
) -> None:
    path, entry = _primed(tmp_path, cache)
    entry.chmod(0o620)
    load([path], cache)
    assert len(parses) == 2
    entry.unlink()
    cache.chmod(0o777)
    load([path], cache)
    load([path], cache)
    assert len(parses) == 4 and entries(cache) == [], "an entry went into a world-writable dir"


def test_a_cache_directory_that_is_a_link_is_not_used(
    tmp_path: Path, parses: list[tuple[Path, ...]]
) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "cache").symlink_to(real)
    path = write_schedule(tmp_path / "s.toml", [HOURLY])
    load([path], tmp_path / "cache")
    load([path], tmp_path / "cache")
    assert len(parses) == 2 and entries(real) == []


def test_no_usable_directory_just_means_no_cache(
    tmp_path: Path, parses: list[tuple[Path, ...]]
) -> None:
    path = write_schedule(tmp_path / "s.toml", [HOURLY])
    blocked = tmp_path / "file"
    blocked.write_text("")
    for where in (blocked, blocked / "cache"):
        assert load([path], where).tasks[0].name == "a"
        assert load([path], where).tasks[0].name == "a"
    assert len(parses) == 4
    fresh = tmp_path / "no" / "such" / "cache"  # missing parents are made, as for state dirs
    load([path], fresh)
    assert entries(fresh) and oct(fresh.stat().st_mode & 0o777) == "0o700"


def test_a_full_disk_leaves_no_partial_entry(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_schedule(tmp_path / "s.toml", [HOURLY])
    real_write = os.write

    def full(fd: int, data: Any) -> int:
        if len(data) > 100:
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(schedcache.os, "write", full)
    assert load([path], cache).tasks[0].name == "a"
    assert entries(cache) == []


def test_values_the_entry_cannot_hold_are_refused_not_mangled() -> None:
    for value in (object(), {1, 2}, bytearray(b"x"), Path("x").stat):
        with pytest.raises(schedentry._Uncacheable):
            schedentry._encode(value)
    from datetime import datetime, timedelta, timezone

    with pytest.raises(schedentry._Uncacheable):
        schedentry._encode(datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=1))))
    value = ("t", ("l", [1]), {"a": (1, "b")}, frozenset({1, 2}))
    assert schedentry._Decoder().value(schedentry._encode(value)) == value


# --- where the cache lives ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "is_root", "expected"),
    [
        ({}, True, "/var/cache/cronctl"),
        ({"HOME": "/home/ann"}, False, "/home/ann/.cache/cronctl"),
        ({"HOME": "/home/ann", "XDG_CACHE_HOME": "/xdg"}, False, "/xdg/cronctl"),
        ({"HOME": "/home/ann", "XDG_CACHE_HOME": "rel"}, False, "/home/ann/.cache/cronctl"),
        ({}, False, None),
        ({"HOME": "relative"}, False, None),
        ({"CRONCTL_CACHE_DIR": "/c", "HOME": "/home/ann"}, False, "/c"),
        ({"CRONCTL_CACHE_DIR": "/c"}, True, "/c"),
        ({"CRONCTL_CACHE_DIR": "off"}, True, None),
        # systemd's CacheDirectory=: after CRONCTL_CACHE_DIR, before the defaults.
        ({"CACHE_DIRECTORY": "/var/cache/app", "HOME": "/h"}, False, "/var/cache/app"),
        ({"CACHE_DIRECTORY": "/var/cache/u"}, True, "/var/cache/u"),
        ({"CACHE_DIRECTORY": "/var/cache/a:/var/cache/b"}, False, "/var/cache/a"),
        ({"CACHE_DIRECTORY": "/u", "CRONCTL_CACHE_DIR": "/c"}, False, "/c"),
        ({"CACHE_DIRECTORY": "/u", "CRONCTL_CACHE_DIR": "off"}, False, None),
        ({"CACHE_DIRECTORY": "rel", "HOME": "/h"}, False, "/h/.cache/cronctl"),
    ],
)
def test_cache_dir(env: Mapping[str, str], is_root: bool, expected: str | None) -> None:
    found = schedcache.cache_dir(env, is_root)
    assert (str(found) if found else None) == expected


@pytest.mark.parametrize("value", ["", "relative/dir", "~/cache"])
def test_a_cache_dir_that_is_not_absolute_is_a_usage_error(value: str) -> None:
    with pytest.raises(UsageError, match="CRONCTL_CACHE_DIR"):
        schedcache.cache_dir({"CRONCTL_CACHE_DIR": value}, False)


# --- `cronctl run`, real processes ----------------------------------------------------------


def test_run_keeps_an_entry_and_follows_every_edit(cli: Cli, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    cache = Path(cli.env["CRONCTL_CACHE_DIR"])
    path = write_schedule(
        tmp_path / "schedules.toml",
        [f'name = "a"\ncommand = "echo one >> {ledger}"\nevery_minute = true'],
    )
    assert cli("run", "--now", "2026-08-03T09:00:00Z").returncode == 0
    (entry,) = cache.glob("schedule-*")  # and the quiet-* hint beside it
    stamp = entry.stat().st_mtime_ns
    assert cli("run", "--now", "2026-08-03T09:01:00Z").returncode == 0
    assert entry.stat().st_mtime_ns == stamp, "a hit rewrote the entry"
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    assert oct(entry.stat().st_mode & 0o777) == "0o600"
    path.write_text(path.read_text().replace("echo one", "echo two"))
    assert cli("run", "--now", "2026-08-03T09:02:00Z").returncode == 0
    assert ledger.read_text().split() == ["one", "one", "two"]
    path.write_text(path.read_text().replace("every_minute = true", 'cron = "99 * * * *"'))
    broken = cli("run", "--now", "2026-08-03T09:03:00Z")
    assert broken.returncode == 2 and "nothing was run" in broken.stderr
    assert ledger.read_text().split() == ["one", "one", "two"]


def test_run_with_the_cache_off_or_misnamed(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", [HOURLY])
    cache = Path(cli.env["CRONCTL_CACHE_DIR"])
    assert cli("run", "--now", NOW, env={"CRONCTL_CACHE_DIR": "off"}).returncode == 0
    assert not cache.exists()
    wrong = cli("run", "--now", NOW, env={"CRONCTL_CACHE_DIR": "cache"})
    assert wrong.returncode == 2
    assert "CRONCTL_CACHE_DIR='cache' is not an absolute directory" in wrong.stderr


def test_a_time_zone_gone_from_the_database_is_a_miss(cli: Cli, tmp_path: Path) -> None:
    from zoneinfo import TZPATH

    # A zone of a name no database has (the tzdata package would answer for a real one).
    found = [Path(p) / "Europe" / "Berlin" for p in TZPATH]
    source = next((f for f in found if f.is_file()), None)
    if source is None:  # no system database: the tzdata package's copy
        from importlib.resources import files as package_files

        source = Path(str(package_files("tzdata") / "zoneinfo" / "Europe" / "Berlin"))
    tzdir = tmp_path / "zoneinfo"
    (tzdir / "Test").mkdir(parents=True)
    shutil.copy(source, tzdir / "Test" / "Gone")
    write_schedule(tmp_path / "schedules.toml", [f'{HOURLY}\ntimezone = "Test/Gone"'])
    env = {"PYTHONTZPATH": str(tzdir)}
    assert cli("run", "--now", NOW, env=env).returncode == 0
    assert cli("run", "--now", NOW, env=env).returncode == 0
    (tzdir / "Test" / "Gone").unlink()
    gone = cli("run", "--now", NOW, env=env)
    assert gone.returncode == 2
    assert "unknown time zone 'Test/Gone'" in gone.stderr


def test_runs_started_together_on_an_empty_cache_all_work(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [f'name = "t{i}"\ncommand = "true"\nhourly = true' for i in range(50)],
    )
    cache = Path(cli.env["CRONCTL_CACHE_DIR"])
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "cronctl", "run", "--dry-run", "--now", NOW],
            cwd=cli.cwd,
            env=dict(cli.env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(8)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    assert [p.name for p in cache.iterdir()] == entries(cache)
    (entry,) = cache.iterdir()
    assert not entry.name.startswith(".")
    assert cli("run", "--dry-run", "--now", NOW).returncode == 0


def test_an_entry_written_by_other_parsing_code_is_a_miss(
    tmp_path: Path, cache: Path, parses: list[tuple[Path, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = _primed(tmp_path, cache)
    real = schedcache._code_stamp
    monkeypatch.setattr(schedcache, "_code_stamp", lambda: (*real()[:-1], ()))  # type: ignore[misc]
    load([path], cache)
    assert len(parses) == 2
    monkeypatch.setattr(schedcache, "_code_stamp", lambda: None)
    load([path], cache)
    load([path], cache)
    assert len(parses) == 4  # no stamp, no cache


def test_the_code_stamp_names_the_parsing_modules() -> None:
    stamp = schedcache._code_stamp()
    assert stamp is not None
    names = {name for name, _, _ in stamp[-1]}
    assert {
        "schema.py",
        "model.py",
        "zones.py",
        "edge/schedfiles.py",
        "edge/schedentry.py",
        "edge/schedcache.py",
    } <= names


def test_doctor_says_whether_run_can_use_the_cache(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", [HOURLY])
    cache = Path(cli.env["CRONCTL_CACHE_DIR"])
    assert "does not exist yet" in cli("doctor").stdout
    assert cli("run", "--now", NOW).returncode == 0
    assert f"ok      schedule cache {cache}: usable, 1 entry" in cli("doctor").stdout
    cache.chmod(0o777)
    unusable = cli("doctor")
    assert unusable.returncode == 1
    assert f"WARN    schedule cache {cache}: run cannot use it" in unusable.stdout
    assert "world-writable" in unusable.stdout
    assert "every run parses" in cli("doctor", env={"CRONCTL_CACHE_DIR": "off"}).stdout
    wrong = cli("doctor", env={"CRONCTL_CACHE_DIR": "cache"})
    assert wrong.returncode == 1 and "PROBLEM schedule cache: CRONCTL_CACHE_DIR=" in wrong.stdout


def test_a_writer_killed_mid_write_leaves_nothing_for_long(tmp_path: Path, cache: Path) -> None:
    path, entry = _primed(tmp_path, cache)
    old, fresh = cache / ".schedule-0.1.tmp", cache / ".schedule-0.2.tmp"
    for left in (old, fresh):
        left.write_bytes(b"half an entry")
    os.utime(old, (1, 1))
    path.write_text(path.read_text() + "\n")  # a miss, so a write
    load([path], cache)
    assert not old.exists(), "a dead writer's temporary entry stayed"
    assert fresh.exists(), "a temporary entry that may still be being written was removed"
    assert entry.exists() and len(entries(cache)) == 2


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's file needs root")
def test_another_users_entry_or_directory_is_not_used(
    tmp_path: Path, cache: Path, parses: list[tuple[Path, ...]]
) -> None:
    nobody = 65534
    path, entry = _primed(tmp_path, cache)
    os.chown(entry, nobody, nobody)
    load([path], cache)
    assert len(parses) == 2, "another user's entry was read"
    (tmp_path / "theirs").mkdir(mode=0o700)
    os.chown(tmp_path / "theirs", nobody, nobody)
    load([path], tmp_path / "theirs")
    load([path], tmp_path / "theirs")
    assert len(parses) == 4 and entries(tmp_path / "theirs") == []
