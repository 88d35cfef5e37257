"""The strict KEY=VALUE format of `env_files`, and masking secret values in a byte stream.
Errors name the file and line but never quote the line: a malformed line may be a secret."""

from __future__ import annotations

import re

from cronctl.errors import EnvFileError

_KEY = r"[A-Za-z_][A-Za-z0-9_]*\Z"  # with re.ASCII; compiled on first use (re's cache)
MASK = b"***"


def parse_env_file(data: bytes, path: str) -> dict[str, str]:
    """The variables of one env file: UTF-8, one `KEY=VALUE` a line, the value verbatim after
    the first `=` (as Docker's --env-file); blank lines and `#` lines skipped."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = data[: exc.start].count(b"\n") + 1
        raise EnvFileError("not UTF-8; save the file as UTF-8", path, where) from None
    found: dict[str, str] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            problem = "expected KEY=VALUE (the line has no '=')"
        elif not re.match(_KEY, key, re.ASCII):
            problem = "the key must be letters, digits and _ (not first a digit), with no spaces"
        elif "\0" in value or "\r" in value:
            problem = f"{key}: the value holds a NUL or carriage return (CRLF line ends?)"
        elif key in found:
            problem = f"{key} is set twice in this file"
        else:
            found[key] = value
            continue
        raise EnvFileError(problem, path, number)
    return found


class Masker:
    """Replaces each non-empty secret value by `***` in a stream fed in arbitrary chunks,
    holding back the last len(longest) - 1 bytes so that a value split across two is masked."""

    __slots__ = ("_held", "_longest", "_pattern")

    def __init__(self, values: list[str]) -> None:
        secrets = sorted({v.encode("utf-8") for v in values if v}, key=len, reverse=True)
        self._longest = len(secrets[0]) if secrets else 0
        self._pattern = re.compile(b"|".join(re.escape(s) for s in secrets)) if secrets else None
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        """The part of the stream so far that is decided, masked."""
        if self._pattern is None:
            return data
        buf = self._held + data
        # A match starting before `limit` has all its bytes in buf: it is decided.
        limit = len(buf) - (self._longest - 1)
        out = bytearray()
        i = 0
        while i < limit:
            match = self._pattern.search(buf, i)
            if match is None or match.start() >= limit:
                out += buf[i:limit]
                i = limit
                break
            out += buf[i : match.start()] + MASK
            i = match.end()
        self._held = buf[i:]
        return bytes(out)

    def flush(self) -> bytes:
        """The held-back end of the stream, masked."""
        held, self._held = self._held, b""
        return held if self._pattern is None else self._pattern.sub(MASK, held)
