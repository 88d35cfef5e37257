"""`cronctl logs --follow`: a run's log as it is written (one descriptor opened as `logs`
opens it), until the run's row says it is over, or its cronctl died (whose row stays
"running" until the next `cronctl run` records it: following would never end)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from cronctl.commands.operate import LogResult, checked_log, reading_store
from cronctl.core.runs import UNFINISHED, RunRow
from cronctl.edge.process import procs
from cronctl.edge.process.logfiles import log_file, open_log, read_on, tail_start
from cronctl.errors import UsageError

#: How long to wait for more output before looking again.
POLL_S = 0.2


@dataclass(slots=True)  # not frozen: it keeps the run as last read while it follows
class Follow:
    """The output of `result`'s run as it grows (only the last `last_lines` lines of what is
    there already, with `last_lines`); `run` is the run as last read, once `chunks` ends."""

    state_dir: Path
    result: LogResult
    last_lines: int | None = None
    sleep: Callable[[float], None] = time.sleep
    owner_gone: bool = False  # the run's cronctl died before recording its end

    @property
    def run(self) -> RunRow:
        return self.result.run

    def chunks(self) -> Iterator[bytes]:
        if self.run.outcome not in UNFINISHED:
            yield from self.result.chunks(self.last_lines)
            return
        fd: int | None = None
        try:
            while True:
                fd = self._open() if fd is None else fd
                if fd is not None:
                    got = False
                    for chunk in read_on(fd):
                        got = True
                        yield chunk
                    if got:
                        continue
                if self._over():
                    fd = self._open() if fd is None else fd  # ended before its log was seen
                    if fd is not None:
                        yield from read_on(fd)  # what came between the last read and the end
                    return
                self.sleep(POLL_S)
        finally:
            if fd is not None:
                os.close(fd)

    def _open(self) -> int | None:
        """The log's descriptor at what is to be shown; None while the run has not created it."""
        run = self.run
        if run.log_path is None:
            return None
        if run.outcome not in UNFINISHED:
            path = checked_log(self.state_dir, run)
        else:
            found = log_file(self.state_dir, run.task, run.log_path)
            if found is None:
                raise UsageError(f"the log of run {run.id} ({run.log_path}) cannot be read here")
            path = found
        try:
            fd = open_log(path)
        except FileNotFoundError:
            return None  # not created yet; or an ended run's, swept just now: nothing to show
        if self.last_lines is not None:
            os.lseek(fd, tail_start(fd, self.last_lines), os.SEEK_SET)
        return fd

    def _over(self) -> bool:
        with reading_store(self.state_dir) as store:
            now = store.get_run(self.run.id)
        if now is None:  # removed from the history under us: nothing more will come
            return True
        self.result = LogResult(now, self.result.path)
        if now.outcome not in UNFINISHED:
            return True
        if now.pid is not None and not procs.alive(now.pid):
            self.owner_gone = True
            return True
        return False
