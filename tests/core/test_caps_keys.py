"""The cap keys (memory_max, cpu_max, nice) and the secrets and output keys in [defaults]."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from cronctl.core.assemble import build_schedule
from cronctl.core.model import Schedule
from cronctl.core.schema import FileResult, parse_document
from cronctl.core.tomllines import index_lines


def _load(text: str) -> Schedule:
    file = FileResult(path=Path("/srv/app/schedules.toml"), display="schedules.toml")
    parse_document(tomllib.loads(text), index_lines(text), file)
    return build_schedule([file])


def _errors(text: str) -> list[str]:
    return [p.describe() for p in _load(text).errors]


TASK = '[[task]]\nname = "job"\ncommand = "true"\nhourly = true\n'


def test_caps_of_a_task_and_of_defaults_reach_the_task() -> None:
    schedule = _load(
        '[defaults]\nmemory_max = "512MB"\ncpu_max = "50%"\nnice = 10\n'
        + TASK
        + '[[task]]\nname = "own"\ncommand = "true"\nhourly = true\nmemory_max = "2GB"\n'
        'cpu_max = "250%"\nnice = 0\n'
        '[[task]]\nname = "free"\ncommand = "true"\nhourly = true\nmemory_max = "unlimited"\n'
        'cpu_max = "unlimited"\n'
    )
    assert schedule.errors == []
    job, own, free = schedule.tasks
    assert (job.memory_max, job.cpu_max, job.nice) == (512 * 1024**2, 50, 10)
    assert (own.memory_max, own.cpu_max, own.nice) == (2 * 1024**3, 250, 0)
    assert (free.memory_max, free.cpu_max, free.nice) == (0, 0, 10)
    assert "caps" in job.guards and "caps" not in _load(TASK).tasks[0].guards


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('memory_max = "1MB"', "'memory_max': size '1MB' is below the smallest cap, 16MB"),
        ('memory_max = "0"', "'memory_max': size '0' is below the smallest cap, 16MB"),
        ('memory_max = "2000T"', "'memory_max': size '2000T' is above the largest cap, 1024TB"),
        ('memory_max = "lots"', "'memory_max': size 'lots' is not understood"),
        ("memory_max = 512", "'memory_max' must be a size such as \"512MB\""),
        ('cpu_max = "0%"', "'cpu_max': '0%' is not a share of a CPU; write a percentage"),
        ('cpu_max = "0.5"', "'cpu_max': '0.5' is not a share of a CPU"),
        ('cpu_max = "200000%"', "'cpu_max': '200000%' is not a share of a CPU"),
        ("cpu_max = 50", "'cpu_max' must be a share of one CPU such as \"50%\""),
        ("nice = 20", "'nice': 20 is not a niceness 0 (normal) to 19 (the lowest)"),
        ("nice = -5", "'nice': -5 is not a niceness"),
        ('nice = "10"', "'nice' must be an integer 0-19, not the string '10'"),
        ('ionice = "realtime"', "'ionice': 'realtime' is not an I/O class; write \"idle\""),
        ('ionice = "best-effort:8"', "'ionice': 'best-effort:8' is not an I/O class"),
        ('ionice = "idle:3"', "'ionice': 'idle:3' is not an I/O class"),
        ("ionice = 3", '\'ionice\' must be "idle", "best-effort" or "best-effort:N"'),
    ],
)
def test_bad_caps_are_located_errors_in_a_task_and_in_defaults(line: str, message: str) -> None:
    [error] = _errors(TASK + line + "\n")
    assert error.startswith(f"schedules.toml:5: task job: {message}"), error
    [error] = _errors(f"[defaults]\n{line}\n" + TASK)
    assert error.startswith(f"schedules.toml:2: {message}"), error


def test_ionice_is_the_kernels_io_priority_from_defaults_or_the_task() -> None:
    schedule = _load(
        '[defaults]\nionice = "idle"\n'
        + TASK
        + '[[task]]\nname = "be"\ncommand = "true"\nhourly = true\nionice = "best-effort:2"\n'
        '[[task]]\nname = "plain"\ncommand = "true"\nhourly = true\nionice = "Best-Effort"\n'
    )
    assert schedule.errors == []
    # (class << 13) | level: idle is class 3, best-effort class 2 (level 4 unless given).
    assert [t.ionice for t in schedule.tasks] == [3 << 13, 2 << 13 | 2, 2 << 13 | 4]
    assert "caps" in schedule.tasks[0].guards


def test_max_output_in_defaults_sits_between_cronctl_and_the_task() -> None:
    schedule = _load(
        '[cronctl]\nmax_output = "1MB"\n[defaults]\nmax_output = "64KB"\n'
        + TASK
        + '[[task]]\nname = "own"\ncommand = "true"\nhourly = true\nmax_output = "8KB"\n'
    )
    assert schedule.errors == []
    assert [t.max_output for t in schedule.tasks] == [64 * 1024, 8 * 1024]
    only_cronctl = _load('[cronctl]\nmax_output = "1MB"\n' + TASK)
    assert only_cronctl.tasks[0].max_output == 1024**2
    [error] = _errors('[defaults]\nmax_output = "1B"\n' + TASK)
    assert error.startswith("schedules.toml:2: 'max_output': size '1B' is below the smallest")


def test_env_files_of_defaults_come_first_then_the_tasks_without_repeats() -> None:
    schedule = _load(
        '[defaults]\nenv_files = ["common.env", "db.env"]\n'
        + TASK
        + '[[task]]\nname = "own"\ncommand = "true"\nhourly = true\n'
        'env_files = ["db.env", "own.env"]\n'
    )
    assert schedule.errors == []
    job, own = schedule.tasks
    assert job.env_files == ("common.env", "db.env")
    assert own.env_files == ("common.env", "db.env", "own.env")
    [error] = _errors('[defaults]\nenv_files = ["a.env", "a.env"]\n' + TASK)
    assert error == "schedules.toml:2: 'env_files' names 'a.env' twice"


def test_keys_that_stay_per_task_are_still_refused_in_defaults() -> None:
    [error] = _errors('[defaults]\nenv_from_file = { TOKEN = "t" }\n' + TASK)
    assert "unknown key 'env_from_file' in [defaults]" in error
    assert "(it belongs in each [[task]])" in error
