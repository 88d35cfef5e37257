"""What `cronctl run` needs before it knows whether this minute is quiet, with no typer and
no run machinery: its flags parsed by hand, the time and host name, and the quiet minute
(docs/architecture.md#devices-kept-for-speed). The typer `run` uses the same, so both paths
behave the same."""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cronctl.core.values import instant_problem
from cronctl.edge import schedcache
from cronctl.edge.schedpaths import schedule_paths
from cronctl.errors import UsageError
from cronctl.run import quiet

_RUN_FLAGS = {"--dry-run": "dry_run", "-v": "verbose", "--verbose": "verbose",
              "--strict": "strict", "--json": "as_json"}  # fmt: skip
_RUN_VALUES = {"-f": "files", "--file": "files", "--now": "now", "--state-dir": "state_dir",
               "--lock-dir": "lock_dir", "--host": "host",
               "--coordination": "coordination"}  # fmt: skip


def parse_run(args: Sequence[str]) -> dict[str, object] | None:
    """The options of a plain `cronctl run`, or None to let typer handle the command line."""
    options: dict[str, object] = {
        "files": None, "now": None, "dry_run": False, "verbose": False, "strict": False,
        "as_json": False, "state_dir": None, "lock_dir": None, "host": None,
        "coordination": None,
    }  # fmt: skip
    queue = list(args)
    while queue:
        arg = queue.pop(0)
        name, eq, inline = arg.partition("=")
        if arg in _RUN_FLAGS:
            options[_RUN_FLAGS[arg]] = True
        elif name in _RUN_VALUES and (eq or queue):
            value = inline if eq else queue.pop(0)
            if not value or (not eq and value.startswith("-")):
                return None
            key = _RUN_VALUES[name]
            if key == "files":
                files = options["files"] or []
                assert isinstance(files, list)
                options["files"] = [*files, Path(value)]
            elif key in ("now", "host", "coordination"):
                options[key] = value
            else:
                options[key] = Path(value)
        else:
            return None
    return options


def parse_instant(text: str | None, flag: str = "--now") -> datetime:
    """An aware UTC datetime from ISO 8601 with an offset; the real clock when None."""
    if text is None:
        return datetime.now(UTC)
    try:
        value = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not ISO 8601, e.g. 2026-08-03T09:00:00Z") from None
    if value.tzinfo is None:
        raise UsageError(f"{flag} {text!r} has no offset; add Z or +HH:MM")
    if problem := instant_problem(value):
        raise UsageError(f"{flag} {text!r} {problem}; give a time in that range")
    return value.astimezone(UTC)


#: Options whose value names a file or directory: an empty value is never meant.
_PATH_OPTIONS = ("--state-dir", "--lock-dir", "--file", "-f")


def reject_empty_paths(argv: Sequence[str]) -> None:
    """A usage error for ``--state-dir ""`` and the like: typer makes it ``Path("")``, the
    current directory, where a state directory would land wherever cron started the command."""
    for index, arg in enumerate(argv):
        name, eq, inline = arg.partition("=")
        if arg == "--":
            return
        if name not in _PATH_OPTIONS or (name == "-f" and argv[:1] == ["logs"]):
            continue  # `logs -f` follows (cronctl.cli.ops_cmds.logs): it takes no value
        empty = inline == "" if eq else index + 1 < len(argv) and argv[index + 1] == ""
        if empty:
            raise UsageError(f"{name} was given an empty value; give a path, or leave {name} out")


def reject_logs_file_habit(argv: Sequence[str]) -> None:
    """A usage error for `logs -f FILE` (`-f` was `--file` before it meant --follow), where
    typer says only "Got unexpected extra argument": a value with `/` or `.toml` is a file."""
    if argv[:1] != ["logs"]:
        return
    for arg, value in itertools.pairwise(argv[1:]):
        if arg == "--":
            return
        if arg == "-f" and ("/" in value or value.endswith(".toml")):
            raise UsageError(
                f"`logs -f` follows the run (as tail -f does); name the schedule with --file: "
                f"cronctl logs --file {value} NAME"
            )


def host_name(flag: str | None = None) -> str:
    """This machine's name in history, claims and locks: --host, $CRONCTL_HOST, or the node name."""
    for value, source in ((flag, "--host"), (os.environ.get("CRONCTL_HOST"), "CRONCTL_HOST")):
        if value is None:
            continue
        name = value.strip()
        if not name or any(ch.isspace() or not ch.isprintable() for ch in name) or len(name) > 253:
            raise UsageError(
                f"{source} {value!r} is not a usable host name: give a non-empty name without "
                "spaces or control characters, at most 253 characters"
            )
        return name
    return os.uname().nodename


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Minute:
    """What the quiet-minute check found: the schedule's cache lookup, the instant of the
    run, and run/quiet.py's verdict (DONE: nothing left to do)."""

    look: schedcache.Lookup
    instant: datetime
    status: str


def quiet_minute(
    files: list[Path] | None,
    now: str | None,
    dry_run: bool,
    verbose: bool,
    as_json: bool,
    state_dir: Path | None,
    lock_dir: Path | None,
    host: str | None,
    coordination: str | None,
    **_run_options: object,
) -> Minute:
    """Deal with the minute from the last planned minute's hint if it proves nothing is due
    (status quiet.DONE, said with -v: the run is over); otherwise say why not, having changed
    nothing."""
    look = schedcache.Lookup(schedule_paths(files, os.environ), os.environ)
    instant = parse_instant(now)
    status = quiet.SPENT
    if not dry_run and not as_json:
        status = quiet.deal(
            look,
            os.environ,
            instant=instant,
            pretended=now is not None,
            host=host_name(host),
            state_dir=state_dir,
            lock_dir=lock_dir,
            coordination=coordination,
        )
    if status == quiet.DONE and verbose:
        # One line, so that success is never silent when asked about (without -v nothing: cron
        # mails whatever `run` prints); not by the model's format_utc, which a quiet minute
        # never imports (docs/architecture.md).
        floor = datetime.fromtimestamp(int(instant.timestamp()) // 60 * 60, UTC)
        print(f"{floor:%Y-%m-%dT%H:%M:%SZ}  nothing due", flush=True)
    return Minute(look, instant, status)
