"""Damaged crontabs through `cronctl import`: never a traceback, and what it writes is a
schedule file that `check`, `list` and both exports take.

The crontabs start from the import corpus (tests/data/crontabs) and are damaged the ways
crontabs are: flipped bytes, pasted control characters and escape sequences, quoted
environment names, lines dropped or doubled. cronctl's entry point runs in process.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.commands.test_import_corpus import CRONTABS
from tests.helpers import invoke

SOURCES = [p.read_bytes() for p in CRONTABS]
# Pieces pasted into a line: cron's corners, control characters, names no environment holds.
PIECES = [
    b"*", b"*/0", b"@reboot", b"@yearly", b"%", b"\\%", b"\t", b"MAILTO=", b"CRON_TZ=Mars/x",
    b"TZ=:UTC", b"SHELL=", b"HOME=", b"HOME=rel", b"L", b"W", b"#", b"?", b"60", b"-1",
    b"jan-dec", b"root", b"9" * 3000, b"\x00", b"\r", b"\x1b[2J", b"\x07", b"\x7f",
    b"\xc2\x85", b"\xe2\x80\xa8", b'"A=B"=x', b'""=x', b"'a b'=1", b"\xf0\x9f\x98\x80",
]  # fmt: skip
NOW = "2026-08-03T09:00:00Z"


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SOURCES)))
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["flip", "paste", "drop", "double"]))
        if kind == "flip" and data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        elif kind == "paste":
            at = draw(st.integers(0, len(data)))
            end = draw(st.sampled_from([b" ", b"", b"\n"]))
            data[at:at] = draw(st.sampled_from(PIECES)) + end
        else:
            lines = bytes(data).split(b"\n")
            at = draw(st.integers(0, len(lines) - 1))
            if kind == "drop":
                del lines[at]
            else:
                lines.insert(at, lines[at])
            data = bytearray(b"\n".join(lines))
    return bytes(data)


def _fine(done: subprocess.CompletedProcess[str], *codes: int) -> None:
    assert done.returncode in codes, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged(), st.booleans())
def test_a_damaged_crontab_imports_to_a_file_cronctl_takes(content: bytes, system: bool) -> None:
    with tempfile.TemporaryDirectory() as directory:
        where = Path(directory)
        (where / "c.crontab").write_bytes(content)
        out = where / "schedules.toml"
        done = invoke("import", "c.crontab", "-o", str(out), *(["--system"] * system), cwd=where)
        _fine(done, 0, 1, 2)
        assert "\x1b" not in done.stderr  # the report shows escape sequences, never sends them
        if not out.exists():
            assert done.returncode == 2  # not UTF-8: nothing written
            return
        _fine(invoke("check", "-f", str(out), cwd=where), 0, 1)
        _fine(invoke("list", "-f", str(out), "--now", NOW, "--state-dir", "st", cwd=where), 0)
        for export in (["systemd", "--user", "app"], ["kubernetes", "--image", "app:1"]):
            _fine(invoke("export", *export, "-f", str(out), cwd=where), 0, 1, 2)
