"""Output copied to the log as it comes (masked, capped), and streamed to a terminal or stdout.

A task's lines go to the terminal (`exec`) or to cronctl's stdout (`work --output`). Printed
text has control and escape sequences made visible: a task's output must not be able to move
the cursor, retitle the terminal or hide lines from an operator.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

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


def tee(
    read_fd: int,
    log: CappedLog,
    masker: Masker | None = None,
    line: Callable[[str], None] | None = None,
) -> None:
    """Copy everything from `read_fd` into `log` (its secret values masked first, when there
    is a `masker`), and each line (without its newline) to `line`; close `read_fd` and `log`
    at the end. A failing `line` stops the copy to it only."""
    pending = b""
    sink = line
    try:
        ended = False
        while not ended:
            chunk = os.read(read_fd, _CHUNK)
            ended = not chunk
            if masker is not None:
                # Empty while the masker holds back what may be the start of a secret.
                chunk = masker.flush() if ended else masker.feed(chunk)
            log.write(chunk)
            if sink is not None and chunk:
                pending += chunk
                *lines, pending = pending.split(b"\n")
                if len(pending) > _MAX_LINE:
                    lines.append(pending)
                    pending = b""
                sink = _deliver(sink, lines)
        if pending and sink is not None:
            _deliver(sink, [pending])
    finally:
        os.close(read_fd)
        log.close()


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
