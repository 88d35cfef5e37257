"""The options and arguments the commands share (typer's Annotated types), in one place."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cronctl.cli.complete import task_names

FileOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--file",
        "-f",
        metavar="FILE",
        help="Schedule file or directory of *.toml (repeatable). Default: $CRONCTL_FILE "
        "(':'-separated), else ./schedules.toml.",
        show_default=False,
    ),
]
#: `--file` without its short name, for a command whose `-f` means something else (`logs -f`
#: follows, as `tail -f` does).
FileLongOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--file",
        metavar="FILE",
        help="Schedule file or directory of *.toml (repeatable). Default: $CRONCTL_FILE "
        "(':'-separated), else ./schedules.toml.",
        show_default=False,
    ),
]
NowOpt = Annotated[
    str | None,
    typer.Option(
        "--now",
        metavar="TIME",
        help="Pretend it is this instant (ISO 8601 with offset or Z). Default: the clock.",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (stable keys, UTC times).")]
VerboseOpt = Annotated[
    bool,
    typer.Option(
        "-v",
        "--verbose",
        help="Print every run, and a line for a minute with none (`work`: also as a "
        "minute's tasks start).",
    ),
]
StrictOpt = Annotated[
    bool,
    typer.Option("--strict", help="Refuse to start when on_one_server tasks use a local lock_dir."),
]
StateOpt = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        metavar="DIR",
        help="History and scheduler state. Default: $CRONCTL_STATE_DIR, else [cronctl] "
        "state_dir, else /var/lib/cronctl for root or $XDG_STATE_HOME/cronctl "
        "(~/.local/state/cronctl).",
        show_default=False,
    ),
]
LockOpt = Annotated[
    Path | None,
    typer.Option(
        "--lock-dir",
        metavar="DIR",
        help="Locks, claims and pauses. Default: $CRONCTL_LOCK_DIR, else [cronctl] lock_dir, "
        "else STATE_DIR/locks.",
        show_default=False,
    ),
]
HostOpt = Annotated[
    str | None,
    typer.Option(
        "--host",
        metavar="NAME",
        help="This machine's name in history, claims and locks (default: $CRONCTL_HOST, then "
        "the node name).",
        show_default=False,
    ),
]
CoordOpt = Annotated[
    str | None,
    typer.Option(
        "--coordination",
        metavar="URL",
        help="postgresql:// URL of the fleet's coordination store (default: "
        "$CRONCTL_COORDINATION, then [cronctl] coordination; none: files in lock_dir).",
        show_default=False,
    ),
]
NameArg = Annotated[
    str,
    typer.Argument(
        metavar="NAME", help="Task name.", show_default=False, autocompletion=task_names
    ),
]
FleetOpt = Annotated[
    bool, typer.Option("--fleet", help="Every machine's, from the coordination store.")
]
