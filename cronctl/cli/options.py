"""The options and arguments the commands share, each declared once, and `shared`, which
hands a command those naming its schedule and directories as one `Where`."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from cronctl.cli.wiring import Where, load_schedule


def task_names(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion: the task names that start with `incomplete` (none, never an error,
    when the files are unreadable)."""
    files = ctx.params.get("file")
    try:
        schedule = load_schedule([Path(f) for f in files] if files else None)
    except Exception:
        return []
    return [t.name for t in schedule.tasks if t.name.startswith(incomplete)]


_FILE_HELP = (
    "Schedule file or directory of *.toml (repeatable). Default: $CRONCTL_FILE (':'-separated), "
    "else ./schedules.toml."
)
FileOpt = Annotated[
    list[Path] | None, typer.Option("--file", "-f", metavar="FILE", help=_FILE_HELP)
]
#: `--file` without its short name, for `logs`, whose `-f` follows (as `tail -f` does).
FileLongOpt = Annotated[list[Path] | None, typer.Option("--file", metavar="FILE", help=_FILE_HELP)]
NowOpt = Annotated[
    str | None,
    typer.Option(
        "--now",
        metavar="TIME",
        help="Pretend it is this instant (ISO 8601 with offset or Z). Default: the clock.",
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
    ),
]
LockOpt = Annotated[
    Path | None,
    typer.Option(
        "--lock-dir",
        metavar="DIR",
        help="Locks, claims and pauses. Default: $CRONCTL_LOCK_DIR, else [cronctl] lock_dir, "
        "else STATE_DIR/locks.",
    ),
]
HostOpt = Annotated[
    str | None,
    typer.Option(
        "--host",
        metavar="NAME",
        help="This machine's name in history, claims and locks (default: $CRONCTL_HOST, then "
        "the node name).",
    ),
]
CoordOpt = Annotated[
    str | None,
    typer.Option(
        "--coordination",
        metavar="URL",
        help="postgresql:// URL of the fleet's coordination store (default: "
        "$CRONCTL_COORDINATION, then [cronctl] coordination; none: files in lock_dir).",
    ),
]
NameArg = Annotated[
    str, typer.Argument(metavar="NAME", help="Task name.", autocompletion=task_names)
]
MaybeNameArg = Annotated[
    str | None, typer.Argument(metavar="[NAME]", help="Task name.", autocompletion=task_names)
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite files that exist.")]
AllOpt = Annotated[
    bool,
    typer.Option(
        "--all",
        help="Also the tasks this machine's history knows that the loaded schedule does not "
        "have, and their runs (removed tasks, another schedule sharing the state directory).",
    ),
]
FleetOpt = Annotated[
    bool, typer.Option("--fleet", help="Every machine's, from the coordination store.")
]


#: What `shared` offers, by name: the field of Where each sets, and its option.
_SHARED = {
    "file": ("file", FileOpt),
    "file_long": ("file", FileLongOpt),
    "state_dir": ("state_dir", StateOpt),
    "lock_dir": ("lock_dir", LockOpt),
    "host": ("host", HostOpt),
    "coordination": ("coordination", CoordOpt),
}
Command = Callable[..., None]


def shared(*names: str) -> Callable[[Command], Command]:
    """Offer a command the options `names` (of _SHARED) in place of its `where: Where`."""
    chosen = [_SHARED[name] for name in names]

    def wrap(command: Command) -> Command:
        own = inspect.signature(command, eval_str=True)
        params: list[inspect.Parameter] = []
        for param in own.parameters.values():
            if param.name != "where":
                params.append(param)
                continue
            for field, option in chosen:
                params.append(param.replace(name=field, annotation=option, default=None))

        @functools.wraps(command)
        def call(**given: Any) -> None:
            where = Where(**{field: given.pop(field) for field, _ in chosen})
            command(**given, where=where)

        call.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
        return call

    return wrap
