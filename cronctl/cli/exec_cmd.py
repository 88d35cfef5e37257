"""`cronctl exec NAME [--wait]`: run one task now (docs/commands.md)."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Annotated

import typer

from cronctl.cli.options import NameArg, shared
from cronctl.cli.render.runs import visible
from cronctl.cli.wiring import Where, fail_on_errors, load_schedule, run_context
from cronctl.commands.exec import exec_task
from cronctl.edge.process.stream import printer
from cronctl.run.context import Listener


@shared("file", "state_dir", "lock_dir", "host")
def exec_(
    name: NameArg,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="If the task is running, or its [[group]] is full, wait for it to end first.",
        ),
    ] = False,
    chain: Annotated[
        bool, typer.Option("--chain", help="Then run what follows the task, as the schedule would.")
    ] = False,
    *,
    where: Where,
) -> None:
    """Run one task now, outside its schedule; exit with the task's exit code.

    A task of a [[group]] takes a slot of its group: refused (exit 2) while the group is full,
    unless --wait.

    Ctrl-C or SIGTERM is passed on to the task; SIGHUP (a dropped ssh session) is ignored,
    and the task runs to its end.

    \b
    Example:
      cronctl exec backup --wait
      cronctl exec extract --chain
    """
    schedule = fail_on_errors(load_schedule(where.file))
    ctx = run_context(schedule, where, False, False)
    show = printer()
    ctx = replace(ctx, listener=Listener(output=lambda _task: show))
    result = exec_task(schedule, name, ctx, wait, chain)
    for run in (result.run, *result.followed):
        if run.outcome != "ok":
            detail = f" ({visible(run.message, one_line=True)})" if run.message else ""
            print(
                f"cronctl: task {run.task} {run.outcome}{detail}; run {run.id}, "
                f"log {run.log_path or '-'}",
                file=sys.stderr,
            )
    raise typer.Exit(result.exit_code)
