"""Output copied to the log as it comes (masked, capped), and streamed to a terminal or stdout.

A task's lines go to the terminal (`exec`) or to cronctl's stdout (`work --output`). Printed
text has control and escape sequences made visible: a task's output must not be able to move
the cursor, retitle the terminal or hide lines from an operator.
"""

from __future__ import annotations

import os
import select
import sys
import threading
from collections.abc import Callable
from contextlib import suppress
from functools import partial

from cronctl.core.envfile import Masker
from cronctl.edge.process.capped import CappedLog

_CHUNK = 65536
# A line longer than this is passed on in pieces, so a task without newlines cannot grow it.
_MAX_LINE = 65536
_PRINT_LOCK = threading.Lock()


def visible(text: str) -> str:
    """`\\x1b` as `^[`, other C0 controls and DEL as `^X`; tabs stay, a CR at the end goes."""
    text = text.removesuffix("\r")
    out: list[str] = []
    for ch in text:
        code = ord(ch)
        if ch == "\t" or (code >= 0x20 and code != 0x7F and not 0x80 <= code < 0xA0):
            out.append(ch)
        elif code < 0x20:
            out.append("^" + chr(code + 0x40))
        elif code == 0x7F:
            out.append("^?")
        else:
            out.append(f"\\x{code:02x}")
    return "".join(out)


class CommandOutput:
    """One command's output on its way to its log: masked first (when there is a `masker`),
    written under the cap, and each line (without its newline) passed to `line`. A failing
    `line` stops the copy to it only."""

    __slots__ = ("_log", "_masker", "_pending", "_sink")

    def __init__(
        self, log: CappedLog, masker: Masker | None, line: Callable[[str], None] | None
    ) -> None:
        self._log = log
        self._masker = masker
        self._sink = line
        self._pending = b""

    def feed(self, chunk: bytes) -> None:
        """Copy what the command printed next."""
        if self._masker is not None:
            # Empty while the masker holds back what may be the start of a secret.
            chunk = self._masker.feed(chunk)
        self._put(chunk)

    def end(self) -> None:
        """The command's output ended: settle the masker's and the line's remains, close the
        log."""
        try:
            if self._masker is not None:
                self._put(self._masker.flush())
            if self._pending and self._sink is not None:
                _deliver(self._sink, [self._pending])
        finally:
            self._log.close()

    def _put(self, chunk: bytes) -> None:
        self._log.write(chunk)
        if self._sink is not None and chunk:
            self._pending += chunk
            *lines, self._pending = self._pending.split(b"\n")
            if len(self._pending) > _MAX_LINE:
                lines.append(self._pending)
                self._pending = b""
            self._sink = _deliver(self._sink, lines)


def tee(read_fd: int, copy: CommandOutput) -> None:
    """Copy everything from `read_fd` through `copy`, on the caller's thread; close both at
    the end (a streamed command: a stalled terminal holds up that command only)."""
    try:
        while chunk := os.read(read_fd, _CHUNK):
            copy.feed(chunk)
    finally:
        os.close(read_fd)
        copy.end()


class OutputThread:
    """Copies the output of every command that is not streamed, on one thread for them all.

    A thread for each command's pipe cost more than anything else a run adds to starting a
    command `true` (bench/run_due.py); one `epoll` loop costs a registration instead. A
    command's pipe stays registered until its last writer closes it (which may be a
    grandchild after the command ended): then its log is settled and `done` is set."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._copies: dict[int, tuple[CommandOutput, threading.Event]] = {}
        self._poll: select.epoll | None = None
        self._failed: set[int] = set()  # pipes whose copy raised: drained, not copied

    def add(self, read_fd: int, copy: CommandOutput) -> threading.Event:
        """Copy from `read_fd` (which this thread closes) through `copy`; the event is set
        once the output has ended and the log is settled."""
        done = threading.Event()
        with self._lock:
            if self._poll is None:
                self._poll = select.epoll()
                threading.Thread(target=self._loop, name="cronctl-output", daemon=True).start()
            self._copies[read_fd] = (copy, done)
            self._poll.register(read_fd, select.EPOLLIN)
        return done

    def _loop(self) -> None:
        poll = self._poll
        assert poll is not None
        while True:
            for fd, _ in poll.poll():
                with self._lock:
                    copy, done = self._copies[fd]
                try:
                    chunk = os.read(fd, _CHUNK)
                except OSError:
                    chunk = b""
                if chunk:
                    if fd not in self._failed:
                        self._guarded(fd, partial(copy.feed, chunk))
                    continue  # a failed copy's pipe is still drained: its command goes on
                with self._lock:
                    del self._copies[fd]
                    poll.unregister(fd)
                os.close(fd)
                self._guarded(fd, copy.end)  # never raises: done is always set
                self._failed.discard(fd)
                done.set()

    def _guarded(self, fd: int, step: Callable[[], None]) -> None:
        """One step of a copy. This thread copies every command's output: an error in one
        copy (a bug, never a full disk, which the log absorbs) must not end it and leave
        every other command blocked on a full pipe. That copy stops; its pipe is drained."""
        try:
            step()
        except Exception as exc:  # any error: see above
            if fd not in self._failed:
                self._failed.add(fd)
                with _PRINT_LOCK, suppress(OSError, ValueError):
                    print(f"cronctl: a command's output stopped being logged: {exc!r}",
                          file=sys.stderr, flush=True)  # fmt: skip


output_thread = OutputThread()


def _deliver(sink: Callable[[str], None], lines: list[bytes]) -> Callable[[str], None] | None:
    try:
        for raw in lines:
            sink(raw.decode("utf-8", errors="replace"))
    except (OSError, ValueError):
        return None  # stdout closed (a pipe whose reader left): keep logging, stop printing
    return sink


def printer(prefix: str = "") -> Callable[[str], None]:
    """Print each line to stdout made visible, behind `prefix`; whole lines, never interleaved."""

    def show(text: str) -> None:
        rendered = f"{prefix}{visible(text)}\n"
        with _PRINT_LOCK:
            sys.stdout.write(rendered)
            sys.stdout.flush()

    return show
