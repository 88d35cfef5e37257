"""Output copied to the log as it comes (masked, capped), and streamed to a terminal or stdout,
its control sequences made visible: a task must not move the cursor or hide lines."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from contextlib import suppress

from cronctl.core.envfile import Masker
from cronctl.edge.process.capped import CappedLog

_CHUNK = 65536
# A line longer than this is passed on in pieces, so a task without newlines cannot grow it.
_MAX_LINE = 65536
_PRINT_LOCK = threading.Lock()
# C0 controls (but tab) as `^X`, DEL as `^?`, C1 controls as `\\x9b`.
_VISIBLE = {code: f"^{chr(code + 0x40)}" for code in range(0x20) if code != 0x09}
_VISIBLE |= {0x7F: "^?"} | {code: f"\\x{code:02x}" for code in range(0x80, 0xA0)}


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


def tee(read_fd: int, copy: CommandOutput) -> None:
    """Copy `read_fd` through `copy` on the caller's thread (one per command: a stalled
    terminal holds up that command only). A copy that raises (a bug) stops, said once,
    while the pipe is still drained: the command is never blocked on it."""
    feed: Callable[[bytes], None] | None = copy.feed
    try:
        while chunk := _read(read_fd):
            if feed is not None:
                try:
                    feed(chunk)
                except Exception as exc:  # any error: see above
                    feed = None
                    _say_stopped(exc)
    finally:
        os.close(read_fd)
        try:
            copy.end()
        except Exception as exc:  # any error: see above
            if feed is not None:
                _say_stopped(exc)


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
