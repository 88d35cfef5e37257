"""`cronctl export --to systemd|kubernetes [-o DIR]`: hand the schedule to another scheduler.

Files go to DIR (created, never overwritten without --force) or to stdout; what a target
cannot express is listed on stderr and as comments in the files, never dropped silently.
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from cronctl.cli.options import FileOpt, NowOpt
from cronctl.cli.wiring import fail_on_errors, load_schedule, parse_instant
from cronctl.core.export import kubernetes, systemd
from cronctl.core.export.common import Exported
from cronctl.core.model import Task
from cronctl.errors import UsageError

TARGETS = ("systemd", "kubernetes")


def register(app: typer.Typer) -> None:
    """Add `export` to `app`."""
    app.command("export")(export_command)


def export_command(
    to: Annotated[
        str,
        typer.Option("--to", metavar="TARGET", help="systemd or kubernetes.", show_default=False),
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="DIR",
            help="Write one file per unit or CronJob into DIR (default: all to stdout).",
            show_default=False,
        ),
    ] = None,
    image: Annotated[
        str | None,
        typer.Option(
            "--image",
            metavar="IMAGE",
            help="Container image for the CronJobs (required with --to kubernetes).",
            show_default=False,
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite files in DIR.")] = False,
    file: FileOpt = None,
    now: NowOpt = None,
) -> None:
    """Write the schedule as systemd timers or Kubernetes CronJobs; list what they lose."""
    if to not in TARGETS:
        raise UsageError(f"--to {to!r}: use systemd or kubernetes")
    if to == "kubernetes" and not image:
        raise UsageError("--to kubernetes needs --image IMAGE (the image the commands run in)")
    schedule = load_schedule(file)
    fail_on_errors(schedule)
    instant = parse_instant(now)
    results = [_export(to, task, instant, image or "") for task in schedule.tasks]
    if output is None:
        _print(results, to)
    else:
        _write_all(output, results, force)
    _report(results, to)


def _export(to: str, task: Task, now: datetime, image: str) -> Exported:
    if to == "systemd":
        return systemd.export_task(task, now)
    return kubernetes.export_task(task, now, image)


def _print(results: list[Exported], to: str) -> None:
    chunks = []
    for result in results:
        for name, text in result.files.items():
            chunks.append(f"# --- {name}\n{text}" if to == "systemd" else text)
    sys.stdout.write(("\n" if to == "systemd" else "---\n").join(chunks))


def _write_all(directory: Path, results: list[Exported], force: bool) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {directory}: {exc.strerror or exc}") from None
    files = {name: text for r in results for name, text in r.files.items()}
    if not force:
        present = [n for n in files if (directory / n).exists()]
        if present:
            raise UsageError(
                f"{directory / present[0]} already exists; pass --force to overwrite "
                f"({len(present)} file{'s' * (len(present) != 1)} in the way)"
            )
    for name, text in files.items():
        try:
            (directory / name).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {directory / name}: {exc.strerror or exc}") from None
    print(f"wrote {len(files)} files to {directory}", file=sys.stderr)


def _report(results: list[Exported], to: str) -> None:
    for result in results:
        verdict = "NOT EXPORTED" if result.skipped else "not expressed"
        for item in result.lost:
            print(f"cronctl: export {to}: task {result.task}: {verdict}: {item}", file=sys.stderr)
    skipped = sum(r.skipped for r in results)
    if skipped:
        print(f"cronctl: {skipped} task(s) not exported (see above)", file=sys.stderr)
