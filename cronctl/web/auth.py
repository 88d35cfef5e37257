"""Who may use the dashboard and who a request comes from (docs/dashboard.md, "Security"),
as plain values (headers as a mapping), so each rule reads and tests alone."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from cronctl.cli.render.runs import visible
from cronctl.errors import UsageError
from cronctl.web.actions import Actor

TOKEN_ENV = "CRONCTL_SERVE_TOKEN"  # noqa: S105  (the name of the variable)
_MIN_TOKEN = 16
SESSION_COOKIE = "cronctl_session"
SESSION_S = 12 * 3600  # then the login form asks for the token again
_MAX_USER = 64  # the longest X-Forwarded-User kept: a login name, not a document


@dataclass(frozen=True, slots=True)
class Listen:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        # Another name than localhost may resolve to anything.
        return self.host == "localhost" or _loopback(self.host)

    def host_headers(self) -> frozenset[str]:
        names = {"127.0.0.1", "localhost", "[::1]", self.host}
        return frozenset(f"{n}:{self.port}" for n in names)


def parse_listen(text: str) -> Listen:
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(
            f"--listen {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8077 or [::1]:8077"
        )
    return Listen(host, int(port))


def check_exposure(listen: Listen, token: str | None) -> None:
    if token is not None and len(token) < _MIN_TOKEN:
        raise UsageError(f"{TOKEN_ENV} is too short: use at least {_MIN_TOKEN} random characters")
    if not listen.loopback and token is None:
        raise UsageError(
            f"refusing to listen on {listen.host}:{listen.port} without a token: other "
            f"machines could read every task's output. Set {TOKEN_ENV} (e.g. "
            "`openssl rand -hex 24`), or listen on 127.0.0.1 behind a reverse proxy"
        )


def check_actions(allow: bool, token: str | None) -> None:
    if allow and token is None:
        raise UsageError(
            f"--allow-actions needs {TOKEN_ENV}: pause, resume and run now are refused to "
            "anyone without the token, so set one (e.g. `openssl rand -hex 24`), or drop "
            "--allow-actions for a read-only dashboard"
        )


class Sessions:
    """The token and the login sessions it signs: cookies ``ISSUED.NONCE.MAC``, an HMAC keyed
    with the token (never the token itself; a new token ends every session). A session's
    CSRF token is an HMAC of its cookie under a second key."""

    def __init__(self, token: str) -> None:
        secret = token.encode()
        self._token = secret
        self._session = hmac.new(secret, b"cronctl serve: session", hashlib.sha256).digest()
        self._csrf = hmac.new(secret, b"cronctl serve: csrf", hashlib.sha256).digest()

    def new(self, now: float) -> str:
        body = f"{int(now)}.{secrets.token_urlsafe(18)}"
        return f"{body}.{_mac(self._session, body)}"

    def valid(self, cookie: str, now: float) -> bool:
        body, _, mac = cookie.rpartition(".")
        issued = body.partition(".")[0]
        if not body or not issued.isdigit():
            return False
        signed = hmac.compare_digest(mac.encode(), _mac(self._session, body).encode())
        return signed and 0 <= now - int(issued) < SESSION_S

    def csrf(self, cookie: str) -> str:
        return _mac(self._csrf, cookie)

    def csrf_ok(self, cookie: str, given: str) -> bool:
        return hmac.compare_digest(self.csrf(cookie).encode(), given.encode())

    def matches(self, given: str) -> bool:
        """In constant time (a non-ASCII guess is just wrong, never an error)."""
        return hmac.compare_digest(given.encode(), self._token)


def _mac(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def bearer(headers: Mapping[str, str]) -> str | None:
    scheme, _, value = headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def scheme_of(headers: Mapping[str, str], scheme: str) -> str:
    """The scheme the browser used: ``X-Forwarded-Proto`` from a TLS proxy, else the
    connection's (a page of another site cannot set that header on a form post)."""
    forwarded = headers.get("x-forwarded-proto", "").strip().lower()
    return forwarded if forwarded in ("http", "https") else scheme


def origin_problem(headers: Mapping[str, str], scheme: str) -> str | None:
    """Why the request does not come from a page of this dashboard, or None: its ``Origin``,
    else its ``Referer``, must be its own scheme and ``Host``; neither is refused (a browser
    sends ``Origin`` with every form post)."""
    expected = f"{scheme_of(headers, scheme)}://{headers.get('host', '')}".lower()
    origin = headers.get("origin")
    if origin is not None:
        seen, what = origin.strip().lower(), "Origin"
    elif (referer := headers.get("referer")) is not None:
        parts = urlsplit(referer.strip())
        seen, what = f"{parts.scheme}://{parts.netloc}".lower(), "Referer"
    else:
        return "the request has neither an Origin nor a Referer header"
    if seen != expected:
        shown, mine = visible(seen, True)[:100], visible(expected, True)
        return f"{what} {shown!r} is not this dashboard ({mine!r})"
    return None


def actor_of(client: str | None, headers: Mapping[str, str], via: str) -> Actor:
    """Who asked. ``X-Forwarded-User`` and ``-For`` are taken only from a loopback peer (a
    reverse proxy on this machine), and only the last ``X-Forwarded-For`` address (the one
    that proxy saw; earlier ones are whatever the client sent)."""
    peer = client or "unknown"
    if not _loopback(peer):
        return Actor(client=peer, via=via)
    user = headers.get("x-forwarded-user", "").strip()
    last = headers.get("x-forwarded-for", "").rpartition(",")[2].strip()
    return Actor(
        forwarded_user=visible(user, one_line=True)[:_MAX_USER] or None,
        client=peer,
        forwarded_for=last if _ip(last) is not None else None,
        via=via,
    )


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _loopback(text: str) -> bool:
    return (ip := _ip(text)) is not None and ip.is_loopback
