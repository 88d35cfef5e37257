"""`list` on a large, varied schedule prints what it printed before it was made fast.

Three things stand behind a fast `list`: the schedule read from `run`'s cache when its files
did not change, the rows' shared texts formatted once, and the piped table formatted a row at
a time with `%`. Each is held here against the slow way on the same schedule: the cache hit
against a miss and no cache at all (real processes), the rows built task by task as `list`
built them, and the table laid out with `ljust` as it was.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from cronctl.cli.fastpath import parse_instant
from cronctl.cli.render.tables import local_time, plain_table
from cronctl.commands import schedule as service
from cronctl.core.describe import describe
from cronctl.core.model import format_utc
from cronctl.edge.schedfiles import load_paths
from tests.helpers import Cli, invoke

NOW = "2026-03-28T23:59:00Z"  # DST seams in Europe the next night: gaps and overlaps to warn of
SCHEDULES = [
    'cron = "{m} {h} * * *"',
    'cron = "*/5 {h}-{h2} * * MON-FRI"',
    'cron = "{m} {h} 1,15 * 1"',
    'cron = "30 2 * * *"',
    'cron = "0,30 2 * * *"',
    'cron = "* 2 * * 0"',
    "every_minutes = {e}",
    "hourly_at = {m}",
    'daily_at = "{h:02d}:{m:02d}"',
    "twice_daily = [{h}, {h3}]",
    'weekly_on = ["MON", "{h:02d}:{m:02d}"]',
    'monthly_on = [{d}, "{h:02d}:{m:02d}"]',
    "yearly = true",
]
EXTRAS = [
    'without_overlapping = "30m"',
    "on_one_server = true",
    'when = "test -e /tmp/x"',
    'timeout = "1h30m"',
    'misfire = "catch-up"',
    "paused = true",
    'hosts = ["web-*"]',
    "retries = 3",
    'jitter = "5m"',
    'ping_url = "https://hc-ping.com/x"',
    'env = { A = "1" }',
]
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "+05:30", "-03:00", "Australia/Sydney"]


def varied_schedule(count: int, seed: int, duplicate: bool = True) -> str:
    """`count` tasks over every kind of schedule, zone and guard; one name used twice (an
    error, so never kept in the cache) unless `duplicate` is false."""
    rng = random.Random(seed)
    tables = ['[defaults]\nmisfire = "coalesce"\n']
    for i in range(count):
        m, h = rng.randrange(60), rng.randrange(24)
        schedule = rng.choice(SCHEDULES).format(
            m=m, h=h, h2=min(h + 3, 23), h3=(h + 12) % 24, e=rng.choice([1, 5, 30]),
            d=rng.randint(1, 28),
        )  # fmt: skip
        lines = ["[[task]]", f'name = "job-{i:05d}"', 'command = "true"', schedule]
        if rng.random() < 0.8:
            lines.append(f'timezone = "{rng.choice(ZONES)}"')
        lines += rng.sample(EXTRAS, rng.choice([0, 0, 1, 2]))
        tables.append("\n".join(lines) + "\n")
    if duplicate:
        tables.append('[[task]]\nname = "job-00001"\ncommand = "true"\nhourly = true\n')
    return "\n".join(tables)


LISTS = (["list", "--host", "web-1"], ["list", "--local", "--host", "web-1"], ["list", "--json"])


def _entry(cache: Path) -> tuple[int, int]:
    """The schedule entry's inode and mtime: a hit leaves both, a miss writes a new file."""
    (entry,) = cache.glob("schedule-*")
    st = entry.stat()
    return st.st_ino, st.st_mtime_ns


def test_list_prints_the_same_from_the_cache_as_parsed(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(varied_schedule(2_000, seed=13, duplicate=False))
    cache = tmp_path / "cache"
    for args in LISTS:
        # -v: text names the warnings only when asked (JSON always has them).
        verbose = [] if "--json" in args else ["-v"]
        argv = [*args, "-f", "s.toml", "--now", NOW, *verbose]
        off = cli(*argv, env={"CRONCTL_CACHE_DIR": "off"})
        shutil.rmtree(cache, ignore_errors=True)
        missed = cli(*argv, env={"CRONCTL_CACHE_DIR": str(cache)})
        written = _entry(cache)
        hit = cli(*argv, env={"CRONCTL_CACHE_DIR": str(cache)})
        assert _entry(cache) == written  # read, not parsed and written again
        assert off.returncode == missed.returncode == hit.returncode == 0
        assert off.stdout.count("\n") > 2_000
        assert "warning" in off.stdout + off.stderr  # DST seams: problems come from the entry
        assert missed.stdout == hit.stdout == off.stdout
        assert missed.stderr == hit.stderr == off.stderr


def test_list_sees_an_edit_between_two_lists(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    text = varied_schedule(200, seed=7, duplicate=False)
    path.write_text(text)
    cache = tmp_path / "cache"
    env = {"CRONCTL_CACHE_DIR": str(cache)}
    argv = ["list", "-f", "s.toml", "--now", NOW, "--host", "web-1"]
    before = cli(*argv, env=env)
    assert cli(*argv, env=env).stdout == before.stdout  # a hit
    written = _entry(cache)
    path.write_text(text.replace('name = "job-00042"', 'name = "renamed-42"'))
    after = cli(*argv, env=env)
    assert after.returncode == 0
    assert "renamed-42" in after.stdout and "job-00042" not in after.stdout
    assert _entry(cache) != written  # parsed again and kept
    assert after.stdout == cli(*argv, env={"CRONCTL_CACHE_DIR": "off"}).stdout


def test_check_never_reads_or_keeps_the_cache(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(varied_schedule(50, seed=3, duplicate=False))
    cache = tmp_path / "cache"
    done = cli("check", "-f", "s.toml", "--now", NOW, env={"CRONCTL_CACHE_DIR": str(cache)})
    assert done.returncode in (0, 1)
    assert not cache.exists()


@pytest.mark.parametrize("local", [False, True])
def test_list_prints_each_row_as_formatted_task_by_task(
    cli: Cli, tmp_path: Path, local: bool
) -> None:
    path = tmp_path / "s.toml"
    path.write_text(varied_schedule(1_500, seed=int(local)))
    flags = ["--local"] if local else []
    args = ["list", "-f", str(path), "--now", NOW, "--host", "db-1", *flags]
    done = invoke(*args, cwd=tmp_path, env=dict(cli.env))
    assert done.returncode == 2  # the duplicate name
    schedule = load_paths([path])
    result = service.list_tasks(schedule, parse_instant(NOW), [], {}, frozenset(), "db-1")
    rows = []
    for row in result.rows:  # as render_list built them before its texts were shared
        task = row.task
        when = row.next_run
        shown = (
            "-" if when is None else (local_time(when, task.zone) if local else format_utc(when))
        )
        next_run = "paused" if row.paused else shown
        if row.other_hosts:
            next_run = "other hosts"
        guards = ",".join(task.guards) or "-"
        rows.append(
            [task.name, task.schedule, task.zone.name, next_run, guards, "-", describe(task)]
        )
    headers = ["TASK", "SCHEDULE", "TIMEZONE", "NEXT RUN", "GUARDS", "LAST RUN", "WHEN"]
    assert done.stdout == _ljust_table(headers, rows)


def _ljust_table(headers: list[str], rows: list[list[str]]) -> str:
    """The piped table as it was laid out before plain_table."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    return "".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n"
        for row in [headers, *rows]
    )


def test_plain_table_lays_out_cells_as_ljust_did() -> None:
    rng = random.Random(6)
    pieces = ["a", " ", "%", "%s", "%%", "漢", "😀", "\t", "", "x y", "-"]

    def cell() -> str:
        return "".join(rng.choice(pieces) for _ in range(rng.randint(0, 5)))

    for _ in range(2_000):
        headers = [cell() for _ in range(rng.randint(1, 6))]
        rows = [[cell() for _ in headers] for _ in range(rng.randint(0, 6))]
        assert plain_table(headers, rows) == _ljust_table(headers, rows)


def test_plain_table_refuses_a_row_of_another_length() -> None:
    with pytest.raises(ValueError):
        plain_table(["A", "B"], [["1", "2"], ["3"]])
    with pytest.raises(ValueError):
        plain_table(["A", "B"], [["1", "2", "3"]])
