"""A command's output copied to its log (edge/process/stream.py): an error in one copy must
not stop the others, nor leave a command blocked on a full pipe."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from cronctl.edge.process.stream import CappedLog, CommandOutput, Tee

LINE = b"x" * 999 + b"\n"
LINES = 300  # 300 KB a command: far more than a pipe holds


def _broken_sink(line: str) -> None:
    raise RuntimeError("a bug in the line sink")


def test_a_copy_that_raises_stops_alone_and_its_pipe_is_still_drained(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    writers, copies = [], []
    for name, sink in (("bad", _broken_sink), ("good", None)):
        read_fd, write_fd = os.pipe()
        log = os.open(tmp_path / f"{name}.log", os.O_RDWR | os.O_CREAT, 0o600)
        copy = CommandOutput(CappedLog(log, 0), None, sink)
        copies.append(Tee(read_fd, copy))
        copies[-1].hand_off()  # copied to its end in a thread of its own
        writers.append(write_fd)

    def command(fd: int) -> None:  # what a command printing 300 KB does to its pipe
        for _ in range(LINES):
            os.write(fd, LINE)
        os.close(fd)

    threads = [threading.Thread(target=command, args=(fd,), daemon=True) for fd in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not any(t.is_alive() for t in threads), "a command was left blocked on its pipe"
    assert all(copying.ended.wait(10) for copying in copies)
    assert (tmp_path / "good.log").read_bytes() == LINE * LINES
    assert (tmp_path / "bad.log").read_bytes().startswith(LINE)  # logged up to the error
    err = capfd.readouterr().err
    assert err.count("a command's output stopped being logged") == 1
    assert "a bug in the line sink" in err
