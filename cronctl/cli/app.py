"""The typer app: every command of the ``*_cmd(s).py`` modules, in --help's order (the entry
point, with a plain `run` that skips typer, is cli/main.py)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
import typer.core

from cronctl._version import __version__
from cronctl.cli import (
    doctor_cmd,
    exec_cmd,
    explain_cmd,
    export_cmd,
    import_cmd,
    ops_cmds,
    run_cmds,
    schedule_cmds,
    serve_cmd,
    timeline_cmd,
)

__all__ = ["app"]

app = typer.Typer(
    name="cronctl",
    help="Scheduled jobs in version control: one TOML file, one crontab line, locks that hold.",
    epilog="Environment: CRONCTL_FILE (schedule files, ':'-separated), CRONCTL_STATE_DIR, "
    "CRONCTL_LOCK_DIR, CRONCTL_HOST (this machine's name), CRONCTL_COORDINATION (the fleet "
    "store's URL), CRONCTL_ENV=production (run refuses on_one_server over a local lock_dir), "
    "NO_COLOR, CRONCTL_DEBUG=1 (tracebacks). Tasks get this environment without "
    "CRONCTL_COORDINATION and CRONCTL_SERVE_TOKEN, cronctl's own secrets.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"cronctl {__version__}")
        raise typer.Exit


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """cronctl: run the tasks of a schedule file from one crontab line."""


class _Command(typer.core.TyperCommand):
    """A command whose usage line writes a required argument `NAME`, an optional one
    `[NAME]`, as the docs do (typer writes `{NAME}`, and `{name}` without a metavar)."""

    # Any: typer's Context type is its vendored click's (typer._click), a private module.
    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = super().collect_usage_pieces(ctx)
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in pieces]


for _name, _command in (
    ("check", schedule_cmds.check),
    ("list", schedule_cmds.list_),
    ("next", schedule_cmds.next_),
    ("due", schedule_cmds.due),
    ("init", schedule_cmds.init),
    ("run", run_cmds.run),
    ("work", run_cmds.work),
    ("doctor", doctor_cmd.doctor),
    ("exec", exec_cmd.exec_),
    ("explain", explain_cmd.explain_),
    ("status", ops_cmds.status),
    ("history", ops_cmds.history),
    ("logs", ops_cmds.logs),
    ("pause", ops_cmds.pause),
    ("resume", ops_cmds.resume),
    ("import", import_cmd.import_command),
    ("timeline", timeline_cmd.timeline_command),
    ("export", export_cmd.export_command),
    ("serve", serve_cmd.serve_command),
):
    app.command(_name, cls=_Command)(_command)
