"""A long table on a terminal is printed line by line: the same characters, in the same styles,
as the rich Table that draws shorter ones (cropped, padded, coloured, columns dropped to fit)."""

from __future__ import annotations

import io
import random
import re

import pytest

from cronctl.cli.render import tables
from cronctl.cli.render.tables import table

RESET = "\x1b[0m"
HEADERS = ["TASK", "SCHEDULE", "NEXT RUN", "GUARDS", "LAST RUN", "WHEN"]
PIECES = ["job", "-", " ", "ok", "failed", "skipped", "漢字", "é", "😀", "[b]x[/]", "\t", "09:00"]


class Terminal(io.StringIO):
    """What `table` writes to, taken for a terminal."""

    def isatty(self) -> bool:
        return True


def rows(count: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    made = []
    for n in range(count):
        cells = ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 9))) for _ in HEADERS]
        cells[0] = f"task-{n:04d}"
        cells[2] = "2026-08-03T12:00:00Z"
        cells[4] = f"2026-08-03T12:00:00Z {rng.choice(['ok', 'failed', 'missed', '-'])}"
        made.append(cells)
    return made


def drawn(data: list[list[str]]) -> str:
    out = Terminal()
    table(HEADERS, data, stream=out, drop=("GUARDS", "SCHEDULE"))
    return out.getvalue()


def styled_characters(text: str) -> list[tuple[str, str]]:
    """Each printed character with the escape codes in force when it is printed."""
    found: list[tuple[str, str]] = []
    state = ""
    for piece in re.split(r"(\x1b\[[0-9;]*m)", text):
        if piece.startswith("\x1b["):
            state = "" if piece == RESET else state + piece
        else:
            found += [(char, state) for char in piece]
    return found


@pytest.mark.parametrize("columns", ["40", "80", "120"])
@pytest.mark.parametrize("no_color", [False, True])
def test_line_by_line_shows_what_the_rich_table_shows(
    monkeypatch: pytest.MonkeyPatch, columns: str, no_color: bool
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.delenv("NO_COLOR", raising=False)
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    data = rows(tables.LONG_TABLE_ROWS, seed=int(columns))
    fast = drawn(data)
    monkeypatch.setattr(tables, "LONG_TABLE_ROWS", len(data) + 1)
    slow = drawn(data)
    assert styled_characters(fast) == styled_characters(slow)
    assert (fast == slow) is (columns == "40")  # too narrow to fit: rich squeezes it
    assert ("\x1b[32m" in fast) is not no_color  # outcomes coloured unless NO_COLOR
    assert len(fast.splitlines()) == len(data) + 1
