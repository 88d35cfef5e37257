"""Where things stand in a schedule file's text (tomllib gives no positions): the header of
each table, and the first line of each key inside it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*(\]\]?)\s*(#.*)?$")
_KEY = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*[.=]""")
# Compiled on first use (re's cache), not at import: only a file with a syntax error needs it.
_SYNTAX_LINE = r"\(at line (\d+), column \d+\)"


@dataclass
class _Block:
    header_line: int
    keys: dict[str, int] = field(default_factory=dict)

    def line(self, key: str | None) -> int:
        return self.keys.get(key, self.header_line) if key else self.header_line


@dataclass
class LineIndex:
    """Lines of the [cronctl] and [defaults] keys, and of each [[task]] and its keys."""

    tables: dict[str, _Block] = field(default_factory=dict)
    tasks: list[_Block] = field(default_factory=list)
    groups: list[_Block] = field(default_factory=list)

    def task_line(self, index: int, key: str | None = None) -> int | None:
        """The line of `key` in the index-th task, or of its header (key None or absent)."""
        return self.tasks[index].line(key) if index < len(self.tasks) else None

    def group_line(self, index: int, key: str | None = None) -> int | None:
        return self.groups[index].line(key) if index < len(self.groups) else None

    def table_line(self, table: str, key: str | None = None) -> int | None:
        block = self.tables.get(table)
        return None if block is None else block.line(key)


def index_lines(text: str) -> LineIndex:
    """Scan the source text once; multi-line strings are stepped over."""
    index = LineIndex()
    current: _Block = index.tables.setdefault("", _Block(1))
    in_multiline: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if in_multiline is not None:
            if line.count(in_multiline) % 2 == 1:
                in_multiline = None
            continue
        header = _HEADER.match(line)
        if header and not line.lstrip().startswith(('["', "['")):
            current = _enter_table(index, header.group(1), header.group(2), number)
            continue
        key = _KEY.match(line)
        if key:
            name = key.group(1).strip("\"'")
            current.keys.setdefault(name, number)
        in_multiline = next((q for q in ('"""', "'''") if line.count(q) % 2 == 1), None)
    return index


def _enter_table(index: LineIndex, opening: str, name: str, number: int) -> _Block:
    parts = [p.strip().strip("\"'") for p in name.split(".")]
    if opening == "[[" and parts in (["task"], ["group"]):
        block = _Block(number)
        (index.tasks if parts == ["task"] else index.groups).append(block)
        return block
    if parts[0] == "task" and index.tasks:
        # [task.env] after a [[task]] belongs to that task; keep its keys apart.
        block = index.tasks[-1]
        block.keys.setdefault(parts[1] if len(parts) > 1 else parts[0], number)
        return _Block(number)
    # A [name] or [name.sub] header defines the top-level key `name` (e.g. a [task] table
    # written where [[task]] was meant): messages about that key point at the header.
    index.tables[""].keys.setdefault(parts[0], number)
    block = index.tables.setdefault(parts[0], _Block(number))
    if len(parts) > 1:
        block.keys.setdefault(parts[1], number)
        return _Block(number)
    return block


def syntax_error_line(message: str) -> tuple[int | None, str]:
    """tomllib's `... (at line 3, column 5)` -> (3, '...')."""
    match = re.search(_SYNTAX_LINE, message)
    if not match:
        return None, message
    return int(match.group(1)), re.sub(_SYNTAX_LINE, "", message).strip()
