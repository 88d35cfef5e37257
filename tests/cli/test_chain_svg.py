"""The dashboard's picture of a chain (cli/render/chain.py): boxes by depth, one arrow per
link, each task a link to its page; nothing for a task in no chain."""

from __future__ import annotations

import re
from dataclasses import replace
from xml.etree import ElementTree

from cronctl.cli.render.chain import chain_svg
from cronctl.core.chains import Chains
from cronctl.core.model import Task
from tests.helpers import make_task

SVG = "{http://www.w3.org/2000/svg}"


def _after(name: str, *after: str, outcome: str = "ok") -> Task:
    task = make_task("0 2 * * *", name=name)
    return replace(task, cron=None, schedule_key="after", after=after, after_outcome=outcome)


ETL = Chains(
    [
        make_task("0 2 * * *", name="extract"),
        _after("transform", "extract"),
        _after("load", "transform"),
        _after("page:oncall", "extract", "transform", outcome="failed"),
        make_task("0 3 * * *", name="alone"),
    ]
)


def test_the_picture_links_every_task_above_and_below_and_draws_each_link() -> None:
    svg = chain_svg(ETL, "transform")
    root = ElementTree.fromstring(svg)  # noqa: S314 (our own output: well-formed, inlined)
    links = [a.get("href") for a in root.iter(f"{SVG}a")]
    assert links == ["/tasks/extract", "/tasks/transform", "/tasks/load", "/tasks/page%3Aoncall"]
    # extract -> transform, transform -> load, and the failure branch's two links.
    assert len(list(root.iter(f"{SVG}path"))) == 1 + 4  # the arrowhead, then the links
    assert svg.count('stroke-dasharray="5 3"') == 2  # after_outcome = "failed"
    assert "alone" not in svg
    # Columns by depth: transform's box is right of extract's and left of load's.
    xs = [int(x) for x in re.findall(r'<rect x="(\d+)"', svg)]
    assert xs[0] < xs[1] < xs[2]


def test_the_task_itself_is_marked_and_long_names_are_shortened_with_a_tooltip() -> None:
    long = "x" * 100
    graph = Chains([make_task("0 2 * * *", name="extract"), _after(long, "extract")])
    svg = chain_svg(graph, "extract")
    assert 'font-weight="bold" fill="#1f2933">extract</text>' in svg
    assert f"<title>{long}</title>" in svg and "x" * 20 + "\N{HORIZONTAL ELLIPSIS}" in svg


def test_a_task_in_no_chain_has_no_picture_and_a_big_chain_says_how_many_more() -> None:
    assert chain_svg(ETL, "alone") == ""
    wide = Chains(
        [make_task("0 2 * * *", name="root")] + [_after(f"t{i}", "root") for i in range(80)]
    )
    svg = chain_svg(wide, "root")
    assert svg.count("<a ") == 60 and "and 21 more tasks" in svg


def test_names_are_escaped() -> None:
    # The name rule admits no markup; a hand-built task still cannot inject any.
    graph = Chains([make_task("0 2 * * *", name="a<b>&"), _after("c", "a<b>&")])
    svg = chain_svg(graph, "c")
    assert "<b>" not in svg and "a&lt;b&gt;&amp;" in svg
    ElementTree.fromstring(svg)  # noqa: S314 (our own output)
