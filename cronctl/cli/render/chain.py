"""A task's chain (`after`) as a small SVG for the dashboard's task page: the tasks above and
below it in columns by depth, each a link to its page. Plain markup, no script (the pages
hold none): names are escaped although the name rule leaves nothing to escape."""

from __future__ import annotations

from urllib.parse import quote
from xml.sax.saxutils import escape, quoteattr

from cronctl.core.chains import Chains

_BOX_W, _BOX_H, _GAP_X, _GAP_Y, _PAD = 160, 26, 56, 12, 8
_LABEL = 21  # characters of a name a box shows; the whole name is its tooltip
#: An arrow's look by the after_outcome of the task it leads to.
_STROKES = {
    "ok": ('stroke="#3f7f4d"', ""),
    "failed": ('stroke="#b3261e" stroke-dasharray="5 3"', "failed"),
    "any": ('stroke="#6b6b6b"', "any"),
}


def chain_svg(graph: Chains, name: str) -> str:
    """The SVG of `name`'s chain, or "" when it is in none (or in a cycle, which `check`
    refuses)."""
    if graph.depth(name) is None or not (graph.upstream(name) or graph.downstream(name)):
        return ""
    shown, more = graph.around(name)
    depths = [graph.depth(task) or 0 for task in shown]
    top = min(depths)
    place: dict[str, tuple[int, int]] = {}
    rows: dict[int, int] = {}
    for task, depth in zip(shown, depths, strict=True):
        column = depth - top
        place[task] = (
            _PAD + column * (_BOX_W + _GAP_X),
            _PAD + rows.get(column, 0) * (_BOX_H + _GAP_Y),
        )
        rows[column] = rows.get(column, 0) + 1
    width = _PAD * 2 + (max(rows) + 1) * (_BOX_W + _GAP_X) - _GAP_X
    height = _PAD * 2 + max(rows.values()) * (_BOX_H + _GAP_Y) - _GAP_Y + (18 if more else 0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chain" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f"aria-label={quoteattr(f'the chain of {name}')}>",
        '<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="8" '
        'markerHeight="8" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#6b6b6b"/>'
        "</marker></defs>",
    ]
    for task in shown:
        outcome = graph.tasks[task].after_outcome
        arrows = [_arrow(place[up], place[task], outcome) for up in graph.upstream(task)
                  if up in place]  # fmt: skip
        parts += [*arrows, _outcome(place[task], outcome) if arrows else ""]
    parts += [_box(task, place[task], task == name) for task in shown]
    if more:
        parts.append(
            f'<text x="{_PAD}" y="{height - _PAD}" font-size="12">and {more} more tasks</text>'
        )
    return "".join(parts) + "</svg>"


def _arrow(start: tuple[int, int], end: tuple[int, int], outcome: str) -> str:
    x1, y1 = start[0] + _BOX_W, start[1] + _BOX_H // 2
    x2, y2 = end[0], end[1] + _BOX_H // 2
    stroke = _STROKES.get(outcome, _STROKES["ok"])[0]
    return (
        f'<path d="M{x1},{y1} C{x1 + 28},{y1} {x2 - 28},{y2} {x2},{y2}" fill="none" '
        f'{stroke} stroke-width="1.5" marker-end="url(#arrow)"/>'
    )


def _outcome(at: tuple[int, int], outcome: str) -> str:
    """What a task waits for, beside where its arrows end, once however many arrive."""
    label = _STROKES.get(outcome, _STROKES["ok"])[1]
    if not label:
        return ""
    x, y = at
    return (
        f'<text x="{x - 10}" y="{y - 2}" font-size="11" text-anchor="end" '
        f'fill="#444">{label}</text>'
    )


def _box(task: str, at: tuple[int, int], this: bool) -> str:
    x, y = at
    label = task if len(task) <= _LABEL else task[: _LABEL - 1] + "\N{HORIZONTAL ELLIPSIS}"
    fill, weight = ("#dbe7f5", "bold") if this else ("#ffffff", "normal")
    box = (
        f'<rect x="{x}" y="{y}" width="{_BOX_W}" height="{_BOX_H}" rx="4" fill="{fill}" '
        f'stroke="#4a5d75"/><text x="{x + 8}" y="{y + 17}" font-size="13" '
        f'font-weight="{weight}" fill="#1f2933">{escape(label)}</text>'
    )
    return (
        f"<a href={quoteattr('/tasks/' + quote(task, safe=''))}><title>{escape(task)}"
        f"</title>{box}</a>"
    )
