"""A run's log written under its cap (`max_output`): the head, a marker line, the tail.

The head (half the cap) is kept; the rest is appended, and once twice the tail's share has
piled up, the last share moves up behind the head and the file is truncated: at most about
1.5 times the cap on disk, in constant memory, the command never blocked. A failed write (a
full disk) loses log bytes, never the task.
"""

from __future__ import annotations

import os

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
