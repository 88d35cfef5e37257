"""Text from outside cronctl (task output, a store row another machine wrote) made safe to
show: a terminal, a mail or a page gets its control characters as text, never obeyed.

Every view uses this one device, from the CLI's tables to the messages the lower layers
build around a value they read (a lock holder's host, a pause's reason)."""

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
    """Task output made safe for a terminal or a mail: control characters shown, not obeyed.

    ESC becomes ``^[``, carriage return ``^M``, DEL ``^?``, the C1 controls (U+0080-U+009F,
    which some terminals also obey) ``M-^[`` and so on, as ``cat -v`` shows them; newlines
    and tabs stay; bidirectional overrides are named (``<U+202E>``). Log files keep the
    bytes; this is only for what a person reads. `one_line` shows a newline as ``^J`` too.
    """
    return text.translate(_VISIBLE_CELL if one_line else _VISIBLE)
