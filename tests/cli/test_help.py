"""Help a user can act on without the README; task names complete in the shell."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import Cli, write_schedule

COMMANDS = ["check", "list", "next", "due", "init", "run", "work", "status", "history", "logs",
            "pause", "resume", "import", "timeline", "export"]  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS)
def test_help_states_defaults_and_uses_the_same_placeholders(cli: Cli, command: str) -> None:
    out = cli(command, "--help", env={"COLUMNS": "200"}).stdout
    assert "see README" not in out
    assert "<str>" not in out and "<path>" not in out  # typer's generic placeholders
    if "--file" in out:
        # `logs -f` is --follow (as tail -f); --file is long-only there.
        short = "--file FILE" if command == "logs" else "-f, --file FILE"
        assert short in out and "$CRONCTL_FILE" in out
    if "--now" in out:
        assert "--now TIME" in out
    if "--state-dir" in out:
        assert "$CRONCTL_STATE_DIR" in out and "/var/lib/cronctl" in out
    if "--format" in out:
        assert "text, json, or github" in out


def test_top_level_help_names_the_environment_variables(cli: Cli) -> None:
    out = cli("--help", env={"COLUMNS": "200"}).stdout
    for name in ("CRONCTL_FILE", "CRONCTL_STATE_DIR", "CRONCTL_LOCK_DIR", "CRONCTL_HOST",
                 "CRONCTL_ENV", "NO_COLOR"):  # fmt: skip
        assert name in out


def test_shell_completion_offers_the_task_names(cli: Cli, tmp_path: Path) -> None:
    tasks = [f'name = "{n}"\ncommand = "true"\nhourly = true'
             for n in ("refresh-cache", "rotate-logs", "backup")]  # fmt: skip
    write_schedule(tmp_path / "s.toml", tasks)
    # `python -m cronctl` is the program name here; an installed `cronctl` reads
    # _CRONCTL_COMPLETE.
    env = {"_PYTHON _M CRONCTL_COMPLETE": "complete_bash", "COMP_CWORD": "4",
           "COMP_WORDS": "cronctl logs --file s.toml r"}  # fmt: skip
    result = cli(env=env)
    assert result.stdout.split() == ["refresh-cache", "rotate-logs"]


def _commands(cli: Cli) -> list[str]:
    """Every command `cronctl --help` lists."""
    out = cli("--help", env={"COLUMNS": "200"}).stdout
    listed = out.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in listed.splitlines() if line.strip()]


def test_every_command_is_in_the_list_above(cli: Cli) -> None:
    assert set(_commands(cli)) == {*COMMANDS, "doctor", "exec", "explain", "serve"}


@pytest.mark.parametrize("command", [*COMMANDS, "doctor", "exec", "explain", "serve"])
def test_every_help_has_an_example_using_only_flags_it_documents(cli: Cli, command: str) -> None:
    out = cli(command, "--help", env={"COLUMNS": "200"}).stdout
    assert "\n  Example:\n" in out, out
    block = out.split("\n  Example:\n", 1)[1].split("\n\n", 1)[0]
    examples = [line.strip() for line in block.splitlines()]
    assert examples and all(f"cronctl {command}" in line for line in examples), examples
    options = out.split("\nOptions:\n", 1)[1]
    for line in examples:
        for flag in re.findall(r"(?<![\w-])--?[a-z][a-z-]*", line.split(f"cronctl {command}")[1]):
            if flag != "-":
                assert re.search(rf"(?<![\w-]){flag}\b", options), (flag, line)


@pytest.mark.parametrize("command", [*COMMANDS, "doctor", "exec", "explain", "serve"])
def test_usage_lines_write_arguments_as_the_docs_do(cli: Cli, command: str) -> None:
    usage = cli(command, "--help", env={"COLUMNS": "200"}).stdout.splitlines()[0]
    assert "{" not in usage and "}" not in usage, usage  # typer's {NAME}, and {name}
    words = usage.split("[OPTIONS]", 1)[1].split()
    assert all(re.fullmatch(r"\[?[A-Z]+\]?", w) for w in words), usage
