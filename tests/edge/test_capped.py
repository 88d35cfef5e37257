"""max_output: a run's log keeps its head and its tail around a marker of what was cut."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from cronctl.edge.process.stream import CappedLog

MARKER = re.compile(rb"\[cronctl: (\d+) bytes \([^)]*\) of output cut here by max_output")


def _written(path: Path, chunks: list[bytes], limit: int) -> bytes:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    log = CappedLog(fd, limit)
    for chunk in chunks:
        log.write(chunk)
    log.close()
    return path.read_bytes()


@pytest.mark.parametrize("size", [1, 4097, 65536])
def test_keeps_head_and_tail_and_says_how_much_was_cut(tmp_path: Path, size: int) -> None:
    text = b"".join(b"line %06d\n" % i for i in range(20000))  # 220,000 bytes
    chunks = [text[i : i + size] for i in range(0, len(text), size)]
    data = _written(tmp_path / "a.log", chunks, 8192)
    head, marker, tail = data[:4096], data[4096 : data.index(b"]\n") + 2], data[-4096:]
    assert head == text[:4096] and tail == text[-4096:]
    found = MARKER.search(marker)
    assert found is not None and int(found.group(1)) == len(text) - 8192
    assert len(data) == 8192 + len(marker)


def test_output_within_the_cap_is_kept_whole(tmp_path: Path) -> None:
    text = os.urandom(8192)
    assert _written(tmp_path / "a.log", [text[:5000], text[5000:]], 8192) == text


def test_no_cap_writes_everything(tmp_path: Path) -> None:
    text = b"x" * 100_000
    assert _written(tmp_path / "a.log", [text, text], 0) == text + text


def test_the_tail_starts_on_a_whole_character(tmp_path: Path) -> None:
    text = "é".encode() * 10_000
    data = _written(tmp_path / "a.log", [text], 8192)
    data.decode("utf-8")  # no broken character at the cut
    assert data.endswith("é".encode() * 2000)
