"""Output copied to the log as it comes (masked, capped), and streamed to a terminal or stdout,
its control sequences made visible: a task must not move the cursor or hide lines.

Under `max_output` the log keeps its head (half the cap); the rest is appended, and once twice
the tail's share has piled up, the last share moves up behind the head and the file is
truncated: about 1.5 times the cap on disk at most, in constant memory, the command never
blocked. A failed write (a full disk) loses log bytes, never the task.
"""

from __future__ import annotations

import os
import select
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress

from cronctl.core.envfile import Masker

_CHUNK = 65536
# A line longer than this is passed on in pieces, so a task without newlines cannot grow it.
_MAX_LINE = 65536
_PRINT_LOCK = threading.Lock()
# C0 controls (but tab) as `^X`, DEL as `^?`, C1 controls as `\\x9b`.
_VISIBLE = {code: f"^{chr(code + 0x40)}" for code in range(0x20) if code != 0x09}
_VISIBLE |= {0x7F: "^?"} | {code: f"\\x{code:02x}" for code in range(0x80, 0xA0)}

_UTF8_CONTINUATION = range(0x80, 0xC0)


class CappedLog:
    """Writes masked output into the log at ``fd`` under ``limit`` bytes (0: no cap)."""

    __slots__ = ("_broken", "_cut", "_fd", "_head", "_keep", "_limit", "_marker", "_newline",
                 "_region", "_size")  # fmt: skip

    def __init__(self, fd: int, limit: int) -> None:
        self._fd = fd
        self._limit = limit
        self._head = limit // 2
        self._keep = limit - self._head
        self._size = 0  # bytes in the file
        self._region = 0  # bytes of the tail in the file, after the head and the marker
        self._marker = 0  # the marker's length in the file (0: nothing cut yet)
        self._cut = 0  # bytes of output dropped between the head and the tail
        self._newline = True  # whether the head ends a line (the marker needs its own)
        self._broken = False

    def write(self, data: bytes) -> None:
        if self._broken or not data:
            return
        if not self._limit:
            self._put(data, self._size)
            return
        if self._size < self._head:
            room = self._head - self._size
            self._put(data[:room], self._size)
            if self._size == self._head:
                self._newline = data[:room].endswith(b"\n")
            data = data[room:]
            if not data:
                return
        self._put(data, self._size)
        self._region += len(data)
        if self._region >= 2 * self._keep:
            self._compact()

    def close(self) -> None:
        try:
            if self._limit and not self._broken and self._region > self._keep:
                self._compact()
        finally:
            os.close(self._fd)

    def _compact(self) -> None:
        start = self._size - self._keep
        try:
            tail = os.pread(self._fd, self._keep, start)
        except OSError:
            self._broken = True
            return
        # The cut may fall inside a character: its broken start is dropped with the rest.
        skip = 0
        while skip < 3 and skip < len(tail) and tail[skip] in _UTF8_CONTINUATION:
            skip += 1
        self._cut += self._region - self._keep + skip
        marker = (b"" if self._newline else b"\n") + (
            f"[cronctl: {self._cut} bytes ({human_size(self._cut)}) of output cut here by "
            f"max_output = {human_size(self._limit)}: its first and last {human_size(self._keep)} "
            "are kept]\n"
        ).encode()
        self._size = self._head
        self._put(marker + tail[skip:], self._head)
        if self._broken:
            return
        try:
            os.ftruncate(self._fd, self._size)
        except OSError:
            self._broken = True
        self._marker = len(marker)
        self._region = len(tail) - skip

    def _put(self, data: bytes, offset: int) -> None:
        view = memoryview(data)
        while view:
            try:
                written = os.pwrite(self._fd, view, offset)
            except OSError:
                self._broken = True  # a full disk: the log keeps what it has
                return
            view = view[written:]
            offset += written
        self._size = max(self._size, offset)


def human_size(size: int) -> str:
    """16777216 -> '16MB' (powers of 1024), as the schedule file writes sizes."""
    for unit, scale in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return f"{size}B"


def visible(text: str) -> str:
    """`\\x1b` as `^[`, other C0 controls and DEL as `^X`; tabs stay, a CR at the end goes."""
    return text.removesuffix("\r").translate(_VISIBLE)


class CommandOutput:
    """One command's output: masked, written under the cap, each line passed to `line` (a
    failing `line` stops the copy to it only)."""

    __slots__ = ("_log", "_masker", "_pending", "_sink")

    def __init__(
        self, log: CappedLog, masker: Masker | None, line: Callable[[str], None] | None
    ) -> None:
        self._log = log
        self._masker = masker
        self._sink = line
        self._pending = b""

    def feed(self, chunk: bytes) -> None:
        if self._masker is not None:
            # Empty while the masker holds back what may be the start of a secret.
            chunk = self._masker.feed(chunk)
        self._put(chunk)

    def end(self) -> None:
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


class Tee:
    """Copies a command's output pipe through `copy`, a read at a time (:meth:`pump`), on the
    thread that waits for the command: no thread per command. Once that thread stops waiting
    for the output (:meth:`hand_off`, :meth:`finish`), the rest is copied in a thread of its
    own, for a process left behind may hold the pipe. A copy that raises (a bug) stops, said
    once, while the pipe is still drained: the command is never blocked on it."""

    __slots__ = ("_alone", "_copy", "_feed", "ended", "fd")

    def __init__(self, read_fd: int, copy: CommandOutput) -> None:
        self.fd = read_fd
        self._copy = copy
        self._feed: Callable[[bytes], None] | None = copy.feed
        self.ended = threading.Event()  # set once the pipe is closed and the copy ended
        self._alone = False  # copying in a thread of its own

    @property
    def left_to_caller(self) -> bool:
        """Whether the caller copies (pump): not ended, nor copying in a thread of its own."""
        return not self._alone and not self.ended.is_set()

    def pump(self) -> bool:
        """One read copied; False at the end of the output, the pipe then closed."""
        chunk = _read(self.fd)
        if not chunk:
            self.close()
            return False
        if self._feed is not None:
            try:
                self._feed(chunk)
            except Exception as exc:  # any error: see the class
                self._feed = None
                _say_stopped(exc)
        return True

    def close(self) -> None:
        if self.ended.is_set():
            return
        try:
            os.close(self.fd)
            try:
                self._copy.end()
            except Exception as exc:  # any error: see the class
                if self._feed is not None:
                    _say_stopped(exc)
        finally:
            self.ended.set()

    def hand_off(self) -> None:
        """The rest copied in a thread of its own (one per command: a stalled terminal holds
        up that command only), unless it is already."""
        if not self.left_to_caller:
            return
        self._alone = True

        def drain() -> None:
            try:
                while self.pump():
                    pass
            finally:
                self.close()

        threading.Thread(target=drain, name="cronctl-output", daemon=True).start()

    def finish(self, timeout: float) -> bool:
        """Whether the copy ended within ``timeout`` seconds; if not, it goes on (hand_off)."""
        deadline = time.monotonic() + timeout
        if self.left_to_caller:
            poller = select.poll()
            poller.register(self.fd, select.POLLIN)
            while poller.poll(max(deadline - time.monotonic(), 0.0) * 1000) and self.pump():
                pass
            self.hand_off()
        return self.ended.wait(max(deadline - time.monotonic(), 0.0))


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, _CHUNK)
    except OSError:
        return b""


def _say_stopped(exc: Exception) -> None:
    with _PRINT_LOCK, suppress(OSError, ValueError):
        print(f"cronctl: a command's output stopped being logged: {exc!r}",
              file=sys.stderr, flush=True)  # fmt: skip


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
