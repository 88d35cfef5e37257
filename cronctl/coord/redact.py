"""Passwords out of every message about the coordination store (docs/fleets-postgresql.md).
libpq echoes the pieces of a URL it misread, and cuts an unencoded password (``/``, ``?``,
``@``, ``&``) into such pieces: so the password is found by position, as a person meant it,
and every quoted piece of a driver's error that overlaps it is hidden, however short."""

from __future__ import annotations

import re
from urllib.parse import unquote

MASK = "***"
#: Query parameters whose value is a secret: the password, and the SSL key's passphrase.
_SECRET_PARAMS = ("password", "sslpassword")
#: libpq's connection keywords: after ``password=``, an ``&`` that does not start one of
#: these is taken as part of the password (``password=a&b`` is what a person meant).
# fmt: off
_KEYWORDS = frozenset((
    "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "require_auth",
    "channel_binding", "connect_timeout", "client_encoding", "options", "application_name",
    "fallback_application_name", "keepalives", "keepalives_idle", "keepalives_interval",
    "keepalives_count", "tcp_user_timeout", "replication", "gssencmode", "sslmode",
    "sslnegotiation", "requiressl", "sslcompression", "sslcert", "sslkey", "sslpassword",
    "sslcertmode", "sslrootcert", "sslcrl", "sslcrldir", "sslsni", "requirepeer",
    "ssl_min_protocol_version", "ssl_max_protocol_version", "krbsrvname", "gsslib",
    "gssdelegation", "service", "target_session_attrs", "load_balance_hosts",
))
# fmt: on
_QUOTED = re.compile(r'"([^"\n]*)"')
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_SPACE = re.compile(r"\s")
#: A secret parameter that ends a URL: its value may run on past a space.
_LAST_PARAM_SECRET = re.compile(r"[?&](?:ssl)?password=[^&]*$", re.IGNORECASE)
#: ``password=VALUE`` in libpq's keyword form: a value in single quotes, or unquoted up to
#: a space; a backslash escapes the next character in either (``'it\'s'``, ``my\ pw``).
_PARAM_PASSWORD = re.compile(
    r"((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|\"[^\"]*\"|(?:[^\s&\"'\\]|\\.)+)",
    re.IGNORECASE,
)
_PIECES = re.compile(r"[/@:?&=,\[\]%#]")
#: A secret or piece this long is hidden wherever it appears in a driver's error.
_SHORT = 4


def password_spans(url: str) -> list[tuple[int, int]]:
    """Where ``url`` writes a secret, as (start, end) offsets: the user information's password
    both as libpq reads it (up to the first ``@`` before any ``/``) and as a person meant it
    (up to the last ``@`` outside a query parameter), and each ``password=`` value."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return []
    base = len(scheme) + len(sep)
    ends = [at for at in (_libpq_userinfo_end(rest), _meant_userinfo_end(rest)) if at >= 0]
    spans: list[tuple[int, int]] = []
    for at in ends:
        colon = rest.find(":", 0, at)
        if colon >= 0:
            spans.append((base + colon + 1, base + at))
    query = rest.find("?", max(ends, default=-1) + 1)
    if query >= 0:
        spans += _param_spans(rest[query + 1 :], base + query + 1)
    return _merged(spans)


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _libpq_userinfo_end(rest: str) -> int:
    found = re.search(r"[@/]", rest)
    return found.start() if found is not None and found.group() == "@" else -1


def _meant_userinfo_end(rest: str) -> int:
    at = rest.rfind("@")
    while at >= 0:
        query = rest.rfind("?", 0, at)
        segment = re.split(r"[?&]", rest[query + 1 : at])[-1] if query >= 0 else ""
        if "=" not in segment:
            return at
        at = rest.rfind("@", 0, at)
    return -1


def _param_spans(query: str, offset: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    parts = query.split("&")
    pos = offset
    secret: tuple[int, int] | None = None
    for part in parts:
        key = part.split("=", 1)[0].strip().lower()
        if secret is not None and key not in _KEYWORDS:
            secret = (secret[0], pos + len(part))  # an unencoded & inside the password
        else:
            if secret is not None:
                spans.append(secret)
            secret = None
            if key in _SECRET_PARAMS and "=" in part:
                start = pos + part.index("=") + 1
                secret = (start, pos + len(part))
        pos += len(part) + 1
    if secret is not None:
        spans.append(secret)
    return spans


def _masked(text: str, spans: list[tuple[int, int]], offset: int = 0) -> str:
    out = text
    for start, end in sorted(spans, reverse=True):
        lo, hi = max(start - offset, 0), min(end - offset, len(text))
        if lo < hi:
            out = out[:lo] + MASK + out[hi:]
    return out


def redact_url(url: str) -> str:
    return _masked(url, password_spans(url))


def redact_urls(text: str) -> str:
    """``text`` with the password of every URL in it as ``***``. A password may hold a space,
    a quote or a ``#``, so a URL runs to an ``@`` before any ``/`` on the line, then to its
    closing quote, or a space, or (a ``password=`` last) the line's end: more hidden, never
    less."""
    out: list[str] = []
    pos = 0
    while (found := _SCHEME.search(text, pos)) is not None:
        end = _url_end(text, found.start(), found.end())
        out += [text[pos : found.start()], redact_url(text[found.start() : end])]
        pos = end
    return "".join(out) + text[pos:]


def _url_end(text: str, start: int, rest: int) -> int:
    line_end = text.find("\n", rest)
    line_end = len(text) if line_end < 0 else line_end
    userinfo = _libpq_userinfo_end(text[rest:line_end])
    word = rest + userinfo + 1 if userinfo >= 0 else rest
    quote = text[start - 1] if start and text[start - 1] in "'\"" else ""
    if quote:
        at = word
        while at < line_end and text[at] != quote:
            at += 2 if text[at] == "\\" and quote == '"' else 1  # \" inside double quotes
        return min(at, line_end)
    space = _SPACE.search(text, word, line_end)
    end = space.start() if space is not None else line_end
    return line_end if _LAST_PARAM_SECRET.search(text, start, end) else end


def redact_text(text: str, url: str | None) -> str:
    """A driver's error without the password of ``url``: in the URL, in each quoted piece
    that overlaps it, as written and decoded, and any URL password or ``password=…`` left."""
    if url:
        spans = password_spans(url)
        text = text.replace(url, redact_url(url))
        text = _QUOTED.sub(lambda m: f'"{_quoted(m.group(1), url, spans)}"', text)
        for secret in sorted(_secrets(url, spans), key=len, reverse=True):
            text = text.replace(secret, MASK)
    return _PARAM_PASSWORD.sub(rf"\1{MASK}", redact_urls(text))


def _quoted(piece: str, url: str, spans: list[tuple[int, int]]) -> str:
    """A quoted piece of an error, masked where it overlaps a password in the URL; kept when
    the redacted URL shows it anyway (a user name, a host)."""
    if not piece or not spans or piece in _masked(url, spans):
        return piece
    at = url.find(piece)
    while at >= 0:
        if any(at < end and start < at + len(piece) for start, end in spans):
            return _masked(piece, spans, at)
        at = url.find(piece, at + 1)
    return piece


def _secrets(url: str, spans: list[tuple[int, int]]) -> set[str]:
    """Each password as written and decoded, and its pieces between the characters at which
    libpq cuts a URL, of _SHORT or more characters (hidden everywhere: a shorter one only
    where quoted, or ``x`` would turn ``/nonexistent`` into ``/none***istent``)."""
    secrets: set[str] = set()
    for start, end in spans:
        raw = url[start:end]
        secrets.update({raw, unquote(raw), *_PIECES.split(raw)})
    return {secret for secret in secrets if len(secret) >= _SHORT}
