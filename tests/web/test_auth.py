"""The dashboard's request rules (web/auth.py) and its audit file (edge/safefiles.py),
one at a time, with fixed values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cronctl.edge.safefiles import append_record
from cronctl.errors import UnsafeDirectoryError
from cronctl.web.auth import SESSION_S, Sessions, actor_of, bearer, origin_problem

TOKEN = "s" * 32


def test_a_session_cookie_is_signed_expires_and_never_holds_the_token() -> None:
    sessions = Sessions(TOKEN)
    cookie = sessions.new(1000.0)
    assert TOKEN not in cookie
    assert sessions.valid(cookie, 1000.0) and sessions.valid(cookie, 1000.0 + SESSION_S - 1)
    assert not sessions.valid(cookie, 1000.0 + SESSION_S)
    issued, nonce, mac = cookie.split(".")
    assert not sessions.valid(f"{int(issued) + 1}.{nonce}.{mac}", 1000.0)  # date moved
    assert not sessions.valid(cookie, 999.0)  # issued in the future
    assert not Sessions("t" * 32).valid(cookie, 1000.0)  # a new token ends sessions
    for junk in ("", "x", TOKEN, "1.2.é", "..", f"{issued}..{mac}"):
        assert not sessions.valid(junk, 1000.0)


def test_a_csrf_token_belongs_to_one_session() -> None:
    sessions = Sessions(TOKEN)
    one, two = sessions.new(0.0), sessions.new(0.0)
    assert sessions.csrf_ok(one, sessions.csrf(one))
    assert not sessions.csrf_ok(one, sessions.csrf(two))
    assert not sessions.csrf_ok(one, "") and not sessions.csrf_ok(one, "é")


def test_bearer_takes_only_a_bearer_header() -> None:
    assert bearer({"authorization": f"Bearer {TOKEN}"}) == TOKEN
    assert bearer({"authorization": f"bearer  {TOKEN} "}) == TOKEN
    assert bearer({"authorization": TOKEN}) is None
    assert bearer({"authorization": f"Basic {TOKEN}"}) is None
    assert bearer({}) is None


@pytest.mark.parametrize(
    ("headers", "ok"),
    [
        ({"host": "h:1", "origin": "http://h:1"}, True),
        ({"host": "h:1", "origin": "HTTP://H:1"}, True),
        ({"host": "h:1", "referer": "http://h:1/tasks/x"}, True),
        ({"host": "h", "origin": "https://h", "x-forwarded-proto": "https"}, True),
        ({"host": "h", "origin": "http://h", "x-forwarded-proto": "https"}, False),
        ({"host": "h:1", "origin": "http://h:2"}, False),
        ({"host": "h:1", "origin": "null"}, False),
        ({"host": "h:1", "origin": "http://evil", "referer": "http://h:1/"}, False),
        ({"host": "h:1", "referer": "http://h:1.evil/"}, False),
        ({"host": "h:1"}, False),
    ],
)
def test_origin_must_be_the_dashboard_itself(headers: dict[str, str], ok: bool) -> None:
    assert (origin_problem(headers, "http") is None) is ok


def test_forwarded_headers_count_only_from_a_proxy_on_this_machine() -> None:
    sent = {"x-forwarded-user": "alice\x1b[2J", "x-forwarded-for": "6.6.6.6, 203.0.113.9"}
    direct = actor_of("192.0.2.5", sent, "page")
    assert (direct.client, direct.forwarded_user, direct.forwarded_for) == ("192.0.2.5", None, None)
    assert direct.describe() == "dashboard from 192.0.2.5"
    proxied = actor_of("127.0.0.1", sent, "api")
    assert proxied.forwarded_user == "alice^[[2J" and proxied.forwarded_for == "203.0.113.9"
    assert proxied.describe() == "dashboard (alice^[[2J) from 203.0.113.9"
    odd = actor_of("::1", {"x-forwarded-for": "not-an-address", "x-forwarded-user": ""}, "api")
    assert odd.forwarded_for is None and odd.forwarded_user is None
    assert actor_of("::1", {"x-forwarded-user": "u" * 500}, "api").forwarded_user == "u" * 64


def test_the_audit_file_is_private_appended_and_refuses_a_planted_link(tmp_path: Path) -> None:
    state = tmp_path / "state"
    path = append_record(state, {"action": "pause", "reason": "a\x1b"})
    append_record(state, {"action": "resume"})
    assert path.stat().st_mode & 0o777 == 0o600
    lines = path.read_text(encoding="ascii").splitlines()
    assert [json.loads(line)["action"] for line in lines] == ["pause", "resume"]
    assert "\\u001b" in lines[0]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("", encoding="utf-8")
    path.unlink()
    path.symlink_to(elsewhere)
    with pytest.raises(UnsafeDirectoryError):
        append_record(state, {"action": "run"})
    assert elsewhere.read_text(encoding="utf-8") == ""
