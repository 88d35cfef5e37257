"""The docs' examples are run, so they cannot drift from cronctl (README.md and docs/*.md).

markdown-it-py (rich's own Markdown parser) finds the fenced blocks and the backticked
spans; each block is one test, named FILE:LINE.

- **Shell.** In a ```console block every `$ ` line, in a ```sh/```shell/```bash block every
  line, whose command is `cronctl` (after `VAR=value` words; pipes, `;` and `# comments` are
  kept) runs in a scratch directory of its own: `schedules.toml` is `cronctl init`'s file
  plus the tasks the examples name (EXTRA_TASKS), state, locks and cache in the test's
  tmp_path, `cronctl` on PATH. It must print no traceback and exit 0 or 1 (failing tasks,
  warnings), or 2 only where the doc shows an `error:` after it. A block that writes the
  schedule itself (`init`, `import -o schedules.toml`) starts without one.
  Not run: `cronctl work` and `cronctl serve` (they do not exit) and `import --system` (it
  reads the machine's crontabs), and a block after an HTML comment
  `<!-- docs-test: skip REASON -->`. After `<!-- docs-test: script -->` a block runs whole,
  as one bash script (it defines a function or a variable the next lines use); after
  `<!-- docs-test: postgresql -->` with the coordination tests' PostgreSQL as the
  coordination store (CRONCTL_COORDINATION).
- **TOML.** Every ```toml block passes `cronctl check`. A fragment is wrapped first: one with
  no table header is a task's keys, put under `[[task]]` with a name, a command and (when
  it has no schedule key) a cron expression unless it has them; one with tables but no
  `[[task]]` gets a minimal task appended.
- **Prose.** A backticked span that parses as one TOML `key = value` names a key of the
  schedule file (core/schema.py's lists); a backticked `--flag`, alone or after
  `cronctl COMMAND`, is an option of that command (of any command, alone), as typer has it.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from cronctl.core import groups
from cronctl.core.schema import DEFAULTS_KEYS, SCHEDULE_KEYS, SETTINGS_KEYS, TASK_KEYS
from tests.coord import conftest as coord_fixtures
from tests.helpers import REPO_ROOT, _built_app, clean_env, invoke

# The coordination tests' PostgreSQL, for the fleet's examples.
pg_server, pg_url = coord_fixtures.pg_server, coord_fixtures.pg_url

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
SHELLS = ("console", "sh", "shell", "bash")
#: Commands that are never run, and why.
NEVER_RUN = {
    "work": "it does not exit",
    "serve": "it does not exit",
    "import --system": "it reads the machine's crontabs",
}
#: Commands cheap and pure enough to run in this process (the rest get a real process).
IN_PROCESS = frozenset(
    ("check", "list", "next", "due", "explain", "timeline", "status", "history", "init",
     "export", "pause", "resume")
)  # fmt: skip
#: The tasks the examples name that `cronctl init`'s file does not have.
EXTRA_TASKS = """
[[task]]
name = "backup"
command = "echo backing up"
daily_at = "03:00"

[[task]]
name = "tick"
command = "echo tick"
cron = "*/20 * * * *"

[[task]]
name = "nightly"
command = "echo nightly"
daily_at = "01:00"
timezone = "Europe/Berlin"

[[task]]
name = "reindex"
command = "echo reindexing"
cron = "*/10 * * * *"

[[task]]
name = "extract"
command = "echo extracting"
daily_at = "02:00"
timezone = "Europe/Berlin"

[[task]]
name = "transform"
command = "echo transforming"
after = ["extract"]

[[task]]
name = "load"
command = "echo loading"
after = ["transform"]

[[task]]
name = "page-oncall"
command = "echo paging"
after = "extract"
after_outcome = "failed"
"""
#: `cronctl check -f bad.toml`'s file.
BAD_TOML = """
[[task]]
name = "backup"
cron = "0 3 * * * *"
command = "true"

[[task]]
name = "report"
command = "true"
daily_at = "24:00"
withot_overlapping = true
"""
#: What `crontab -l` prints.
CRONTAB = """MAILTO=ops@example.com
0 3 * * * /usr/local/bin/backup --all
*/5 8-18 * * 1-5 cd /srv/app && ./bin/refresh-cache
"""
#: Long flags of other programs named in prose, and whose.
FOREIGN_FLAGS = {
    "--durations": "pytest",
    "--collector.textfile.directory": "node_exporter",
    "--env-file": "docker run",
    "--state": "bench/serve_pages.py",
    "--only": "bench/pg_share.py",
    "--apscheduler-python": "bench/pg_share.py",
}
#: Pages about other programs' flags: benchmarks.md names the bench scripts' options.
FLAGS_NOT_CHECKED = ("docs/benchmarks.md",)
_MARK = re.compile(r"<!--\s*docs-test:\s*(skip|script|postgresql)\b\s*(.*?)\s*-->", re.S)
_SHELL_OPERATORS = re.compile(r"[|;&<>$`]")


@dataclass(frozen=True)
class Block:
    """A fenced block: where it is, its language, its text, and its docs-test mark."""

    doc: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    mark: str | None  # "skip", "script" or "postgresql"
    why: str = ""

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(REPO_ROOT)}:{self.line}"


@cache
def _tokens(doc: Path) -> list[Token]:
    return MarkdownIt("commonmark").parse(doc.read_text(encoding="utf-8"))


def _blocks(langs: tuple[str, ...]) -> list[Block]:
    found = []
    for doc in DOCS:
        tokens = _tokens(doc)
        for i, token in enumerate(tokens):
            lang = token.info.strip().split(" ")[0]
            if token.type != "fence" or lang not in langs or token.map is None:
                continue
            before = tokens[i - 1] if i else None
            mark = _MARK.search(before.content) if before and before.type == "html_block" else None
            found.append(
                Block(doc, token.map[0] + 1, lang, token.content,
                      mark.group(1) if mark else None, mark.group(2) if mark else "")
            )  # fmt: skip
    return found


@dataclass(frozen=True)
class Example:
    """One command of a shell block: the line it is on, and whether the doc shows an error."""

    line: int
    command: str
    shows_error: bool


def _examples(block: Block) -> list[Example]:
    """The block's cronctl commands (continuation lines joined)."""
    lines = block.text.splitlines()
    found: list[Example] = []
    i = 0
    while i < len(lines):
        start, text = i, lines[i]
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1] + lines[i]
        i += 1
        if block.lang == "console":
            if not text.startswith("$ "):
                continue
            text = text[2:]
            output = []
            while i + len(output) < len(lines) and not lines[i + len(output)].startswith("$ "):
                output.append(lines[i + len(output)])
            shows_error = any("error:" in line for line in output)
        else:
            shows_error = False
        if _program(text) == "cronctl" or re.match(r"[^|]*\|\s*cronctl\b", text):
            found.append(Example(block.line + 1 + start, text.strip(), shows_error))
    return found


def _program(command: str) -> str | None:
    """The program a shell line starts, past `VAR=value` words."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return None
    words = [w for w in words if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w)] or [""]
    return words[0]


def _never_run(command: str) -> str | None:
    """Why the command is not run (NEVER_RUN), or None."""
    words = shlex.split(command, comments=True)
    words = words[words.index("cronctl") + 1 :] if "cronctl" in words else words
    return next((why for what, why in NEVER_RUN.items() if " ".join(words).startswith(what)), None)


SHELL_BLOCKS = [b for b in _blocks(SHELLS) if b.mark == "script" or _examples(b)]
TOML_BLOCKS = _blocks(("toml",))


def _scratch(tmp_path: Path, block: Block) -> tuple[Path, dict[str, str]]:
    """A directory to run the block in, and its environment (cronctl on PATH)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "cronctl"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m cronctl "$@"\n')
    shim.chmod(0o755)
    crontab = bin_dir / "crontab"  # `crontab -l | cronctl import -`: a user's crontab
    crontab.write_text(f"#!/bin/sh\ncat <<'EOF'\n{CRONTAB}EOF\n")
    crontab.chmod(0o755)
    env = clean_env(tmp_path / "home")
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "bad.toml").write_text(BAD_TOML, encoding="utf-8")
    writes_schedule = re.search(r"cronctl init\b|-o schedules\.toml", block.text)
    if not writes_schedule:
        made = invoke("init", cwd=scratch, env=env)
        assert made.returncode == 0, made.stderr
        with (scratch / "schedules.toml").open("a", encoding="utf-8") as schedule:
            schedule.write(EXTRA_TASKS)
    if "--diff" in block.text:  # `check --diff origin/main` compares with a commit
        for git in (["init", "-q"], ["add", "."], ["commit", "-qm", "schedule"],
                    ["update-ref", "refs/remotes/origin/main", "HEAD"]):  # fmt: skip
            subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *git],
                           cwd=scratch, env=env, check=True, capture_output=True)  # fmt: skip
    return scratch, env


def _run(command: str, scratch: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    words = shlex.split(command, comments=True)
    if not _SHELL_OPERATORS.search(command.split("#")[0]) and words[1] in IN_PROCESS:
        return invoke(*words[1:], cwd=scratch, env=env)
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command], cwd=scratch, env=env,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=lambda b: b.where)
def test_shell_examples_run(block: Block, tmp_path: Path) -> None:
    if block.mark in ("skip", "postgresql"):
        pytest.skip(f"{block.where}: {block.why or 'run on PostgreSQL by the test below'}")
    _run_block(block, tmp_path, {})


@pytest.mark.parametrize("block", [b for b in SHELL_BLOCKS if b.mark == "postgresql"],
                         ids=lambda b: b.where)  # fmt: skip
def test_shell_examples_run_on_postgresql(block: Block, tmp_path: Path, pg_url: str) -> None:
    """The fleet's examples, with the test PostgreSQL as the coordination store."""
    _run_block(block, tmp_path, {"CRONCTL_COORDINATION": pg_url})


def _run_block(block: Block, tmp_path: Path, extra_env: dict[str, str]) -> None:
    scratch, env = _scratch(tmp_path, block)
    env.update(extra_env)
    if block.mark == "script":
        done = _run(f"set -e\n{block.text}", scratch, env)
        assert done.returncode == 0, f"{block.where}: the block failed:\n{done.stderr}"
        return
    ran = 0
    for example in _examples(block):
        if _never_run(example.command):
            continue
        done = _run(example.command, scratch, env)
        where = f"{block.doc.relative_to(REPO_ROOT)}:{example.line}: `{example.command}`"
        assert "Traceback" not in done.stderr, f"{where}:\n{done.stderr}"
        allowed = (0, 1, 2) if example.shows_error else (0, 1)
        assert done.returncode in allowed, (
            f"{where} exited {done.returncode}"
            f"{'' if example.shows_error else ' (the doc shows no error)'}:\n{done.stderr}"
        )
        ran += 1
    if not ran:
        pytest.skip(f"{block.where}: {'; '.join(map(_never_run_why, _examples(block)))}")


def _never_run_why(example: Example) -> str:
    return f"`{example.command}`: {_never_run(example.command)}"


def _wrapped(text: str) -> tuple[str, int]:
    """A TOML fragment as a whole schedule file (see the module's docstring), and how many
    lines were put before it."""
    if not re.search(r"^\s*\[", text, re.M):
        keys = tomllib.loads(text)
        head = "" if "name" in keys else 'name = "docs-example"\n'
        head += "" if "command" in keys else 'command = "true"\n'
        head += "" if set(keys) & set(SCHEDULE_KEYS) else 'cron = "* * * * *"\n'
        return f"[[task]]\n{head}{text}", 1 + head.count("\n")
    if not re.search(r"^\s*\[\[task\]\]", text, re.M):
        return f'{text}\n[[task]]\nname = "docs-example"\ncommand = "true"\ncron = "* * * * *"\n', 0
    return text, 0


@pytest.mark.parametrize("block", TOML_BLOCKS, ids=lambda b: b.where)
def test_toml_blocks_pass_check(block: Block, tmp_path: Path) -> None:
    if block.mark == "skip":
        pytest.skip(f"{block.where}: {block.why}")
    path = tmp_path / "schedules.toml"
    text, added = _wrapped(block.text)
    path.write_text(text, encoding="utf-8")
    done = invoke("check", "-f", str(path), cwd=tmp_path, env=clean_env(tmp_path / "home"))
    doc = block.doc.relative_to(REPO_ROOT)
    said = re.sub(
        rf"^{re.escape(str(path))}:(\d+):",
        lambda m: f"{doc}:{block.line + int(m.group(1)) - added}:",
        done.stdout + done.stderr,
        flags=re.M,
    )
    assert done.returncode == 0, (
        f"{block.where}: `cronctl check` on this block (wrapped as tests/test_docs.py says) "
        f"exited {done.returncode}:\n{said}"
    )


# --- keys and flags named in prose -------------------------------------------------------

KEYS = frozenset(TASK_KEYS) | set(DEFAULTS_KEYS) | set(SETTINGS_KEYS) | set(groups._TYPES)


@cache
def _options() -> dict[tuple[str, ...], frozenset[str]]:
    """Each command's (and subcommand's) options and the help flags, by its words."""
    found: dict[tuple[str, ...], frozenset[str]] = {}

    def walk(command: object, words: tuple[str, ...]) -> None:
        names = {"-h", "--help"}
        for param in getattr(command, "params", []):
            names.update(param.opts, param.secondary_opts)
        found[words] = frozenset(names)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, (*words, name))

    walk(_built_app(), ())
    return found


def _spans(doc: Path) -> Iterator[tuple[int, str]]:
    """The backticked spans of the doc's prose, with their lines."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    for token in _tokens(doc):
        if token.type != "inline" or token.map is None:
            continue
        for child in token.children or []:
            if child.type == "code_inline":
                first, end = token.map
                near = (n for n in range(first, end) if child.content in lines[n])
                yield next(near, first) + 1, child.content


def _key_problem(span: str) -> str | None:
    if not re.fullmatch(r"[a-z_][a-z0-9_]* = .+", span):
        return None
    try:
        (key,) = tomllib.loads(span)
    except (tomllib.TOMLDecodeError, ValueError):
        return None  # not TOML: another program's setting
    return None if key in KEYS else f"`{span}`: no schedule file has a key {key!r}"


def _flag_problems(span: str) -> Iterator[str]:
    options = _options()
    words = span.split()
    if words and (words[0],) in options:  # `status --check`: a command named without cronctl
        words = ["cronctl", *words]
    if words and words[0] == "cronctl":
        path: tuple[str, ...] = ()
        for word in words[1:]:
            if (*path, word) not in options:
                break
            path = (*path, word)
        known = options[path]
        flags = re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", " ".join(words))
        what = f"`cronctl {' '.join(path)}`" if path else "`cronctl`"
    elif words and words[0].startswith("--"):
        known = frozenset().union(*options.values()) | set(FOREIGN_FLAGS)
        flags = re.findall(r"(?<![\w-])(--[A-Za-z][\w.-]*)", span)
        what = "any cronctl command"
    else:
        return
    for flag in flags:
        if flag.split("=")[0] not in known:
            yield f"`{span}`: {flag} is not an option of {what}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(REPO_ROOT)))
def test_keys_and_flags_named_in_prose_exist(doc: Path) -> None:
    name = str(doc.relative_to(REPO_ROOT))
    problems = []
    for line, span in _spans(doc):
        found = [_key_problem(span)]
        if name not in FLAGS_NOT_CHECKED:
            found.extend(_flag_problems(span))
        problems.extend(f"{name}:{line}: {p}" for p in found if p)
    assert not problems, "\n".join(problems)


def test_the_readme_table_names_every_command() -> None:
    table = [line for line in (REPO_ROOT / "README.md").read_text().splitlines()
             if line.startswith("| `cronctl ")]  # fmt: skip
    named = {word for line in table for word in re.findall(r"`cronctl ([a-z]+)", line)}
    missing = sorted({words[0] for words in _options() if words} - named)
    assert not missing, f"README.md's command table has no row for: {', '.join(missing)}"
