"""A long table on a terminal, printed line by line: what rich's Table shows, far faster.

rich lays a Table out cell by cell (padding, measuring, cropping each one), which makes a
`list` of many tasks slow to draw (docs/architecture.md#devices-kept-for-speed). With the
widths already fixed by render/fit.py, no cell wraps, so each row is one line: each
cell is cropped with an ellipsis and padded to its width exactly as the Table crops it
(`Text.truncate`), tabs expanded as the Table expands them, columns two spaces apart, the
header bold. The characters and the style each is printed in are the Table's (the escape
codes are grouped differently: the header's two-space gaps are one bold run, not two).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

#: From this many rows on, a terminal table that fits the width is printed line by line
#: (below it, or when even the shortened columns overflow and rich must squeeze them, a
#: rich Table: the same picture, and its escape codes as they always were).
LONG_TABLE_ROWS = 500


def print_lines(
    console: Console,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    keep: Sequence[int],
    widths: Sequence[int],
    style_of: Callable[[str, str], str],
) -> None:
    """Print the kept columns of `rows` under a bold header, each cropped to its width."""
    from rich.text import Text

    def line(cells: Sequence[str], header: bool) -> Text:
        parts = []
        for index in keep:
            style = "bold" if header else style_of(headers[index], cells[index])
            cell = Text(cells[index], style=style)
            cell.expand_tabs()
            cell.truncate(widths[index], overflow="ellipsis", pad=True)
            parts.append(cell)
        return Text("  ", style="bold" if header else "").join(parts)

    lines = [line(headers, True), *(line(row, False) for row in rows)]
    console.print(Text("\n").join(lines), no_wrap=True, overflow="ignore", crop=False)
