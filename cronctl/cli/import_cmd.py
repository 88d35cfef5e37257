"""`cronctl import CRONTAB`: the TOML to FILE or stdout, the report to stderr as
`CRONTAB:LINE: message`."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from cronctl.cli.ops_cmds import account
from cronctl.cli.options import ForceOpt
from cronctl.cli.render.runs import visible
from cronctl.commands.importer import import_crontab
from cronctl.core.crontab import USER_NAME
from cronctl.edge.safefiles import write_new
from cronctl.errors import UsageError

STDIN = "-"


def import_command(
    crontab: Annotated[
        str,
        typer.Argument(metavar="CRONTAB", help="The crontab to convert; '-' reads standard input."),
    ],
    system: Annotated[
        bool,
        typer.Option("--system", help="System format (/etc/crontab, /etc/cron.d/*): a user field."),
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Write the schedule file here (default: stdout); never replaces a file "
            "without --force.",
        ),
    ] = None,
    force: ForceOpt = False,
    user: Annotated[
        str | None,
        typer.Option(
            "--user",
            metavar="NAME",
            help="With --system: the user cronctl will run as (default: you). A line for "
            "another user runs through `runuser -u USER --`.",
        ),
    ] = None,
    skip_other_users: Annotated[
        bool,
        typer.Option(
            "--skip-other-users",
            help="With --system: leave out the lines for users other than --user (exit 1).",
        ),
    ] = False,
) -> None:
    """Convert a crontab to a schedule file; report what was left out (exit 1 if anything).

    \b
    Example:
      crontab -l | cronctl import - -o schedules.toml
      cronctl import --system /etc/cron.d/app --user root -o schedules.toml
    """
    source = "<stdin>" if crontab == STDIN else crontab
    if output is not None and not force and output.exists():
        # Checked before reading, so a pipe is not consumed for nothing.
        raise UsageError(f"{output} already exists; pass --force to overwrite it")
    for flag, given in (("--user", user is not None), ("--skip-other-users", skip_other_users)):
        if given and not system:
            # A user's crontab has no user field: the flag would be ignored in silence.
            raise UsageError(
                f"{flag} is for a system crontab: add --system (a user's own crontab has no "
                "user field; its lines run as whoever runs cronctl)"
            )
    run_as = _run_as(user)
    text = _read(crontab, source)
    result = import_crontab(
        text, system=system, source_name=source, run_as=run_as, skip_other_users=skip_other_users
    )
    if output is None:
        sys.stdout.write(result.toml)
        sys.stdout.flush()
    else:
        write_new(output, result.toml, force)
    for line in result.report:
        # A message may quote the crontab's text: its control characters show, never act.
        print(visible(line, one_line=True), file=sys.stderr)
    if output is not None:
        count = f"{result.tasks} task{'s' * (result.tasks != 1)}"
        count += f"; {result.left_out} left out, see above" if result.left_out else ""
        print(
            f"wrote {output} ({count}); check it with: cronctl check -f {output}", file=sys.stderr
        )
    raise typer.Exit(result.exit_status)


def _run_as(user: str | None) -> str:
    """The user cronctl will run the imported file as: --user, else whoever imports it."""
    if user is None:
        return account(os.geteuid())
    if not USER_NAME.fullmatch(user):
        raise UsageError(f"--user {user[:80]!r} is not a user name")
    return user


def _read(crontab: str, source: str) -> str:
    try:
        data = sys.stdin.buffer.read() if crontab == STDIN else Path(crontab).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {source}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UsageError(
            f"{source}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x}); convert it first, "
            f"e.g. iconv -f latin1 -t utf-8 {source if crontab != STDIN else ''}".rstrip()
        ) from None
