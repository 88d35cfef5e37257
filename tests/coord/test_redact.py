"""Passwords hidden in text: every form libpq takes a password in (a URL's user
information, written as is or percent-encoded, a `password=` parameter, the keyword form),
holding characters a URL would encode (a space, quotes, `#`), wherever the text puts it (a
message, a shell word in quotes, an array command's element, the dashboard's command)."""

from __future__ import annotations

import pytest

from cronctl.coord.redact import redact_text, redact_url
from cronctl.web.site import masked

# Each password is Qx9 and Wv7 around a character a URL would encode; neither may show.
FORMS = [
    pytest.param("postgresql://u:Qx9 Wv7@db/x", id="space"),
    pytest.param("postgres://u:Qx9 Wv7@db:5432/x", id="postgres-scheme"),
    pytest.param("postgresql://u:Qx9%20Wv7@db/x", id="percent-encoded"),
    pytest.param('postgresql://u:Qx9"Wv7 z@db/x', id="double-quote"),
    pytest.param("postgresql://u:Qx9'Wv7 z@db/x", id="single-quote"),
    pytest.param("postgresql://u:Qx9#Wv7 z@db/x", id="hash"),
    pytest.param("postgresql://u:Qx9 Wv7@[::1]:5432/x", id="ipv6-host"),
    pytest.param("postgresql://u@db/x?password=Qx9 Wv7", id="query"),
    pytest.param("postgresql://u@db/x?sslpassword=Qx9 Wv7&sslmode=require", id="sslpassword"),
    pytest.param("postgresql:///x?host=/run/pg&password=Qx9 Wv7", id="socket-query"),
    pytest.param("host=db user=u password='Qx9 Wv7' dbname=x", id="keywords-quoted"),
    pytest.param("host=db password='Qx9\\' Wv7' dbname=x", id="keywords-escaped-quote"),
    pytest.param("host=db password=Qx9\\ Wv7 dbname=x", id="keywords-escaped-space"),
]
PLACES = [
    pytest.param("{}", id="alone"),
    pytest.param("cannot reach {}: connection refused", id="message"),
    pytest.param("pg_dump '{}' > /backup/x.sql", id="single-quoted"),
    pytest.param('psql "{}" -c "select 1"', id="double-quoted"),
]


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("form", FORMS)
def test_no_piece_of_a_password_shows_in_text_or_on_the_dashboard(form: str, place: str) -> None:
    text = place.format(form.replace('"', '\\"') if place.startswith("psql") else form)
    for shown in (redact_text(text, None), masked(text)):
        assert "Qx9" not in shown and "Wv7" not in shown, shown
        assert "***" in shown and any(h in shown for h in ("db", "[::1]", "/run/pg")), shown


def test_text_beside_a_password_is_kept() -> None:
    text = "pg_dump 'postgresql://u:a b@db/x' > out.sql && echo done"
    assert masked(text) == "pg_dump 'postgresql://u:***@db/x' > out.sql && echo done"
    assert masked("curl https://example.com/a b@c") == "curl https://example.com/a b@c"
    # An array command: each word masked whole, then quoted as a shell would need.
    assert masked(["psql", "postgresql://u:a b@db/x"]) == "psql 'postgresql://u:***@db/x'"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:a b@db/x", "postgresql://u:***@db/x"),
        ("postgresql://u@db/x?password=a b&sslmode=require", "postgresql://u@db/x?password=***&sslmode=require"),
    ],
)  # fmt: skip
def test_a_url_password_with_a_space_is_hidden_whole(url: str, shown: str) -> None:
    assert redact_url(url) == shown
