"""Secrets from files (docs/schedule-file.md, "Secrets from files"): read at each run, set for
the command, masked as *** in everything cronctl captures, and nowhere cronctl writes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import Cli, write_schedule
from tests.run.test_pings_hooks import Recorder, server  # noqa: F401 (the fixture)

KEY = "hunter2-Kx9-s3cr3t"
TOKEN = "tok-7Qp2-ABCDEFGHIJ"  # noqa: S105
PEM = "-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD9\n-----END KEY-----"
# Every value, and pieces of them long enough to be unmistakable.
NEEDLES = (KEY, TOKEN, "Kx9-s3cr3t", "ABCDEFGHIJ", "MIIBOgIBAAJBAKj34GkxFhD9")


def _write_secret(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o600)


HEADER = '[cronctl]\nstate_dir = "state"\nlock_dir = "locks"\n'


def _leaky(cli: Cli, command: str, extra: str = "") -> None:
    """One task, `leaky`, with the secret files in its environment, running ``command``."""
    task = (
        'name = "leaky"\nevery_minute = true\nenv_files = ["secrets/app.env"]\n'
        'env_from_file = { TOKEN = "secrets/token", PEM = "secrets/key.pem" }\n'
        f"{extra}command = {json.dumps(command)}"
    )
    write_schedule(cli.cwd / "schedules.toml", [task], HEADER)


def _secrets(cli: Cli) -> None:
    (cli.cwd / "secrets").mkdir()
    _write_secret(cli.cwd / "secrets" / "app.env", f"# the app\nAPI_KEY={KEY}\nPLAIN=visible\n")
    _write_secret(cli.cwd / "secrets" / "token", TOKEN + "\n")
    _write_secret(cli.cwd / "secrets" / "key.pem", PEM + "\n")


# Echoes each secret whole, the token split across two writes a moment apart, and the
# PEM key one line at a time; then fails, so the failure report shows the tail too.
LEAKY = (
    'echo "key=$API_KEY plain=$PLAIN"; '
    "printf '%s' \"${TOKEN%%-*}\"; sleep 0.3; printf '%s\\n' \"-${TOKEN#*-}\"; "
    'printf "%s\\n" "$PEM" | while read -r l; do echo "pem: $l"; sleep 0.05; done; '
    'echo "token again: $TOKEN" >&2; exit 4'
)


def _everything_written(cli: Cli) -> bytes:
    """Every byte of every file under the test's directory but the secrets themselves."""
    data = b""
    for root, _dirs, files in os.walk(cli.cwd):
        if Path(root).name == "secrets":
            continue
        for name in files:
            path = Path(root, name)
            if not path.is_symlink():
                data += path.read_bytes()
    return data


def test_secrets_reach_the_command_and_appear_nowhere_cronctl_writes(
    cli: Cli,
    server: tuple[str, Recorder],  # noqa: F811 (the fixture)
) -> None:
    url, recorder = server
    _secrets(cli)
    _leaky(cli, LEAKY, f"ping_url = {json.dumps(url)}\n")
    run = cli("run", "--now", "2026-06-01T10:00:00Z")
    assert run.returncode == 1, run.stderr
    (fail,) = [body for path, _rid, body in recorder.pings if path.endswith("/fail")]
    assert b"key=*** plain=***" in fail, (recorder.pings, run.stderr)
    (log,) = cli.cwd.rglob("logs/leaky/*.log")
    captured = log.read_text()
    # The command had the values (it printed them), and the log holds *** in their place.
    assert "key=*** plain=***" in captured
    assert "\n***\n" in captured  # the token, printed in two writes 0.3 s apart
    assert "pem: ***" in captured and "token again: ***" in captured
    outputs = [run.stdout, run.stderr]
    for args in (
        ("history",),
        ("history", "--json"),
        ("list",),
        ("list", "--json"),
        ("status", "--json"),
        ("logs", "leaky"),
        ("explain", "leaky"),
        ("check",),
        ("export", "systemd", "--user", "app"),
    ):
        result = cli(*args)
        outputs += [result.stdout, result.stderr]
    assert "key=*** plain=***" in run.stderr  # the failure report's tail
    assert "key=*** plain=***" in cli("logs", "leaky").stdout
    written = _everything_written(cli) + "".join(outputs).encode()
    written += b"".join(body for _path, _rid, body in recorder.pings)
    for needle in NEEDLES:
        assert needle.encode() not in written, needle
    assert "TOKEN" in cli("export", "systemd", "--user", "app").stdout  # named, as not exported


@pytest.mark.parametrize(
    ("name", "content", "mode", "words"),
    [
        ("app.env", f"API_KEY={KEY}\n{KEY} no equals sign\n", 0o600, "app.env:2: expected"),
        ("app.env", f"API_KEY={KEY}\n", 0o666, "others may write it"),
        ("token", None, 0, "token: env_from_file TOKEN: cannot read it: No such file"),
    ],
)
def test_a_bad_secret_file_fails_the_run_by_file_and_line_never_by_value(
    cli: Cli, name: str, content: str | None, mode: int, words: str
) -> None:
    _secrets(cli)
    path = cli.cwd / "secrets" / name
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
        path.chmod(mode)
    _leaky(cli, "echo ran > ran.txt")
    run = cli("run", "--now", "2026-06-01T10:00:00Z")
    assert run.returncode == 1
    assert words in run.stderr and "it was not started" in run.stderr
    assert not (cli.cwd / "ran.txt").exists()
    (row,) = json.loads(cli("history", "--json").stdout)["runs"]
    assert row["outcome"] == "error"
    assert words in cli("explain", "leaky", "--at", "2026-06-01T10:00:00Z").stdout
    written = _everything_written(cli) + run.stdout.encode() + run.stderr.encode()
    assert KEY.encode() not in written and b"Kx9" not in written


def test_a_rotated_secret_counts_from_the_next_run(cli: Cli) -> None:
    _secrets(cli)
    _leaky(cli, 'test "$TOKEN" = "$(cat secrets/token)" && test "$API_KEY" = ' + KEY)
    assert cli("run", "--now", "2026-06-01T10:00:00Z").returncode == 0
    _write_secret(cli.cwd / "secrets" / "token", "rotated-value-42")
    run = cli("run", "--now", "2026-06-01T10:01:00Z")
    assert run.returncode == 0, run.stderr  # read again, not from the schedule cache


def test_relative_paths_are_read_in_credentials_directory_when_set(cli: Cli) -> None:
    creds = cli.cwd / "creds"
    creds.mkdir()
    _write_secret(creds / "token", "from-credentials-dir\n")
    task = (
        'name = "cred"\nevery_minute = true\nenv_from_file = { TOKEN = "token" }\n'
        'command = "test \\"$TOKEN\\" = from-credentials-dir"'
    )
    write_schedule(cli.cwd / "schedules.toml", [task], HEADER)
    run = cli("run", "--now", "2026-06-01T10:00:00Z", env={"CREDENTIALS_DIRECTORY": str(creds)})
    assert run.returncode == 0, run.stderr
    # Without it, the same relative path is read beside the schedule file: not there.
    run = cli("run", "--now", "2026-06-01T10:01:00Z")
    assert run.returncode == 1 and f"{cli.cwd}/token" in run.stderr


def test_check_warns_of_missing_and_readable_secret_files_without_reading_them(
    cli: Cli,
) -> None:
    _secrets(cli)
    (cli.cwd / "secrets" / "app.env").chmod(0o644)
    (cli.cwd / "secrets" / "token").unlink()
    _leaky(cli, "true")
    result = cli("check")
    assert result.returncode == 0, result.stdout  # warnings: the file may appear by run time
    assert "env_files: " in result.stdout and "readable by others (mode 0644)" in result.stdout
    assert "env_from_file.TOKEN: " in result.stdout and "No such file" in result.stdout
    assert "key.pem" not in result.stdout  # a private file needs no word
    assert KEY not in result.stdout


def test_check_refuses_bad_secret_keys(cli: Cli) -> None:
    (cli.cwd / "schedules.toml").write_text(
        '[[task]]\nname = "bad"\nevery_minute = true\ncommand = "true"\n'
        'env = { TOKEN = "x" }\n'
        'env_files = "one.env"\n'
        'env_from_file = { "2FA" = "a", CRONCTL_TASK = "b", TOKEN = "c" }\n'
    )
    result = cli("check")
    assert result.returncode == 1
    assert "schedules.toml:6: task bad: 'env_files' must be an array" in result.stdout
    assert "'2FA' is not a variable name" in result.stdout
    assert "'TOKEN' is set by both 'env' and 'env_from_file'" in result.stdout
