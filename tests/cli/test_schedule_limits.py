"""The schedule files may hold 10 MiB and 50,000 tasks together (docs/schedule-file.md, Limits).

A 77 MB schedule of 1.2 million tasks kept `check` busy past 300 s without a word. Past a
limit every command that reads the schedule says which file and what to do, at once:
`check` exits 1, `list`, `run` and `work` exit 2, and `work` keeps its last good schedule
through an edit past one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cronctl.edge import schedfiles
from cronctl.edge.schedfiles import load_paths
from cronctl.run.work import Worker
from tests.helpers import Cli, git, local_context, write_schedule

NOW = "2026-08-03T09:00:00Z"


def _oversized(path: Path) -> Path:
    """6,000 valid tasks with long descriptions: 10.4 MiB that parse, and ran, before."""
    about = "x" * 1800
    tasks = [
        f'name = "t{i:05d}"\ncommand = "echo t{i} >> ran"\nevery_minute = true\n'
        f'description = "{about}"'
        for i in range(6000)
    ]
    write_schedule(path, tasks)
    assert path.stat().st_size > 10 * 2**20
    return path


def _tasks(count: int, start: int = 0) -> list[str]:
    return [f'name = "t{i}"\ncommand = "true"\nhourly = true' for i in range(start, start + count)]


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["check", "--now", NOW], 1),
        (["list", "--now", NOW], 2),
        (["run", "--now", NOW], 2),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else str(v),
)
def test_a_schedule_over_10_mib_is_refused_naming_the_file(
    cli: Cli, args: list[str], code: int
) -> None:
    file = _oversized(cli.cwd / "big.toml")
    result = cli(*args, "-f", str(file), "--state-dir", str(cli.cwd / "state"))
    out = result.stdout + result.stderr
    assert result.returncode == code, out[-2000:]
    assert f"{file}: holds over 10 MiB" in out
    assert "docs/schedule-file.md#limits" in out and "split the tasks" in out
    assert not (cli.cwd / "ran").exists()


def test_work_will_not_start_on_a_schedule_over_the_limit(cli: Cli) -> None:
    file = _oversized(cli.cwd / "big.toml")
    result = cli("work", "-f", str(file), "--state-dir", str(cli.cwd / "state"), timeout=60)
    assert result.returncode == 2
    assert f"{file}: holds over 10 MiB" in result.stdout + result.stderr
    assert not (cli.cwd / "ran").exists()


def test_more_than_50000_tasks_are_refused_before_they_are_validated(cli: Cli) -> None:
    file = write_schedule(cli.cwd / "many.toml", _tasks(50_001))
    assert file.stat().st_size < 10 * 2**20
    check = cli("check", "-f", str(file), "--now", NOW)
    assert check.returncode == 1
    assert f"{file}: holds 50,001 [[task]] tables" in check.stdout
    assert "at most 50,000 tasks together" in check.stdout
    run = cli("run", "-f", str(file), "--now", NOW, "--state-dir", str(cli.cwd / "state"))
    assert run.returncode == 2
    assert f"{file}: holds 50,001 [[task]] tables" in run.stdout + run.stderr


def test_the_files_of_one_schedule_count_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three files of 4 tasks under a limit of 6 (the real limit, lowered to keep it quick):
    the second brings the total to 8 and is refused naming it; the third is not parsed."""
    monkeypatch.setattr(schedfiles, "MAX_TASKS", 6)
    files = [write_schedule(tmp_path / f"{n}.toml", _tasks(4, 10 * n)) for n in range(3)]
    schedule = load_paths(files)
    [problem] = schedule.errors
    assert (problem.file, problem.code) == (str(files[1]), "too-many-tasks")
    assert "holds 4 [[task]] tables (8 with the files before it)" in problem.message
    assert [t.name for t in schedule.tasks] == ["t0", "t1", "t2", "t3"]

    monkeypatch.setattr(schedfiles, "MAX_TASKS", 8)
    monkeypatch.setattr(schedfiles, "MAX_SCHEDULE_BYTES", files[0].stat().st_size + 10)
    [problem] = load_paths(files).errors
    assert (problem.file, problem.code) == (str(files[1]), "schedule-too-large")
    assert "(with the files before it, over" in problem.message


def test_work_keeps_its_schedule_through_an_edit_past_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_schedule(tmp_path / "s.toml", _tasks(1))
    worker = Worker(
        load=lambda: load_paths([path]),
        paths=lambda: [path],
        ctx=local_context(tmp_path),
        report=lambda _r: None,
    )
    watched = worker.watch()
    _oversized(path)
    kept = worker.refresh(watched)
    assert kept.schedule is watched.schedule
    err = capsys.readouterr().err
    assert "schedule change not applied" in err and f"{path}: holds over 10 MiB" in err


def test_check_diff_refuses_a_revision_past_the_limit(cli: Cli) -> None:
    repo = cli.cwd / "repo"
    repo.mkdir()
    file = _oversized(repo / "schedules.toml")
    for step in (["init", "-q"], ["add", "."], ["commit", "-qm", "big"]):
        git(repo, *step)
    write_schedule(file, _tasks(1))
    result = cli("check", "-f", str(file), "--diff", "HEAD", "--now", NOW)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no diff: the schedule at HEAD could not be read" in result.stdout
    assert "holds over 10 MiB" in result.stdout
