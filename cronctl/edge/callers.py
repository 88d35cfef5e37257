"""What calls cronctl on this machine: crontab lines and systemd units (`cronctl doctor`).
Best effort: an unreadable place is skipped. CRONCTL_DOCTOR_ROOT prefixes the system paths."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

# `cronctl run`, `/opt/venv/bin/cronctl -v work`, `python -m cronctl run --now ...`.
_CALL = re.compile(r"\bcronctl\b[^#\n]*?\s(?:run|work)\b")
_UNIT_DIRS = ("etc/systemd/system", "usr/lib/systemd/system", "lib/systemd/system")
_MAX_BYTES = 1 << 20  # a crontab or unit is small; a huge file is not read to the end


@dataclass(frozen=True, slots=True)
class Caller:
    where: str
    line: str


def find_callers(env: Mapping[str, str]) -> list[Caller]:
    root = Path(env.get("CRONCTL_DOCTOR_ROOT") or "/")
    found = list(_user_crontab(env))
    for path in [root / "etc/crontab", *_listing(root / "etc/cron.d")]:
        found.extend(_matches(path, unit=False))
    unit_dirs = [root / d for d in _UNIT_DIRS]
    if env.get("HOME"):
        unit_dirs.append(Path(env["HOME"]) / ".config/systemd/user")
    for path in (p for d in unit_dirs for p in _listing(d) if p.suffix in (".service", ".timer")):
        found.extend(_matches(path, unit=True))
    return found


def _listing(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.iterdir() if p.is_file())
    except OSError:
        return []


def _matches(path: Path, unit: bool) -> Iterator[Caller]:
    try:
        with path.open("rb") as fh:
            text = fh.read(_MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return
    yield from _scan(text, str(path), unit)


def _scan(text: str, where: str, unit: bool) -> Iterator[Caller]:
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line.startswith("#") or (unit and not line.startswith("ExecStart")):
            continue
        if _CALL.search(line):
            yield Caller(f"{where}:{number}", line)


def _user_crontab(env: Mapping[str, str]) -> Iterator[Caller]:
    # Through `crontab -l` (the one on PATH is the one cron reads): the spool is not readable.
    try:
        command = ["crontab", "-l"]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=10, check=False, env=dict(env)
        )
    except (OSError, subprocess.SubprocessError):
        return
    if done.returncode == 0:
        yield from _scan(done.stdout, "crontab -l", unit=False)
