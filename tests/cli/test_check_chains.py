"""`check` on chains (`after`): each refusal is a located error, exit 1 (docs/chains.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import clean_env, invoke, write_schedule

NOW = "2026-08-03T08:00:00Z"
EXTRACT = 'name = "extract"\ncommand = "true"\ndaily_at = "02:00"'


def _check(tmp_path: Path, tasks: list[str]) -> tuple[int, str]:
    path = write_schedule(tmp_path / "schedules.toml", tasks)
    result = invoke("check", "-f", str(path), "--now", NOW, cwd=tmp_path, env=clean_env(tmp_path))
    return result.returncode, result.stdout


def test_a_chain_with_a_failure_branch_checks_clean(tmp_path: Path) -> None:
    code, out = _check(
        tmp_path,
        [
            EXTRACT,
            # Guards and the misfire keys belong on a chained task as on any.
            'name = "transform"\ncommand = "true"\nafter = "extract"\nwhen = "true"\n'
            'skip = "false"\nmisfire_grace = "10m"\njitter = "1m"\nwithout_overlapping = true',
            'name = "load"\ncommand = "true"\nafter = ["transform"]\nmisfire = "skip"',
            'name = "page"\ncommand = "true"\nafter = ["extract"]\nafter_outcome = "failed"',
            'name = "tidy"\ncommand = "true"\nafter = ["load", "extract"]\nafter_outcome = "any"',
        ],
    )
    assert code == 0, out
    assert out.splitlines()[-1] == "ok: 5 tasks in 1 file; 0 errors, 0 warnings"


# Each refusal: the tasks, then the located line `check` must print.
REFUSALS = {
    "unknown name": (
        [EXTRACT, 'name = "load"\ncommand = "true"\nafter = ["extrakt"]'],
        "schedules.toml:8: task load: 'after' names 'extrakt', and no task has that name "
        '(did you mean "extract"?); fix the name or add the task',
    ),
    "time key": (
        [EXTRACT, 'name = "load"\ncommand = "true"\nafter = ["extract"]\ncron = "0 3 * * *"'],
        "schedules.toml:11: task load: task has both 'after' and 'cron': a chained task runs "
        "after its upstream tasks, never at times of its own; keep one of them",
    ),
    "day key": (
        [EXTRACT, 'name = "load"\ncommand = "true"\nafter = ["extract"]\nweekdays = true'],
        "schedules.toml:11: task load: 'weekdays' restricts a schedule, and a chained task has "
        "none",
    ),
    "on_start": (
        [EXTRACT, 'name = "load"\ncommand = "true"\nafter = ["extract"]\non_start = true'],
        "schedules.toml:11: task load: on_start and 'after' are two ways to start a task",
    ),
    "outcome without after": (
        [EXTRACT + '\nafter_outcome = "failed"'],
        "schedules.toml:6: task extract: 'after_outcome' says which end of its upstream tasks "
        "a chained task waits for, and this task has no 'after'",
    ),
    "bad outcome": (
        [EXTRACT, 'name = "page"\ncommand = "true"\nafter = "extract"\nafter_outcome = "fail"'],
        'schedules.toml:11: task page: after_outcome \'fail\' is not one of "ok", "failed", '
        '"any" (did you mean "failed"?)',
    ),
    "outcome of the wrong type": (
        [EXTRACT, 'name = "page"\ncommand = "true"\nafter = "extract"\nafter_outcome = true'],
        'schedules.toml:11: task page: \'after_outcome\' must be one of "ok", "failed", '
        '"any", not the boolean true',
    ),
    "after of the wrong type": (
        [EXTRACT, 'name = "load"\ncommand = "true"\nafter = 3'],
        "schedules.toml:10: task load: 'after' must be a task name, or an array of task names",
    ),
    "empty after": (
        [EXTRACT, 'name = "load"\ncommand = "true"\nafter = []'],
        "schedules.toml:10: task load: 'after' is empty: name the tasks this one runs after",
    ),
    "not a name": (
        [EXTRACT, 'name = "load"\ncommand = "true"\nafter = ["../x"]'],
        "schedules.toml:10: task load: 'after' names '../x', which is not a task name",
    ),
    "itself": (
        [EXTRACT, 'name = "load"\ncommand = "true"\nafter = ["extract", "load"]'],
        "schedules.toml:10: task load: a task cannot run after itself: remove 'load' from 'after'",
    ),
    "cycle": (
        [
            EXTRACT,
            'name = "b"\ncommand = "true"\nafter = ["c"]',
            'name = "c"\ncommand = "true"\nafter = ["d"]',
            'name = "d"\ncommand = "true"\nafter = ["b"]',
        ],
        "schedules.toml:8: task b: the chain runs in a circle (b -> d -> c -> b), so none of "
        "its tasks would ever run; remove one of these 'after' names",
    ),
    "different schedules": (
        [
            EXTRACT,
            'name = "fetch"\ncommand = "true"\ndaily_at = "02:00"\ntimezone = "Europe/Berlin"',
            'name = "transform"\ncommand = "true"\nafter = "extract"',
            'name = "load"\ncommand = "true"\nafter = ["transform", "fetch"]',
        ],
        "schedules.toml:19: task load: its upstream tasks run on different schedules: "
        'transform (after extract) at "0 2 * * *" UTC, fetch at "0 2 * * *" Europe/Berlin; '
        "a chained task runs once per occurrence they share: give them one schedule, or split "
        "the task",
    ),
    "start-only upstream": (
        [
            'name = "warm"\ncommand = "true"\non_start = true',
            'name = "load"\ncommand = "true"\nafter = ["warm"]',
        ],
        "schedules.toml:8: task load: warm has no occurrences to follow: on_start only, it "
        "runs when cronctl work starts; give it a schedule key, or remove it from 'after'",
    ),
    "too deep": (
        [EXTRACT]
        + [
            f'name = "l{i}"\ncommand = "true"\nafter = ["{f"l{i - 1}" if i > 1 else "extract"}"]'
            for i in range(1, 23)
        ],
        "schedules.toml:108: task l21: the chain above this task is 21 links deep, and at most "
        "20 are allowed; start part of it from a schedule of its own",
    ),
    "jitter past the root's period": (
        [EXTRACT, 'name = "load"\ncommand = "true"\nafter = "extract"\njitter = "2d"'],
        "schedules.toml:8: task load: jitter 2d is not shorter than the task's shortest period "
        "(1d)",
    ),
    "in [defaults]": (
        [EXTRACT],
        "schedules.toml:3: unknown key 'after' in [defaults]",
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_check_refuses_with_a_located_error(tmp_path: Path, case: str) -> None:
    tasks, expected = REFUSALS[case]
    if case == "in [defaults]":
        path = write_schedule(tmp_path / "schedules.toml", tasks, '[defaults]\n\nafter = ["x"]\n')
        result = invoke(
            "check", "-f", str(path), "--now", NOW, cwd=tmp_path, env=clean_env(tmp_path)
        )
        code, out = result.returncode, result.stdout
    else:
        code, out = _check(tmp_path, tasks)
    assert code == 1, out
    assert expected in out, out
    # One refusal, said once: nothing else about the chain is blamed on it.
    assert "1 error," in out.splitlines()[-1], out


def test_check_refuses_an_unknown_name_across_files_and_spares_a_broken_upstream(
    tmp_path: Path,
) -> None:
    # The upstream in another file is known; one with an error of its own is not "unknown".
    (tmp_path / "a.toml").write_text(f"[[task]]\n{EXTRACT}\n[[task]]\nname = 'bad'\n", "utf-8")
    write_schedule(
        tmp_path / "b.toml",
        [
            'name = "load"\ncommand = "true"\nafter = ["extract"]',
            'name = "more"\ncommand = "true"\nafter = ["bad"]',
        ],
    )
    result = invoke(
        "check", "-f", str(tmp_path), "--now", NOW, cwd=tmp_path, env=clean_env(tmp_path)
    )
    assert result.returncode == 1
    assert "task more" not in result.stdout, result.stdout
    assert "task bad: task has no 'command'" in result.stdout
