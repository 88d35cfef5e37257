"""The overview's rows as HTML, in Python for speed (docs/architecture.md, "Devices kept
for speed"): every value goes through :func:`text` (controls made visible, then escaped as
Jinja2 does) or :func:`url_part`, but an instant's UTC digits and words."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from urllib.parse import quote

from markupsafe import escape

from cronctl.cli.render.runs import visible
from cronctl.coord.history import TaskLatest
from cronctl.core.model import format_utc
from cronctl.core.zones import Zone
from cronctl.web.human_time import exact, relative
from cronctl.web.views import TaskSummary

# What urllib.parse.quote leaves as it is (with "/" safe, as Jinja2's urlencode filter).
_UNQUOTED = re.compile(r"[A-Za-z0-9_.~/-]*")
_NEWLINE = "\n"
_NEVER = '<span class="muted">never ran</span>'


def time_tag(at: datetime | None, now: datetime, zone: Zone) -> str:
    """Words from ``now``, the UTC instant for machines, the wall time in ``zone`` on hover."""
    if at is None:
        return "-"
    return (
        f'<time datetime="{format_utc(at)}" title="{text(exact(at, zone))}">'
        f"{relative(at, now)}</time>"
    )


def text(value: object) -> str:
    shown = value if isinstance(value, str) else str(value)
    if not shown.isprintable():  # every character visible() rewrites is unprintable
        shown = visible(shown)
    return str(escape(shown))


def url_part(value: str) -> str:
    return value if _UNQUOTED.fullmatch(value) else str(escape(quote(value, safe="/")))


def overview_rows(rows: Iterable[TaskSummary], now: datetime) -> str:
    out: list[str] = []
    # Values rows repeat (words, zones, hosts, outcomes, instants): written once a page.
    once = functools.cache(text)
    times = functools.cache(lambda at, zone: time_tag(at, now, zone))
    for row in rows:
        task = row.task
        zone = task.zone
        state = once(row.state)
        name = task.name
        note = f'\n<div class="muted">{text(task.description)}</div>' if task.description else ""
        status = [f'<span class="badge {state}">{state}</span>']
        if row.failures:
            status.append(f'<div class="muted">{row.failures} failing</div>')
        if row.overdue:
            status.append(f'<div class="muted">overdue since {times(row.overdue, zone)}</div>')
        if row.paused:
            status.append(_paused(row))
        last = "".join(
            f"<div>{_outcome(r.outcome, r.id, r.host, once)} "
            f'<span class="muted">{times(r.occurrence, zone)}</span></div>'
            for r in row.last
        )
        if row.hosts is not None:
            last = _counted(row.hosts, url_part(name), once)
        running = "".join(
            f"<div>{once(r.host)}, started {times(r.started, zone)}</div>" for r in row.running
        )
        out.append(
            f'<tr class="state-{state}">\n'
            f'<td><a href="/tasks/{url_part(name)}">{text(name)}</a>{note}</td>\n'
            f"<td>{_NEWLINE.join(status)}</td>\n"
            f'<td>{once(row.words)} <span class="muted">{once(zone.name)}</span></td>\n'
            f"<td>{times(row.next_run, zone)}</td>\n"
            f"<td>{last or _NEVER}</td>\n"
            f"<td>{running}</td>\n</tr>\n"
        )
    return "".join(out)


def _outcome(outcome: str, run_id: str, host: str, once: Callable[[str], str]) -> str:
    css = once(outcome.replace(":", "").replace(" ", "-"))  # "skipped: paused": skipped-paused
    return (
        f'<a class="outcome {css}" href="/runs/{url_part(run_id)}">{once(outcome)}</a> {once(host)}'
    )


def _counted(hosts: TaskLatest, task_url: str, once: Callable[[str], str]) -> str:
    cells = [f"<div>{_outcome(h.outcome, h.run_id, h.host, once)}</div>" for h in hosts.not_ok]
    if more := hosts.not_ok_hosts - len(hosts.not_ok):
        cells.append(f'<div><a href="/tasks/{task_url}#hosts">{more} more not ok</a></div>')
    if hosts.ok_hosts:
        plural = "host" if hosts.ok_hosts == 1 else "hosts"
        cells.append(
            f'<div><a class="outcome ok" href="/tasks/{task_url}?outcome=ok">ok</a> on '
            f"{hosts.ok_hosts} {plural}</div>"
        )
    return "".join(cells)


def _paused(row: TaskSummary) -> str:
    who = ""
    if row.pause is not None and row.pause.user:
        who = f" by {text(row.pause.user)}"
        if row.pause.host:
            who += f"@{text(row.pause.host)}"
    why = f": {text(row.pause_reason)}" if row.pause_reason else ""
    return f'<div class="muted">paused{who}{why}</div>'
