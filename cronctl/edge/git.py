"""Schedule files as they were at a git revision (`check --diff REF`), read with `git show`."""

from __future__ import annotations

import subprocess
from pathlib import Path

from cronctl.errors import UsageError


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", "-C", str(cwd), *args], capture_output=True, check=False, timeout=60
        )
    except FileNotFoundError:
        raise UsageError("--diff needs git, and `git` is not on PATH") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"git {' '.join(args)} did not answer within 60 s") from None


def verify_ref(cwd: Path, ref: str) -> None:
    if ref.startswith("-"):
        raise UsageError(f"--diff {ref!r}: a revision cannot start with '-'")
    found = _git(cwd, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if found.returncode != 0:
        inside = _git(cwd, "rev-parse", "--is-inside-work-tree")
        if inside.returncode != 0:
            raise UsageError(f"--diff: {cwd} is not inside a git work tree")
        raise UsageError(f"--diff {ref!r}: git knows no such revision (try `git fetch`?)")


def show(ref: str, path: Path) -> bytes | None:
    # `REF:./name` is read relative to -C's directory, wherever the repository's root is.
    found = _git(path.parent, "show", f"{ref}:./{path.name}")
    return found.stdout if found.returncode == 0 else None


def tomls_at(ref: str, directory: Path) -> list[Path]:
    found = _git(directory, "ls-tree", "--name-only", f"{ref}:./")
    if found.returncode != 0:
        return []
    names = found.stdout.decode("utf-8", "replace").splitlines()
    return sorted(directory / n for n in names if n.endswith(".toml"))
