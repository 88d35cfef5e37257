"""A minute with nothing due, dealt with from the hint an earlier quiet minute kept
(cronctl/run/quiet.py): it leaves exactly the state planning would, and it is used only
when the hint still proves that nothing is due."""

from __future__ import annotations

import marshal
import shutil
import sqlite3
import zoneinfo
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronctl.run import quiet
from tests.helpers import Cli, clean_env, invoke, write_schedule

# Fixed wall times inside the DST hours, steps, one-shots on both sides, every policy.
TASKS = [
    'name = "berlin-230"\ncommand = "true"\ncron = "30 2 * * *"\ntimezone = "Europe/Berlin"',
    'name = "berlin-every-7"\ncommand = "true"\ncron = "*/7 * * * *"\n'
    'timezone = "Europe/Berlin"\nmisfire = "catch-up"',
    'name = "ny-130"\ncommand = "true"\ncron = "30 1 * * *"\ntimezone = "America/New_York"\n'
    'misfire = "catch-up"',
    'name = "ny-hours"\ncommand = "true"\ncron = "15 1-3 * * *"\n'
    'timezone = "America/New_York"\nmisfire = "skip"',
    'name = "howe-0210"\ncommand = "true"\ncron = "10 2 * * *"\ntimezone = "Australia/Lord_Howe"',
    'name = "kathmandu"\ncommand = "true"\ncron = "50 * * * *"\ntimezone = "+05:45"',
    'name = "utc-quarter"\ncommand = "true"\ncron = "*/15 * * * *"',
    'name = "monthly"\ncommand = "true"\ncron = "0 4 1 * *"\ntimezone = "Europe/Berlin"',
    'name = "shot-past"\ncommand = "true"\nat = 2026-01-15T09:00:00Z',
    'name = "shot-soon"\ncommand = "true"\nat = 2026-10-25T01:40:00Z',
    'name = "shot-later"\ncommand = "true"\nat = 2026-11-01T06:20:00Z',
]

# The minutes to run at, each series on a state of its own: around 2026's transitions (Berlin
# and New York fall back, Lord Howe and Berlin spring forward: 02:30 carried to 03:00), with an
# hour where no run happened, and a clock that steps back.
_T = datetime(2026, 10, 25, 0, 30, tzinfo=UTC)


def _series() -> list[list[datetime]]:
    def span(first: datetime, minutes: range) -> list[datetime]:
        return [first + timedelta(minutes=m) for m in minutes]

    berlin = span(_T, range(20, 80))  # the second 02:30 is at 01:30 UTC
    berlin += span(_T, range(140, 146)) + span(_T, range(131, 142))  # a gap, then back
    ny = span(datetime(2026, 11, 1, 4, 50, tzinfo=UTC), range(35, 105))  # 06:00 UTC
    howe = span(datetime(2026, 10, 3, 14, 50, tzinfo=UTC), range(0, 30))  # 15:00 UTC
    spring = span(datetime(2026, 3, 29, 0, 45, tzinfo=UTC), range(0, 25))  # 01:00 UTC
    return [berlin, ny, howe, spring]


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _state(state_dir: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The windows, and the history as (task, occurrence, outcome, message)."""
    with sqlite3.connect(state_dir / "state.db") as db:
        windows = db.execute("SELECT * FROM task_state ORDER BY name").fetchall()
        history = db.execute(
            "SELECT task, occurrence, outcome, message FROM runs ORDER BY task, occurrence"
        ).fetchall()
    return windows, history


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What quiet.deal said, run by run."""
    said: list[str] = []
    real = quiet.deal

    def counted(*args: Any, **kwargs: Any) -> str:
        said.append(real(*args, **kwargs))
        return said[-1]

    monkeypatch.setattr(quiet, "deal", counted)
    return said


def test_the_shortcut_leaves_the_state_planning_would_leave(
    tmp_path: Path, served: list[str]
) -> None:
    schedule = write_schedule(tmp_path / "schedules.toml", TASKS)
    env = clean_env(tmp_path)
    history = []
    for i, series in enumerate(_series()):
        planned, hinted = tmp_path / f"planned-{i}", tmp_path / f"hinted-{i}"
        without = {**env, "CRONCTL_STATE_DIR": str(planned), "CRONCTL_CACHE_DIR": "off"}
        with_hint = {**env, "CRONCTL_STATE_DIR": str(hinted)}
        before = len(served)
        for when in series:
            args = ("run", "-f", str(schedule), "--now", _stamp(when))
            a, b = invoke(*args, env=without), invoke(*args, env=with_hint)
            assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)
            assert _state(planned) == _state(hinted), when
        # The comparison means something only if the shortcut served many of those minutes.
        assert served[before:].count(quiet.DONE) >= len(series) // 4, (i, served[before:])
        history += _state(planned)[1]
    assert any(outcome == "ok" for _, _, outcome, _ in history)
    assert any(outcome == "missed" for _, _, outcome, _ in history)


@pytest.fixture
def quiet_run(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """`run` at 12:34 UTC on a Monday of a schedule with nothing due then, after a run at
    12:33 that kept a hint; calling it runs again (env overrides, --now)."""
    schedule = write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "daily"\ncommand = "true"\ndaily_at = "03:00"\ntimezone = "Europe/Berlin"',
            'name = "quarter"\ncommand = "true"\ncron = "*/15 * * * *"',
        ],
    )
    env = clean_env(tmp_path)

    def run(at: str = "2026-08-03T12:34:00Z", **extra: str) -> Any:
        return invoke("run", "-f", str(schedule), "--now", at, env={**env, **extra})

    assert run("2026-08-03T12:32:00Z").returncode == 0  # first sight, quiet: keeps a hint
    assert run("2026-08-03T12:33:00Z").returncode == 0  # served by it
    yield run


def _last(tmp_path: Path) -> set[str]:
    return {row[2] for row in _state(tmp_path / "state" / "cronctl")[0]}


def test_a_quiet_minute_is_served_and_moves_every_window(
    quiet_run: Callable[..., Any], tmp_path: Path, served: list[str]
) -> None:
    result = quiet_run()
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert served == [quiet.DONE]
    assert _last(tmp_path) == {"2026-08-03T12:34:00Z"}


def test_a_verbose_quiet_minute_says_nothing_was_due_as_a_planned_one_does(
    quiet_run: Callable[..., Any], tmp_path: Path, served: list[str]
) -> None:
    # `run -v` used to print nothing at all in a minute the hint served.
    result = invoke(
        "run", "-f", str(tmp_path / "schedules.toml"), "--now", "2026-08-03T12:34:00Z", "-v",
        env=clean_env(tmp_path),
    )  # fmt: skip
    assert served == [quiet.DONE]
    assert (result.returncode, result.stdout, result.stderr) == (
        0, "2026-08-03T12:34:00Z  nothing due\n", ""
    )  # fmt: skip
    planned = quiet_run("2026-08-03T12:35:00Z", CRONCTL_STATE_DIR=str(tmp_path / "fresh"))
    assert served[-1] == quiet.SPENT and planned.stdout == ""  # planned: silent without -v
    again = invoke(
        "run", "-f", str(tmp_path / "schedules.toml"), "--now", "2026-08-03T12:35:00Z", "-v",
        "--dry-run", env={**clean_env(tmp_path), "CRONCTL_STATE_DIR": str(tmp_path / "fresh")},
    )  # fmt: skip
    assert again.stdout == "2026-08-03T12:35:00Z  nothing due\n"  # the same line, planned


def test_a_verbose_run_in_a_minute_already_dealt_with_says_so(
    quiet_run: Callable[..., Any], tmp_path: Path, served: list[str]
) -> None:
    first = quiet_run("2026-08-03T12:45:00Z")  # `quarter` runs
    assert first.returncode == 0
    again = invoke(
        "run", "-f", str(tmp_path / "schedules.toml"), "--now", "2026-08-03T12:45:00Z", "-v",
        env=clean_env(tmp_path),
    )  # fmt: skip
    assert served[-1] != quiet.DONE  # planned, not served by the hint
    assert again.returncode == 0 and again.stdout == (
        "2026-08-03T12:45:00Z  nothing due: this minute was already dealt with (by an earlier "
        "`cronctl run` or `cronctl work`)\n"
    )


@pytest.mark.parametrize(
    ("at", "env", "said"),
    [
        ("2026-08-03T12:45:00Z", {}, quiet.SPENT),  # `quarter` is due
        ("2026-08-03T13:00:00Z", {}, quiet.DECLINED),  # the hourly sweep (and `quarter`)
        ("2026-08-03T12:34:00Z", {"CRONCTL_HOST": "elsewhere"}, quiet.DONE),  # no hosts key
        ("2026-08-03T12:34:00Z", {"CRONCTL_COORDINATION": "postgresql://x/y"}, quiet.DECLINED),
        ("2099-08-03T12:34:00Z", {}, quiet.DECLINED),  # a rehearsal
        ("2026-08-03T12:32:00Z", {}, quiet.SPENT),  # the clock went back: planning warns
        ("2026-08-03T12:34:00Z", {"CRONCTL_STATE_DIR": "/nonexistent-for-test"}, None),
    ],
)
def test_the_hint_serves_only_what_it_proves(
    quiet_run: Callable[..., Any],
    tmp_path: Path,
    served: list[str],
    at: str,
    env: dict[str, str],
    said: str | None,
) -> None:
    if env.get("CRONCTL_STATE_DIR"):
        env = {"CRONCTL_STATE_DIR": str(tmp_path / "other-state")}  # no rows there yet
        said = quiet.SPENT
    result = quiet_run(at, **env)
    assert served[:1] == [said]
    if "CRONCTL_COORDINATION" in env:
        assert "could not translate host name" in result.stderr  # planning used that store
    else:
        assert result.returncode == 0, result.stderr


def test_a_minute_after_a_due_one_is_served(
    quiet_run: Callable[..., Any], tmp_path: Path, served: list[str]
) -> None:
    assert quiet_run("2026-08-03T12:45:00Z").returncode == 0  # `quarter` runs
    assert quiet_run("2026-08-03T12:46:00Z").returncode == 0
    assert quiet_run("2026-08-03T12:52:00Z").returncode == 0  # nothing run for six minutes
    assert served == [quiet.SPENT, quiet.DONE, quiet.DONE]
    history = _state(tmp_path / "state" / "cronctl")[1]
    assert [(t, o, outcome) for t, o, outcome, _ in history] == [
        ("quarter", "2026-08-03T12:45:00Z", "ok")
    ]
    assert _last(tmp_path) == {"2026-08-03T12:52:00Z"}


def test_the_hourly_sweep_minute_is_planned(
    quiet_run: Callable[..., Any], tmp_path: Path, served: list[str]
) -> None:
    # 14:00 would be due for `quarter`; a schedule that is quiet at minute 0 is needed.
    schedule = write_schedule(
        tmp_path / "hourly-quiet.toml", ['name = "d"\ncommand = "true"\ndaily_at = "03:00"']
    )
    env = clean_env(tmp_path)
    for at in ("2026-08-03T13:58:00Z", "2026-08-03T13:59:00Z", "2026-08-03T14:00:00Z"):
        assert invoke("run", "-f", str(schedule), "--now", at, env=env).returncode == 0
    # First sight is planned and keeps a hint; 14:00 is planned for the sweep.
    assert served[-3:] == [quiet.SPENT, quiet.DONE, quiet.DECLINED]


def test_a_row_that_differs_is_planned(
    quiet_run: Callable[..., Any], tmp_path: Path, served: list[str]
) -> None:
    db = tmp_path / "state" / "cronctl" / "state.db"
    with sqlite3.connect(db) as conn:  # as an edit of `daily` in a file it does not read
        conn.execute("UPDATE task_state SET fingerprint = 'x' WHERE name = 'daily'")
    assert quiet_run().returncode == 0
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM task_state WHERE name = 'quarter'")
    assert quiet_run("2026-08-03T12:35:00Z").returncode == 0
    with sqlite3.connect(db) as conn:  # a window older than the one the hint proved empty
        conn.execute("UPDATE task_state SET last_occurrence = '2026-08-03T12:10:00Z'")
    assert quiet_run("2026-08-03T12:36:00Z").returncode == 0
    assert served == [quiet.SPENT, quiet.SPENT, quiet.SPENT]
    # Planning dealt with the 12:15 and 12:30 occurrences the stale window held.
    history = _state(tmp_path / "state" / "cronctl")[1]
    assert ("quarter", "2026-08-03T12:30:00Z") in {(t, o) for t, o, *_ in history}


def test_an_unfinished_run_sends_the_minute_to_planning(
    quiet_run: Callable[..., Any], tmp_path: Path, served: list[str]
) -> None:
    db = tmp_path / "state" / "cronctl" / "state.db"
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO runs (id, task, occurrence, outcome, host, pid) VALUES "
            "('r1', 'quarter', '2026-08-03T12:30:00Z', 'running', 'test-host', 999999999)"
        )
    result = quiet_run()
    assert served == [quiet.DECLINED]
    assert "cronctl died" in result.stderr  # recovery closed it, as only planning does


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"not marshal",
        "wrong-layout",
        "wrong-types",
    ],
)
def test_a_damaged_hint_is_only_a_miss(
    quiet_run: Callable[..., Any], tmp_path: Path, served: list[str], damage: bytes | str
) -> None:
    (hint,) = (tmp_path / "cache" / "cronctl").glob("quiet-*")
    if damage == "wrong-layout":
        key, _ = marshal.loads(hint.read_bytes())  # noqa: S302  (the test's own file)
        data = marshal.dumps((key, (quiet.FORMAT, "x")))
    elif damage == "wrong-types":
        key, value = marshal.loads(hint.read_bytes())  # noqa: S302
        tasks = tuple((n, f, str(s), x, o) for n, f, s, x, o in value[-1])
        data = marshal.dumps((key, (*value[:-1], tasks)))
    else:
        data = damage  # type: ignore[assignment]
    hint.write_bytes(data)
    result = quiet_run()
    assert (result.returncode, result.stderr) == (0, "")
    assert served == [quiet.SPENT]
    assert _last(tmp_path) == {"2026-08-03T12:34:00Z"}
    assert quiet_run("2026-08-03T12:35:00Z").returncode == 0  # planning kept a new hint
    assert served == [quiet.SPENT, quiet.DONE]


def test_an_edited_file_or_a_moved_workdir_spends_the_hint(
    tmp_path: Path, served: list[str]
) -> None:
    releases = tmp_path / "releases"
    (releases / "1").mkdir(parents=True)
    (releases / "2").mkdir()
    (tmp_path / "current").symlink_to(releases / "1")
    task = f'name = "d"\ncommand = "true"\ndaily_at = "03:00"\nworkdir = "{tmp_path}/current"'
    schedule = write_schedule(tmp_path / "schedules.toml", [task])
    env = clean_env(tmp_path)

    def run(at: str) -> None:
        assert invoke("run", "-f", str(schedule), "--now", at, env=env).returncode == 0

    for at in ("2026-08-03T12:32:00Z", "2026-08-03T12:33:00Z", "2026-08-03T12:34:00Z"):
        run(at)
    (tmp_path / "current").unlink()
    (tmp_path / "current").symlink_to(releases / "2")  # a deploy
    run("2026-08-03T12:35:00Z")
    run("2026-08-03T12:36:00Z")
    write_schedule(schedule, [task.replace("true", "false")])
    run("2026-08-03T12:37:00Z")
    assert served == [quiet.SPENT, quiet.DONE, quiet.DONE, quiet.SPENT, quiet.DONE, quiet.SPENT]


def test_hosts_keep_the_hint_to_its_host(tmp_path: Path, served: list[str]) -> None:
    schedule = write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "web"\ncommand = "true"\ndaily_at = "03:00"\nhosts = ["web-*"]',
            'name = "all"\ncommand = "true"\ndaily_at = "04:00"',
        ],
    )
    env = clean_env(tmp_path, {"CRONCTL_HOST": "web-1"})
    for at, host in [("12:32", "web-1"), ("12:33", "web-1"), ("12:34", "web-1"), ("12:35", "db-1")]:
        result = invoke(
            "run", "-f", str(schedule), "--now", f"2026-08-03T{at}:00Z",
            env={**env, "CRONCTL_HOST": host},
        )  # fmt: skip
        assert result.returncode == 0
    assert served == [quiet.SPENT, quiet.DONE, quiet.DONE, quiet.SPENT]


def test_a_changed_zone_file_spends_the_hint(cli: Cli, tmp_path: Path) -> None:
    """A tzdata update under an unchanged schedule: the occurrences the hint worked out may
    have moved, so the next minute is planned (real processes: the search path is read when
    zoneinfo is imported)."""
    zones = tmp_path / "zoneinfo"
    (zones / "Europe").mkdir(parents=True)
    source = next(Path(p) / "Europe" / "Berlin" for p in zoneinfo.TZPATH)
    shutil.copy(source, zones / "Europe" / "Berlin")
    shutil.copy(next(Path(p) / "Asia" / "Tokyo" for p in zoneinfo.TZPATH), tmp_path / "tokyo")
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "d"\ncommand = "true"\ndaily_at = "03:00"\ntimezone = "Europe/Berlin"'],
    )
    env = {"PYTHONTZPATH": str(zones), "PYTHONPROFILEIMPORTTIME": "1"}

    def run(at: str) -> list[str]:
        result = cli("run", "--now", f"2026-08-03T{at}:00Z", env=env)
        assert result.returncode == 0, result.stderr
        return [line.rpartition("|")[2].strip() for line in result.stderr.splitlines()]

    run("12:32")
    run("12:33")
    assert "zoneinfo" not in run("12:34")  # served from the hint
    (zones / "Europe" / "Berlin").write_bytes((tmp_path / "tokyo").read_bytes())
    assert "zoneinfo" in run("12:35")  # planned with the new data
    assert "zoneinfo" not in run("12:36")


def test_a_quiet_run_imports_neither_the_model_nor_the_machinery(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "d"\ncommand = "true"\ndaily_at = "03:00"\ntimezone = "America/New_York"'],
    )
    for at in ("12:32", "12:33"):
        assert cli("run", "--now", f"2026-08-03T{at}:00Z").returncode == 0
    result = cli("run", "--now", "2026-08-03T12:34:00Z", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert result.returncode == 0
    imported = {line.rpartition("|")[2].strip() for line in result.stderr.splitlines()}
    assert "cronctl.run.quiet" in imported
    heavy_modules = ("cronctl.core.model", "cronctl.run.once", "zoneinfo", "signal")
    for heavy in (*heavy_modules, "tomllib"):
        assert heavy not in imported, heavy
    windows = _state(tmp_path / "home" / "state" / "cronctl")[0]
    assert [row[2] for row in windows] == ["2026-08-03T12:34:00Z"]


def test_hint_is_private_and_never_followed_through_a_link(
    quiet_run: Callable[..., Any], tmp_path: Path, served: list[str]
) -> None:
    (hint,) = (tmp_path / "cache" / "cronctl").glob("quiet-*")
    assert hint.stat().st_mode & 0o777 == 0o600
    planted = tmp_path / "planted"
    planted.write_bytes(hint.read_bytes())
    hint.unlink()
    hint.symlink_to(planted)
    assert quiet_run().returncode == 0
    assert served == [quiet.SPENT]
    assert not hint.is_symlink()  # replaced by planning's new hint
    assert quiet_run("2026-08-03T12:35:00Z").returncode == 0
    assert served == [quiet.SPENT, quiet.DONE]
    assert planted.read_bytes() != hint.read_bytes()  # the link's target was left alone


def test_no_hint_is_kept_when_every_minute_is_due(tmp_path: Path, served: list[str]) -> None:
    schedule = write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "beat"\ncommand = "true"\ncron = "* * * * *"\ntimezone = "Asia/Kolkata"',
            'name = "d"\ncommand = "true"\ndaily_at = "03:00"',
        ],
    )
    env = clean_env(tmp_path)
    for at in ("12:32", "12:33", "12:34"):
        result = invoke("run", "-f", str(schedule), "--now", f"2026-08-03T{at}:00Z", env=env)
        assert result.returncode == 0
    assert served == [quiet.SPENT] * 3
    assert [p.name.split("-")[0] for p in (tmp_path / "cache" / "cronctl").iterdir()] == [
        "schedule"
    ]
