"""Random and mutated schedule files: never a traceback, always exit 0/1/2, every problem located.

The files start from tests/data/valid/ and are damaged the ways people damage them:
flipped bytes, renamed keys, values swapped between types, lines dropped or doubled.
cronctl's real entry point runs in process (so hundreds of examples stay fast), with
its stdout and stderr captured; a few examples also go through a real subprocess.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import helpers
from tests.helpers import REPO_ROOT

VALID = sorted((REPO_ROOT / "tests" / "data" / "valid").glob("*.toml"))
SOURCES = [p.read_bytes() for p in VALID]
VALUES = ['"x"', "5", "true", "[1, 2]", '{ a = "b" }', "2026-01-01T00:00:00Z", '""', "-1",
          '"* * * * *"', '"24:00"', "3.5", '"Mars/Olympus"', "[]"]  # fmt: skip
# Values that once ended in "internal error": parser limits, overflows, NUL, bad env names.
VALUES += [
    "9" * 5000,
    '"' + "9" * 5000 + 's"',
    '"99999999999999d"',
    '"*/' + "5" * 5000 + ' * * * *"',
    "[" * 2000 + "]" * 2000,
    '"a\\u0000b"',
    '{ "A=B" = "x" }',
    '{ "" = "x" }',
    "9999-12-31T23:59:00-01:00",
    "0001-01-01T00:00:00+01:00",
]
KEY = re.compile(rb"^(\s*)([A-Za-z_][A-Za-z0-9_]*)(\s*=)", re.MULTILINE)
VALUE = re.compile(rb"^(\s*[A-Za-z_][A-Za-z0-9_]*\s*=\s*)(.*)$", re.MULTILINE)


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SOURCES)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "rename", "swap", "drop", "double", "insert"]))
        if kind == "flip" and data:
            at = draw(st.integers(0, len(data) - 1))
            data[at] = draw(st.integers(0, 255))
        elif kind == "rename":
            keys = list(KEY.finditer(data))
            if keys:
                key = draw(st.sampled_from(keys))
                name = draw(st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12))
                data[key.start(2) : key.end(2)] = name.encode()
        elif kind == "swap":
            values = list(VALUE.finditer(data))
            if values:
                value = draw(st.sampled_from(values))
                data[value.start(2) : value.end(2)] = draw(st.sampled_from(VALUES)).encode()
        else:
            lines = bytes(data).split(b"\n")
            at = draw(st.integers(0, len(lines) - 1))
            if kind == "drop":
                del lines[at]
            elif kind == "double":
                lines.insert(at, lines[at])
            else:
                lines.insert(at, draw(st.binary(max_size=30)))
            data = bytearray(b"\n".join(lines))
    return bytes(data)


def invoke(*args: str) -> tuple[int, str, str]:
    """cronctl's console entry point, in process: (exit code, stdout, stderr)."""
    done = helpers.invoke(*args)
    return done.returncode, done.stdout, done.stderr


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_damaged_files_give_located_problems_and_never_a_traceback(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "schedules.toml"
        path.write_bytes(content)
        state = str(Path(directory) / "state")
        code, out, err = invoke(
            "check",
            "--format",
            "json",
            "-f",
            str(path),
            "--now",
            "2026-08-03T09:00:00Z",
            "--state-dir",
            state,
        )
        assert code in (0, 1, 2), (code, err)
        assert "Traceback" not in err and "internal error" not in err, err
        if code in (0, 1):
            report = json.loads(out)
            assert report["ok"] is (code == 0)
            for problem in report["problems"]:
                assert problem["file"] == str(path)
                assert isinstance(problem["line"], int) and problem["line"] >= 1, problem
                assert problem["code"] and problem["message"]
        for args in (["list"], ["run", "--dry-run"]):
            code, _, err = invoke(
                *args, "-f", str(path), "--now", "2026-08-03T09:00:00Z", "--state-dir", state
            )
            assert code in (0, 1, 2), (args, code, err)
            assert "Traceback" not in err and "internal error" not in err, err


def test_a_damaged_file_through_a_real_process(cli: object, tmp_path: Path) -> None:
    path = tmp_path / "schedules.toml"
    path.write_bytes(SOURCES[0].replace(b"name", b"nmae", 1) + b"\n\x00\xff[[task]\n")
    for args in (["check"], ["list"], ["run", "--dry-run"]):
        result = cli(*args)  # type: ignore[operator]
        assert result.returncode in (1, 2)
        assert "schedules.toml:" in result.stdout + result.stderr
