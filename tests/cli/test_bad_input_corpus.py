"""`cronctl check` on the corpus: every mistake is reported with its code, file and line.

tests/data/invalid holds broken schedule files, one mistake each. The first
line of a file states what `check` must report::

    # expect: code=CODE line=N

A flat ``*.toml`` file is checked alone. A subdirectory is checked as a whole
(``-f DIR``) for mistakes that take two files; exactly one of its files states
the expectation, and that is the file the problem must be reported in.
tests/data/valid holds files that must pass (warnings allowed, errors not).

cronctl runs as a real process, as CI and cron run it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import invoke

REPO_ROOT = Path(__file__).resolve().parents[2]
INVALID = REPO_ROOT / "tests" / "data" / "invalid"
VALID = REPO_ROOT / "tests" / "data" / "valid"

EXPECTATION = re.compile(r"# expect: code=(?P<code>[a-z][a-z-]*) line=(?P<line>[1-9][0-9]*)")
KNOWN_CODES = {
    "toml-syntax",
    "unknown-key",
    "bad-type",
    "bad-value",
    "missing-key",
    "schedule-conflict",
    "duplicate-name",
    "bad-name",
    "cron-syntax",
    "cron-six-fields",
    "cron-unsupported",
    "cron-never-fires",
    "bad-duration",
    "bad-timezone",
    "settings-conflict",
    "bad-url",
    "jitter-too-long",
    "retry-delay-too-long",
    "duplicate-group",
    "unknown-group",
}
# Problems about a file as a whole: the text format leaves out the `task NAME:` part.
FILE_LEVEL_CODES = {"toml-syntax", "settings-conflict", "duplicate-group"}
PROBLEM_KEYS = {"file", "line", "task", "severity", "code", "message"}
# `FILE:LINE: task NAME: message`, the task part omitted for file-level problems.
TEXT_PROBLEM = re.compile(r"(?P<file>.+?):(?P<line>[0-9]+): (?:task (?P<task>\S+): )?\S.*")
# One of each kind of mistake, for the commands that must refuse a broken file.
LIST_SAMPLE = [
    "toml-unclosed-string.toml",
    "unknown-key-typo.toml",
    "cron-six-fields.toml",
    "duplicate-name.toml",
    "bad-timezone-mars.toml",
    # Each of these once ended in "internal error ... please report it".
    "toml-syntax-arrays-nested-5000-deep.toml",
    "toml-syntax-integer-5000-digits.toml",
    "bad-duration-overflows-timedelta.toml",
    "bad-value-nul-in-command.toml",
    "bad-value-nul-in-state-dir.toml",
    "bad-value-at-year-9999.toml",
    "bad-url-ipv6-unclosed.toml",
]


@dataclass(frozen=True)
class Case:
    """One expectation of the corpus."""

    target: Path  # what `-f` gets: one file, or a directory checked as a whole
    file: Path  # the file that states the expectation, where the problem must be reported
    code: str
    line: int

    @property
    def id(self) -> str:
        """The test id: the target's path inside tests/data/invalid."""
        return self.target.relative_to(INVALID).as_posix()


def read_expectation(path: Path) -> tuple[str, int] | None:
    """The (code, line) stated on the first line of `path`, or None if it states none."""
    with path.open(encoding="utf-8") as f:
        match = EXPECTATION.fullmatch(f.readline().rstrip("\n"))
    if match is None:
        return None
    if match["code"] not in KNOWN_CODES:
        raise ValueError(f"{path}: unknown code {match['code']!r} in the expectation")
    return match["code"], int(match["line"])


def collect_cases() -> list[Case]:
    """Every expectation under tests/data/invalid; a file or directory without one is a bug."""
    cases = []
    for path in sorted(INVALID.iterdir()):
        if path.is_dir():
            stated = [(f, e) for f in sorted(path.glob("*.toml")) if (e := read_expectation(f))]
            if len(stated) != 1:
                raise ValueError(f"{path}: exactly one file must state '# expect: ...'")
            [(file, (code, line))] = stated
            cases.append(Case(path, file, code, line))
        elif path.suffix == ".toml":
            expectation = read_expectation(path)
            if expectation is None:
                raise ValueError(f"{path}: line 1 must be '# expect: code=CODE line=N'")
            cases.append(Case(path, path, *expectation))
    return cases


CASES = collect_cases()
VALID_FILES = sorted(VALID.glob("*.toml"))


def run_cronctl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `python -m cronctl ARGS` in `cwd`, away from the caller's cronctl settings and home."""
    return subprocess.run(
        [sys.executable, "-m", "cronctl", *args],
        cwd=cwd,
        env=_env(cwd),
        capture_output=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )


def check_in_process(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`cronctl check ARGS` in this process, in `cwd` with run_cronctl's environment.

    For the two tests that run every corpus file: what they check is what `check` says,
    not the process boundary, and ~280 process start-ups were most of this module's
    time (their exit codes and output were compared equal to run_cronctl's for every
    file). The other tests here, and test_fuzz_schedules, keep real processes."""
    return invoke("check", *args, cwd=cwd, env=_env(cwd))


def _env(cwd: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("CRONCTL_")}
    env.update(
        NO_COLOR="1",
        HOME=str(cwd),
        XDG_STATE_HOME=str(cwd / "state"),
        # As root the default is /var/lib/cronctl: never read or write the machine's own.
        CRONCTL_STATE_DIR=str(cwd / "state" / "cronctl"),
        # This checkout's cronctl, whatever is installed.
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    )
    return env


def describe(result: subprocess.CompletedProcess[str]) -> str:
    """What a failed assertion shows: the exit code and both streams."""
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}"


def assert_no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    """No user error ever prints a Python traceback (docs/commands.md)."""
    assert "Traceback" not in result.stdout + result.stderr, describe(result)


def parse_report(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON report of `check --format json`, checked against its shape (docs/commands.md)."""
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"stdout is not JSON\n{describe(result)}")
    assert isinstance(report, dict), describe(result)
    assert isinstance(report.get("ok"), bool), describe(result)
    assert isinstance(report.get("problems"), list), describe(result)
    for problem in report["problems"]:
        assert problem.keys() >= PROBLEM_KEYS, problem
        assert problem["severity"] in {"error", "warning"}, problem
    return report


def tomllib_line(exc: tomllib.TOMLDecodeError) -> int:
    """The line tomllib blames, from its message `... (at line N, column M)`."""
    match = re.search(r"\(at line ([0-9]+), column [0-9]+\)", str(exc))
    assert match is not None, str(exc)
    return int(match[1])


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_corpus_files_fail_to_decode_only_where_they_say(case: Case) -> None:
    # Guards the corpus itself, before any cronctl code: one mistake per file means a
    # toml-syntax file breaks where it says and every other file is well-formed TOML.
    for path in sorted(case.target.glob("*.toml")) if case.target.is_dir() else [case.target]:
        try:
            tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            assert (case.code, path) == ("toml-syntax", case.file), str(exc)
            assert tomllib_line(exc) == case.line, str(exc)
        except (RecursionError, ValueError) as exc:
            # tomllib's own limits (nesting depth, 4,300-digit integers) give no position.
            assert (case.code, path) == ("toml-syntax", case.file), repr(exc)
        else:
            assert (case.code, path) != ("toml-syntax", case.file)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_check_reports_each_mistake_with_its_code_and_line(case: Case, tmp_path: Path) -> None:
    result = check_in_process("--format", "json", "-f", str(case.target), cwd=tmp_path)

    assert_no_traceback(result)
    report = parse_report(result)
    assert result.returncode == 1, describe(result)
    assert report["ok"] is False
    for problem in report["problems"]:
        assert type(problem["line"]) is int, problem  # an int (not a bool, not null)
    assert any(
        problem["severity"] == "error"
        and problem["code"] == case.code
        and problem["line"] == case.line
        and Path(problem["file"]).name == case.file.name
        for problem in report["problems"]
    ), f"want an error {case.code} at {case.file.name}:{case.line}\n{describe(result)}"


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_check_text_output_says_file_colon_line(case: Case, tmp_path: Path) -> None:
    result = check_in_process("-f", str(case.target), cwd=tmp_path)

    assert_no_traceback(result)
    assert result.returncode == 1, describe(result)
    located = [
        match
        for match in map(TEXT_PROBLEM.fullmatch, result.stdout.splitlines())
        if match and Path(match["file"]).name == case.file.name and int(match["line"]) == case.line
    ]
    assert located, f"want a line '{case.file.name}:{case.line}: ...'\n{describe(result)}"
    if case.code in FILE_LEVEL_CODES:
        assert any(match["task"] is None for match in located), describe(result)


def test_unknown_key_suggests_the_key_it_resembles(tmp_path: Path) -> None:
    path = INVALID / "unknown-key-typo.toml"
    result = run_cronctl("check", "--format", "json", "-f", str(path), cwd=tmp_path)

    messages = [
        p["message"] for p in parse_report(result)["problems"] if p["code"] == "unknown-key"
    ]
    assert any("withot_overlapping" in m and "without_overlapping" in m for m in messages), messages


@pytest.mark.parametrize("name", LIST_SAMPLE)
def test_list_refuses_a_broken_file_and_names_it(name: str, tmp_path: Path) -> None:
    result = run_cronctl("list", "-f", str(INVALID / name), cwd=tmp_path)

    assert_no_traceback(result)
    assert result.returncode == 2, describe(result)
    assert name in result.stderr, describe(result)


@pytest.mark.parametrize("path", VALID_FILES, ids=lambda path: path.name)
def test_check_passes_every_valid_file(path: Path, tmp_path: Path) -> None:
    result = run_cronctl("check", "--format", "json", "-f", str(path), cwd=tmp_path)

    assert_no_traceback(result)
    report = parse_report(result)
    errors = [problem for problem in report["problems"] if problem["severity"] == "error"]
    assert errors == [], describe(result)
    assert result.returncode == 0, describe(result)
    assert report["ok"] is True
