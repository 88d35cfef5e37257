"""Every warning has a code, and `ignore_warnings` accepts the ones a task's owner has read
(docs/schedule-file.md#warnings): `check` and `list -v` leave them out and count them, so that
`check --strict` can pass; an unknown code is an error at its line."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cronctl.core.warncodes import MACHINE_WARNINGS, TASK_WARNINGS
from tests.helpers import REPO_ROOT, Cli, write_schedule

NOW = "2026-12-06T00:00:00Z"  # the next 12 months hold Berlin's 2027 spring and fall changes

# One task per warning a task can get; their codes in the order of TASK_WARNINGS.
WARNED = {
    "day-or-day": 'name = "either-day"\ncommand = "true"\ncron = "0 1 13 * 5"',
    "cron-star-list": 'name = "star-list"\ncommand = "true"\ncron = "0 4 */100,1-7 * MON"',
    "cron-uneven-step": 'name = "uneven"\ncommand = "true"\ncron = "*/7 * * * *"',
    "cron-weekday-step": 'name = "weekday-step"\ncommand = "true"\ncron = "0 5 * * 1/2"',
    "at-in-past": 'name = "once"\ncommand = "true"\nat = 2026-01-01T00:00:00Z',
    "dst-gap": 'name = "night"\ncommand = "true"\ndaily_at = "02:30"\ntimezone = "Europe/Berlin"',
    "herd": 'name = "herd-b"\ncommand = "true"\ncron = "0 6 * * *"',
    "on-start-every-server": (
        'name = "starter"\ncommand = "true"\non_start = true\non_one_server = true'
    ),
    "retries-outlast-period": (
        'name = "retrying"\ncommand = "true"\nhourly = true\nretries = 3\nretry_delay = "30m"'
    ),
    "secret-file": 'name = "secret"\ncommand = "true"\ndaily = true\nenv_files = ["gone.env"]',
}
HERD = ['name = "herd-a"\ncommand = "true"\ncron = "0 6 * * *"']
TASK_CODES = set(TASK_WARNINGS)


def _check(cli: Cli, *args: str) -> tuple[int, dict[str, object]]:
    done = cli("check", "--now", NOW, "--format", "json", *args)
    return done.returncode, json.loads(done.stdout)


def _codes(report: dict[str, object]) -> list[str]:
    problems = report["problems"]
    assert isinstance(problems, list)
    return sorted(p["code"] for p in problems)


def _everything(tmp_path: Path, header: str = "", extra: str = "") -> Path:
    tasks = [t + extra for t in WARNED.values()] + [t + extra for t in HERD]
    return write_schedule(
        tmp_path / "schedules.toml", tasks, "[cronctl]\nherd_limit = 1\n" + header
    )


def test_every_warning_has_a_code_the_docs_list(cli: Cli, tmp_path: Path) -> None:
    _everything(tmp_path)
    code, report = _check(cli)
    assert code == 0, report  # warnings only
    found = set(_codes(report))
    # dst-overlap comes with dst-gap; lock-dir-not-shared with on_one_server on a local disk.
    assert found == TASK_CODES | {"lock-dir-not-shared"}, found
    text = cli("check", "--now", NOW).stdout
    warnings = [line for line in text.splitlines() if ": warning: " in line]
    assert len(warnings) == len(report["problems"])  # type: ignore[arg-type]
    assert all(re.search(r" \[[a-z-]+\]$", line) for line in warnings), warnings
    docs = (REPO_ROOT / "docs" / "schedule-file.md").read_text(encoding="utf-8")
    section = docs[docs.index("\n## Warnings") :]
    for listed in TASK_CODES | set(MACHINE_WARNINGS):
        assert f"`{listed}`" in section, f"docs/schedule-file.md#warnings lacks {listed}"


def test_defaults_acknowledge_every_task_warning_and_strict_passes(
    cli: Cli, tmp_path: Path
) -> None:
    codes = ", ".join(f'"{c}"' for c in sorted(TASK_CODES))
    _everything(tmp_path, f"lock_dir_shared = true\n[defaults]\nignore_warnings = [{codes}]\n")
    plain = tmp_path / "plain"  # the same tasks without the list
    plain.mkdir()
    _everything(plain, "lock_dir_shared = true\n")
    _, unaccepted = _check(cli, "-f", str(plain / "schedules.toml"))
    warned = len(_codes(unaccepted))
    assert warned >= len(TASK_CODES)

    strict = cli("check", "--now", NOW, "--strict")
    assert strict.returncode == 0, strict.stdout
    assert f"0 errors, 0 warnings, {warned} warnings acknowledged by ignore_warnings" in (
        strict.stdout
    )
    code, report = _check(cli, "--strict")
    assert (code, report["problems"], report["acknowledged"]) == (0, [], warned)
    github = cli("check", "--now", NOW, "--strict", "--format", "github")
    assert github.returncode == 0
    assert f"::notice title=cronctl::{warned} warnings acknowledged" in github.stdout
    listed = cli("list", "-v", "--now", NOW)
    assert "warning" not in listed.stderr, listed.stderr


def test_strict_failing_on_a_task_warning_says_how_to_accept_it(cli: Cli, tmp_path: Path) -> None:
    path = write_schedule(tmp_path / "schedules.toml", [WARNED["dst-gap"]],
                          '[cronctl]\nproject = "p"\n')  # fmt: skip
    hint = "hint: a warning you have read and accept: add its code (in brackets) to the task's"
    strict = cli("check", "--now", NOW, "--strict")
    assert strict.returncode == 1 and hint in strict.stderr, strict.stderr
    assert hint not in cli("check", "--now", NOW).stderr  # warnings that fail nothing
    # A machine's warning cannot be accepted by a task: no hint that would lead to an error.
    path.write_text('[cronctl]\nproject = "p"\n[[task]]\nname = "one"\ncommand = "true"\n'
                    'daily = true\non_one_server = true\n')  # fmt: skip
    machine = cli("check", "--now", NOW, "--strict")
    assert "[lock-dir-not-shared]" in machine.stdout and machine.returncode == 1
    assert hint not in machine.stderr


def test_a_tasks_list_adds_to_the_defaults(cli: Cli, tmp_path: Path) -> None:
    berlin = 'command = "true"\ndaily_at = "02:30"'
    write_schedule(
        tmp_path / "schedules.toml",
        [
            f'name = "both"\n{berlin}\nignore_warnings = ["dst-overlap"]',
            f'name = "gap-only"\n{berlin}',
            'name = "mine"\ncommand = "true"\ncron = "*/7 3 * * *"\ntimezone = "UTC"\n'
            'ignore_warnings = ["cron-uneven-step"]',
        ],
        '[defaults]\ntimezone = "Europe/Berlin"\nignore_warnings = ["dst-gap"]\n',
    )
    code, report = _check(cli)
    left = [(p["task"], p["code"]) for p in report["problems"]]  # type: ignore[union-attr]
    assert (code, left) == (0, [("gap-only", "dst-overlap")]), report
    assert report["acknowledged"] == 4  # both: gap and overlap; gap-only: gap; mine: the step


def test_a_herd_is_acknowledged_only_when_every_task_in_it_accepts_it(
    cli: Cli, tmp_path: Path
) -> None:
    six = 'command = "true"\ncron = "0 6 * * *"'
    tasks = [f'name = "h{i}"\n{six}\nignore_warnings = ["herd"]' for i in range(3)]
    write_schedule(tmp_path / "schedules.toml", [*tasks, f'name = "h3"\n{six}'],
                   "[cronctl]\nherd_limit = 3\n")  # fmt: skip
    _, report = _check(cli)
    assert _codes(report) == ["herd"] and report["acknowledged"] == 0
    path = tmp_path / "schedules.toml"
    path.write_text(path.read_text() + 'ignore_warnings = ["herd"]\n')
    code, report = _check(cli, "--strict")
    assert (code, _codes(report), report["acknowledged"]) == (0, [], 1)


def test_an_unknown_code_is_an_error_at_its_line_with_a_suggestion(
    cli: Cli, tmp_path: Path
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "night"\ncommand = "true"\ndaily_at = "02:30"\nignore_warnings = ["dst-gaps"]'],
        '[defaults]\nignore_warnings = ["herds", "lock-dir-not-shared"]\n',
    )
    done = cli("check", "--now", NOW)
    assert done.returncode == 1, done.stdout
    out = done.stdout
    assert (
        "schedules.toml:2: ignore_warnings: 'herds' is not a warning code "
        '(did you mean "herd"?)' in out
    )
    assert (
        "schedules.toml:8: task night: ignore_warnings: 'dst-gaps' is not a warning code "
        '(did you mean "dst-gap"?)' in out
    )
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "a"\ncommand = "true"\nhourly = true\nignore_warnings = ["lock-dir-not-shared"]'],
    )
    machine = cli("check", "--now", NOW)
    assert machine.returncode == 1
    assert "'lock-dir-not-shared' cannot be acknowledged" in machine.stdout
    write_schedule(  # codes are lower case: one in capitals is told its spelling
        tmp_path / "schedules.toml",
        ['name = "a"\ncommand = "true"\nhourly = true\nignore_warnings = ["DST-Overlap"]'],
    )
    shouted = cli("check", "--now", NOW)
    assert "'DST-Overlap' is not a warning code (did you mean \"dst-overlap\"?)" in (shouted.stdout)
    assert "lock_dir_shared = true" in machine.stdout


def test_no_dst_warning_for_a_task_that_runs_in_every_hour(cli: Cli, tmp_path: Path) -> None:
    # A 6-task file in Berlin: every-minute and every-hour tasks once gave two warnings each.
    every = [
        'name = "tick"\ncommand = "true"\nevery_minute = true',
        'name = "quarter"\ncommand = "true"\ncron = "*/15 * * * *"',
        'name = "five"\ncommand = "true"\nevery_minutes = 5',
        'name = "hourly"\ncommand = "true"\nhourly_at = 30',
        'name = "noon"\ncommand = "true"\ndaily_at = "12:00"',
        'name = "night-fives"\ncommand = "true"\ncron = "*/5 2 * * *"',
    ]
    write_schedule(tmp_path / "schedules.toml", every, '[defaults]\ntimezone = "Europe/Berlin"\n')
    code, report = _check(cli)
    left = sorted((p["task"], p["code"]) for p in report["problems"])  # type: ignore[union-attr]
    assert (code, left) == (0, [("night-fives", "dst-gap"), ("night-fives", "dst-overlap")])


def test_exports_take_a_schedule_with_ignore_warnings(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "night"\ncommand = "true"\ndaily_at = "02:30"\nignore_warnings = ["dst-gap"]'],
        '[defaults]\ntimezone = "Europe/Berlin"\nignore_warnings = ["dst-overlap"]\n',
    )
    for target, extra in (("systemd", ("--user", "app")), ("kubernetes", ("--image", "app:1"))):
        done = cli("export", "--to", target, "-o", str(tmp_path / target), "--now", NOW, *extra)
        assert done.returncode == 0, done.stdout + done.stderr
        # What the target cannot express is still said: acknowledging is `check`'s business.
        assert "DST rule (dst-gap)" in done.stderr
