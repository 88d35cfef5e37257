"""Task names from shell commands: readable, unique slugs for `cronctl import`."""

from __future__ import annotations

import re
import shlex

_SUBSTITUTION = re.compile(r"\$\(\([^()]*\)\)|\$\([^()]*\)|`[^`]*`")
_TOKEN = re.compile(
    r"""
      (?P<redirect>\d*(?:&>>|&>|>>|>&|<&|>|<)\s*(?:'[^']*'|"[^"]*"|[^\s;&|()<>]+)?)
    | (?P<operator>&&|\|\||;;|[;&|()])
    | (?P<word>(?:'[^']*'|"[^"]*"|\\.|[^\s;&|()<>'"\\])+)
    | (?P<other>\S)
    """,
    re.VERBOSE,
)
# Words that open a compound command or a pipeline: dropped, the command follows.
_KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}"}
# Commands that run another: (options taking a value, positional arguments before it).
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "nice": (frozenset({"-n"}), 0),
    "ionice": (frozenset({"-c", "-n", "-p"}), 0),
    "timeout": (frozenset({"-s", "-k"}), 1),
    "sudo": (frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}), 0),
    "flock": (frozenset({"-w", "-E"}), 1),
    "env": (frozenset({"-u", "-C"}), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e"}), 0),
    "systemd-cat": (frozenset({"-t", "-p"}), 0),
    **{w: (frozenset(), 0) for w in ("nohup", "exec", "time", "chronic", "cronic", "setsid")},
    "run-one": (frozenset(), 0),
}
# `bundle exec rake x`: the tool runs the command that follows.
_RUNNERS = {"bundle": "exec", "poetry": "run", "pipenv": "run", "uv": "run", "pdm": "run"}
# Commands that prepare or test rather than do the job: named only if nothing else is.
_GUARDS = {"cd", "test", "[", "[[", "sleep", "source", ".", "export", "true", "false", ":"}
_GUARDS |= {"set", "command", "which", "type", "umask", "ulimit", "pgrep", "for", "case"}
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh"}
_INTERPRETER = re.compile(
    r"^(?:php|python|perl|ruby|node|nodejs|bun|deno|sh|bash|dash|zsh|ksh)[0-9.]*$"
)
_STEM_SUFFIX = re.compile(
    r"\.(?:sh|bash|py|php|pl|rb|js|mjs|ts|conf|cfg|ini|toml|ya?ml|json|sql|phar|jar)$"
)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_MAX_SLUG = 48


def slug(command: str) -> str:
    """A readable task name: `php /var/www/artisan schedule:run` -> artisan-schedule-run."""
    parts = (re.sub(r"[^a-z0-9]+", "-", word.lower()).strip("-") for word in _name_words(command))
    name = "-".join(dict.fromkeys(part for part in parts if part)) or "task"
    while len(name) > _MAX_SLUG and "-" in name:
        name = name.rsplit("-", 1)[0]
    return name[:_MAX_SLUG].strip("-") or "task"


def _name_words(command: str, depth: int = 0) -> list[str]:
    fallback: list[str] = []
    for words in _simple_commands(command):
        words = _strip_prefix(words)
        if not words:
            continue
        if not _is_guard(words):
            return _program_words(words, depth)
        fallback = fallback or words
    return _program_words(fallback, depth) if fallback else []


def _is_guard(words: list[str]) -> bool:
    program = _base(words[0])
    if program in _GUARDS:
        return True
    # `perl -e 'sleep rand 3600'`: inline code prepares more often than it does the job.
    inline = _INTERPRETER.match(program) and program not in _SHELLS
    return bool(inline and len(words) > 1 and words[1] in ("-e", "-E", "-r", "-c"))


def _simple_commands(command: str) -> list[list[str]]:
    text = _SUBSTITUTION.sub("$SUB", command)
    found: list[list[str]] = [[]]
    for match in _TOKEN.finditer(text):
        if match.lastgroup == "operator":
            found.append([])
        elif match.lastgroup == "word":
            found[-1].append(match.group())
    return [words for words in found if words]


def _strip_prefix(words: list[str]) -> list[str]:
    """Drop keywords, VAR=value assignments and wrappers such as `nice -n 10`."""
    words = list(words)
    while words:
        head = _base(words[0])
        if head in _KEYWORDS or _ASSIGNMENT.match(words[0]):
            words.pop(0)
        elif head in _RUNNERS and words[1:2] == [_RUNNERS[head]]:
            del words[:2]
        elif head in _WRAPPERS:
            valued, positional = _WRAPPERS[head]
            words.pop(0)
            while words and (words[0].startswith("-") or _ASSIGNMENT.match(words[0])):
                if words.pop(0) in valued and words:
                    words.pop(0)
            del words[:positional]
        else:
            break
    return words


def _program_words(words: list[str], depth: int) -> list[str]:
    program, rest = _base(words[0]), words[1:]
    if program in _SHELLS and "-c" in rest and depth == 0:
        index = rest.index("-c")
        if index + 1 < len(rest):
            try:
                inner = " ".join(shlex.split(rest[index + 1]))
            except ValueError:
                inner = rest[index + 1].strip("'\"")
            return _name_words(inner, depth + 1)
    if _INTERPRETER.match(program):
        if _is_guard(words):
            return [program]  # inline code: the interpreter is all there is to name
        # Options, and their values such as `-d memory_limit=-1`, come before the script.
        while rest and (rest[0].startswith("-") or "=" in rest[0]):
            if rest.pop(0) == "-m" and rest:
                return [rest[0], *_arguments(rest[1:])]
        if rest:
            program, rest = _stem(rest[0]), rest[1:]
    return [_stem(program), *_arguments(rest)]


def _arguments(rest: list[str]) -> list[str]:
    """Up to two telling arguments: a URL's host, else words and file names, not options."""
    for word in rest:
        url = re.match(r"^['\"]?[a-z]+://([^/:'\"]+)", word)
        if url:
            return [url.group(1)]
    # (position, stem, follows a short option): `-e production` is most likely a value.
    candidates: list[tuple[int, str, bool]] = []
    after_option = False
    for position, word in enumerate(rest):
        plain = word.strip("'\"")
        was_option, after_option = after_option, re.match(r"^-[A-Za-z]$", plain) is not None
        if plain.startswith(("-", "+")) or any(c in plain for c in "$*=`"):
            continue
        stem = _stem(plain)
        if len(stem) >= 2 and re.search("[A-Za-z]", stem):
            candidates.append((position, stem, was_option))
    chosen = sorted(candidates, key=lambda c: c[2])[:2]  # stable: plain words first
    return [stem for _, stem, _ in sorted(chosen)]


def _base(word: str) -> str:
    return word.strip("'\"").rstrip("/").rsplit("/", 1)[-1]


def _stem(word: str) -> str:
    return _STEM_SUFFIX.sub("", _base(word))
