"""Text from outside cronctl (task output, a store row another machine wrote) made safe to
show: every view gets its control characters as text, never obeyed."""

from __future__ import annotations


def _caret(code: int) -> str:
    # cat -v's notation: ^[ for ESC, ^? for DEL, M-^[ for the C1 twin of ESC (U+009B).
    if code >= 0x80:
        return "M-" + _caret(code - 0x80)
    return "^?" if code == 0x7F else "^" + chr(code + 0x40)


_VISIBLE = {c: _caret(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (9, 10)}
# Bidirectional overrides reorder what a reader sees ("Trojan Source"): name them too.
_VISIBLE.update({c: f"<U+{c:04X}>" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))})
# A table cell is one line: a newline in it would forge a row.
_VISIBLE_CELL = {**_VISIBLE, 10: "^J"}


def visible(text: str, one_line: bool = False) -> str:
    """Control characters shown as ``cat -v`` does (C1 ones too: some terminals obey them),
    newlines and tabs kept (`one_line`: a newline shown as ``^J``), bidirectional overrides
    named (``<U+202E>``)."""
    return text.translate(_VISIBLE_CELL if one_line else _VISIBLE)
