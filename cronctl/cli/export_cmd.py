"""`cronctl export systemd|kubernetes [DIR]`: files to DIR or stdout; what a target cannot
express is listed on stderr and as comments in the files, never dropped silently."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from cronctl.cli.options import FileOpt, ForceOpt, NowOpt
from cronctl.cli.wiring import fail_on_errors, load_schedule, parse_instant
from cronctl.core.export import kubernetes, systemd
from cronctl.errors import UsageError

_T = TypeVar("_T", str, Path)


def export_command(
    target: Annotated[
        str | None, typer.Argument(metavar="TARGET", help="systemd or kubernetes.")
    ] = None,
    directory: Annotated[
        Path | None,
        typer.Argument(
            metavar="[DIR]",
            help="Write one file per unit or CronJob into DIR (default: all to stdout).",
        ),
    ] = None,
    to: Annotated[
        str | None,
        typer.Option("--to", metavar="TARGET", hidden=True, help="TARGET, as an option."),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", metavar="DIR", help="DIR, as an option.")
    ] = None,
    image: Annotated[
        str | None,
        typer.Option(
            "--image",
            metavar="IMAGE",
            help="Container image for the CronJobs (required for kubernetes).",
        ),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option(
            "--user",
            metavar="NAME",
            help="The account the systemd units run as, written as User= (required with "
            "systemd; --user root to mean root).",
        ),
    ] = None,
    force: ForceOpt = False,
    file: FileOpt = None,
    now: NowOpt = None,
) -> None:
    """Write the schedule as systemd timers or Kubernetes CronJobs; list what they lose.

    \b
    Example:
      cronctl export systemd units/ --user app
      cronctl export kubernetes k8s/ --image registry.example/app:1
    """
    to = _one("the target", target, to, "--to")
    output = _one("the directory", directory, output, "-o")
    if to is None:
        raise UsageError(
            "name the target: `cronctl export systemd [DIR] --user NAME` or "
            "`cronctl export kubernetes [DIR] --image IMAGE` (without DIR, to stdout)"
        )
    if to not in ("systemd", "kubernetes"):
        raise UsageError(f"{to!r} is not an export target: use systemd or kubernetes")
    if to == "kubernetes" and not image:
        raise UsageError("kubernetes needs --image IMAGE (the image the commands run in)")
    if to == "kubernetes" and user is not None:
        raise UsageError("--user is for systemd (a CronJob runs as its image's user)")
    if to == "systemd":
        if user is None:
            raise UsageError(
                "systemd needs --user NAME, the account the tasks run as (a system unit "
                "without User= runs as root; pass --user root if that is what you want)"
            )
        if (why := systemd.check_user(user)) is not None:
            raise UsageError(f"--user {user!r}: {why}")
    schedule = fail_on_errors(load_schedule(file))
    instant = parse_instant(now)
    if to == "systemd":  # a chained task's unit is started by its upstream's: all at once
        results = systemd.export_schedule(schedule.tasks, instant, user or "")
    else:
        results = [kubernetes.export_task(task, instant, image or "") for task in schedule.tasks]
    files = {name: text for result in results for name, text in result.files.items()}
    if output is not None:
        _write_all(output, files, force)
    elif to == "systemd":
        sys.stdout.write("\n".join(f"# --- {name}\n{text}" for name, text in files.items()))
    else:
        sys.stdout.write("---\n".join(files.values()))
    for result in results:
        verdict = "NOT EXPORTED" if result.skipped else "not expressed"
        for item in result.lost:
            print(f"cronctl: export {to}: task {result.task}: {verdict}: {item}", file=sys.stderr)
    if skipped := sum(r.skipped for r in results):
        print(f"cronctl: {skipped} task(s) not exported (see above)", file=sys.stderr)


def _one(what: str, argument: _T | None, option: _T | None, flag: str) -> _T | None:
    """The argument or its option (kept for scripts written before the argument); both only
    when they agree."""
    if argument is not None and option is not None and argument != option:
        raise UsageError(f"{what} is given twice, {argument} and {flag} {option}: give it once")
    return argument if argument is not None else option


def _write_all(directory: Path, files: dict[str, str], force: bool) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {directory}: {exc.strerror or exc}") from None
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
    print(f"wrote {len(files)} file{'s' * (len(files) != 1)} to {directory}", file=sys.stderr)
