"""A task's secrets read from their files at the start of each run, never cached
(docs/schedule-file.md). Links are followed (Kubernetes mounts secrets as links); anything
but a regular file is refused without blocking, as is a file others may write (it could set
`LD_PRELOAD`). Errors name the file and line, never the content."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cronctl.core.envfile import parse_env_file
from cronctl.core.envkeys import secret_path
from cronctl.core.model import Task
from cronctl.errors import EnvFileError

# Far beyond any key or token (Linux takes 128 KiB at most in one variable anyway).
MAX_SECRET_FILE = 1024 * 1024


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Secrets:
    env: dict[str, str]
    values: tuple[str, ...]


def paths(task: Task, credentials: str | None) -> list[tuple[str, Path]]:
    base = task.source.parent.absolute()
    found = [("env_files", secret_path(text, base, credentials)) for text in task.env_files]
    found += [
        (f"env_from_file.{name}", secret_path(text, base, credentials))
        for name, text in task.env_from_file.items()
    ]
    return found


def load(task: Task, env: Mapping[str, str]) -> Secrets:
    """`env_files` in order (a later file wins), then `env_from_file`; EnvFileError if bad."""
    found: dict[str, str] = {}
    for key, file in paths(task, env.get("CREDENTIALS_DIRECTORY") or None):
        path = str(file)
        if key == "env_files":
            found.update(parse_env_file(_read(path, key), path))
        else:
            name = key.removeprefix("env_from_file.")
            found[name] = _value(_read(path, f"env_from_file {name}"), path, name)
    # A multi-line value (a PEM key) is often printed a line at a time: each line is one too.
    lines = [line for value in found.values() if "\n" in value for line in value.split("\n")]
    return Secrets(found, tuple(v for v in (*found.values(), *lines) if v.strip()))


def _value(data: bytes, path: str, name: str) -> str:
    try:
        text = data.decode("utf-8").removesuffix("\n")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise EnvFileError(f"{name}: not UTF-8; save the file as UTF-8", path, line) from None
    if "\0" in text:
        line = text[: text.index("\0")].count("\n") + 1
        raise EnvFileError(f"{name}: the file holds a NUL byte", path, line)
    return text


def _read(path: str, key: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise EnvFileError(f"{key}: cannot read it: {exc.strerror}", path) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise EnvFileError(f"{key}: not a regular file", path)
        if st.st_mode & stat.S_IWOTH:
            raise EnvFileError(
                f"{key}: others may write it (mode {stat.S_IMODE(st.st_mode):04o}), so it is not "
                "read; chmod o-w it (0600 or 0400 is best)",
                path,
            )
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_SECRET_FILE + 1)  # one byte more tells a larger file
        if len(data) > MAX_SECRET_FILE:
            raise EnvFileError(f"{key}: larger than 1 MiB: not a secret file", path)
        return data
    except OSError as exc:
        raise EnvFileError(f"{key}: cannot read it: {exc.strerror}", path) from None
    finally:
        os.close(fd)


def file_warning(path: Path) -> str | None:
    try:
        st = path.stat()
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}; runs of this task will fail until it exists"
    if not stat.S_ISREG(st.st_mode):
        return f"{path}: not a regular file; runs of this task will fail"
    mode = stat.S_IMODE(st.st_mode)
    if st.st_mode & stat.S_IWOTH:
        return f"{path}: others may write it (mode {mode:04o}); runs refuse it: chmod o-w"
    if not os.access(path, os.R_OK):
        return f"{path}: not readable by this user; runs of this task will fail"
    if st.st_mode & (stat.S_IRGRP | stat.S_IROTH):
        return f"{path}: readable by others (mode {mode:04o}); chmod 600 it"
    return None
