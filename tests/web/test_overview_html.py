"""The overview's rows are written in Python, not by Jinja2 (web/overview_html.py):
their escaping must be Jinja2's autoescaping of what `visible` shows, for any text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from jinja2.filters import do_urlencode
from markupsafe import escape

from cronctl.cli.render.runs import visible
from cronctl.web.overview_html import text, url_part

# The characters HTML and terminals care about, among any others.
NASTY = st.text(
    st.one_of(
        st.sampled_from("<>&\"'/ \t\n\x1b\x07\x7f\x9b\u202e\u2066\u2028\xa0é%?#+"),
        st.characters(),
    ),
    max_size=40,
)


@given(NASTY)
def test_text_is_escaped_as_jinja2_escapes_visible_text(value: str) -> None:
    assert text(value) == str(escape(visible(value)))


@given(NASTY)
def test_a_url_part_is_quoted_as_jinja2_urlencode_quotes_it(value: str) -> None:
    try:
        expected = str(escape(do_urlencode(value)))
    except UnicodeEncodeError:  # a lone surrogate: neither can encode it
        return
    assert url_part(value) == expected
