"""The coordination store's password is never shown nor recorded (docs/fleets-postgresql.md,
"Passwords"). Real `cronctl` processes; a real PostgreSQL that checks the password; real
libpq errors for URLs it cannot parse."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from cronctl.coord.redact import redact_text, redact_url
from tests.coord.postgres.kit import T
from tests.helpers import Cli, write_schedule

# Pieces of at least three characters that occur nowhere else (a state database is scanned
# byte by byte for them); each case writes them where a careless operator would.
MALFORMED = [
    pytest.param("postgresql://u:Qx9Wv7@[::1/db", ["Qx9Wv7"], id="ipv6-unclosed"),
    pytest.param("postgresql://u:Qx9%zzWv7@localhost/db", ["Qx9", "Wv7"], id="bad-escape"),
    pytest.param("postgresql://u:Qx9Wv7@localhost:99999/db", ["Qx9Wv7"], id="port-range"),
    pytest.param("postgresql://u:Qx9Wv7@127.0.0.1:1/db", ["Qx9Wv7"], id="refused"),
    pytest.param("postgresql://u:Qx9?Wv7@127.0.0.1:1/db", ["Qx9", "Wv7"], id="question-mark"),
    pytest.param("postgresql://u:Qx9/Wv7Jm@127.0.0.1:1/db", ["Qx9", "Wv7Jm"], id="slash"),
    pytest.param("postgresql://u:Qx9@Jm8@Wv7z@127.0.0.1:1/db", ["Qx9", "Jm8", "Wv7z"], id="at"),
    pytest.param("postgresql://u@127.0.0.1:1/db?password=Qx9&Jm8=1", ["Qx9", "Jm8"], id="amp"),
    pytest.param("postgresql://u@127.0.0.1:1/db?sslpassword=Qx9Wv7", ["Qx9Wv7"], id="sslkey"),
    pytest.param("postgresql://u:Qx9 Wv7@127.0.0.1:1/db", ["Qx9", "Wv7"], id="space"),
    pytest.param("postgresql://u@127.0.0.1:1/db?password=Qx9 Wv7", ["Qx9", "Wv7"], id="sp-query"),
]
GUARDED = 'name = "g"\ncron = "* * * * *"\ncommand = "echo g"\nwithout_overlapping = true'
FREE = 'name = "f"\ncron = "* * * * *"\ncommand = "echo f"'


def _everything(cli: Cli, url: str, state: Path) -> str:
    """What every command that meets the store says, stdout and stderr, one string."""
    env = {"CRONCTL_COORDINATION": url, "CRONCTL_STATE_DIR": str(state)}
    said: list[str] = []
    commands = [
        ("run", "-v", "--now", T),
        ("exec", "g"),
        ("doctor",),
        ("status",),
        ("status", "--json"),
        ("history",),
        ("history", "--json"),
        ("explain", "g", "--at", T),
    ]
    for args in commands:
        result = cli(*args, env=env)
        said += [f"$ cronctl {' '.join(args)}", result.stdout, result.stderr]
    return "\n".join(said)


def recorded(state: Path) -> str:
    """The messages and output tails of the state database, and every file's bytes."""
    with closing(sqlite3.connect(state / "state.db")) as db:
        rows = db.execute("SELECT task, outcome, message, tail FROM runs").fetchall()
    files = [p.read_bytes().decode("latin-1") for p in state.rglob("*") if p.is_file()]
    return json.dumps(rows) + "\n".join(files)


def _leaks(text: str, pieces: list[str]) -> list[str]:
    return [piece for piece in pieces if piece in text]


@pytest.mark.parametrize(("url", "pieces"), MALFORMED)
def test_no_piece_of_the_password_is_shown_or_recorded(
    cli: Cli, tmp_path: Path, url: str, pieces: list[str]
) -> None:
    write_schedule(tmp_path / "schedules.toml", [GUARDED, FREE])
    state = tmp_path / "state"
    said = _everything(cli, url, state)
    assert "coordination store unreachable" in said  # the store's error is told, without it
    assert _leaks(said, pieces) == [], said
    with closing(sqlite3.connect(state / "state.db")) as db:
        (message,) = db.execute("SELECT message FROM runs WHERE task = 'g' LIMIT 1").fetchone()
    assert "coordination store unreachable" in message
    assert _leaks(recorded(state), pieces) == []


def test_a_wrong_password_against_a_real_server_is_not_shown(
    cli: Cli, tmp_path: Path, password_url: Callable[[str], str]
) -> None:
    write_schedule(tmp_path / "schedules.toml", [GUARDED, FREE])
    state = tmp_path / "state"
    said = _everything(cli, password_url("Qx9Wv7"), state)
    assert "password authentication failed" in said
    assert "Qx9Wv7" not in said and "Qx9Wv7" not in recorded(state)


@pytest.mark.parametrize(("url", "pieces"), MALFORMED)
def test_redaction_hides_each_piece_libpq_can_echo(url: str, pieces: list[str]) -> None:
    import psycopg2

    with pytest.raises(psycopg2.Error) as caught:
        psycopg2.connect(url, connect_timeout=2)
    assert _leaks(redact_url(url) + redact_text(str(caught.value), url), pieces) == []


def test_what_the_redacted_url_shows_anyway_is_kept() -> None:
    # The user and host stay readable: an operator needs them to fix the URL.
    url = "postgresql://u:hunter2@db.internal/ops"
    error = 'password authentication failed for user "u" on "db.internal"'
    assert redact_text(error, url) == error
    # A short password is hidden where it is quoted, not inside every word.
    short = "postgresql://u:x@/nowhere?host=/nonexistent"
    error = 'connection to server on socket "/nonexistent/.s.PGSQL.5432" failed'
    assert redact_text(error, short) == error
    # An @ inside a query parameter is not the end of a password.
    azure = "postgresql://h.example:5432/db?user=me@h&sslmode=require"
    assert redact_url(azure) == azure
