"""The env file format's errors (file:line, never the value) and chunk-split masking."""

from __future__ import annotations

import pytest

from cronctl.core.envfile import Masker, parse_env_file
from cronctl.errors import EnvFileError

SECRET = "hunter2-s3cr3t"  # noqa: S105 (a test value)


def test_parses_keys_values_verbatim_and_skips_comments() -> None:
    data = b"# c\n\nA=1\nB= spaced = kept \nC=\n"
    assert parse_env_file(data, "f.env") == {"A": "1", "B": " spaced = kept ", "C": ""}


@pytest.mark.parametrize(
    ("data", "line", "words"),
    [
        (b"A=1\n" + SECRET.encode(), 2, "no '='"),
        (b"export A=" + SECRET.encode(), 1, "key must be"),
        (b"A=1\nA=" + SECRET.encode(), 2, "set twice"),
        (b"A=" + SECRET.encode() + b"\r\n", 1, "carriage return"),
        (b"A=1\nB=\xff" + SECRET.encode(), 2, "not UTF-8"),
    ],
)
def test_errors_name_file_and_line_never_the_value(data: bytes, line: int, words: str) -> None:
    with pytest.raises(EnvFileError) as caught:
        parse_env_file(data, "/run/secrets/app.env")
    message = str(caught.value)
    assert message.startswith(f"/run/secrets/app.env:{line}: ")
    assert words in message
    assert SECRET not in message and "hunter" not in message


def _masked(chunks: list[bytes], values: list[str]) -> bytes:
    masker = Masker(values)
    return b"".join(masker.feed(c) for c in chunks) + masker.flush()


def test_masks_a_secret_split_at_every_position() -> None:
    text = b"before " + SECRET.encode() + b" middle " + SECRET.encode() + b" after\n"
    for cut in range(len(text) + 1):
        for second in range(cut, len(text) + 1):
            chunks = [text[:cut], text[cut:second], text[second:]]
            assert _masked(chunks, [SECRET]) == b"before *** middle *** after\n"


def test_masks_overlapping_values_longest_first_and_byte_by_byte() -> None:
    text = b"xabcdefx abc\n"
    chunks = [bytes([b]) for b in text]
    assert _masked(chunks, ["abc", "abcdef", ""]) == b"x***x ***\n"


def test_no_values_passes_through() -> None:
    assert _masked([b"a", b"b"], ["", ""]) == b"ab"
