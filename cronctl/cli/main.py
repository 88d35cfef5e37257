"""The console entry point: one place that maps errors to exit codes, and a fast `run`.

`cronctl run` is started every minute on every machine, so a plain `cronctl run ...`
is parsed here without typer: building typer's command tree costs ~60 ms a start,
more than the rest of the run. Anything unusual (--help, an unknown flag) goes to
the typer app, which owns the documentation and the error messages.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from cronctl.errors import CronctlError

if TYPE_CHECKING:
    import typer

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


def _die(message: str, code: int = 2) -> NoReturn:
    print(f"cronctl: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def _dispatch(argv: Sequence[str]) -> int | None:
    from cronctl.cli.wiring import reject_empty_paths

    reject_empty_paths(argv)
    if list(argv) == ["--version"]:
        from cronctl._version import __version__

        print(f"cronctl {__version__}")
        return 0
    if argv[:1] == ["run"]:
        options = parse_run(argv[1:])
        if options is not None:
            from cronctl.cli.wiring import run_command

            return run_command(**options)  # type: ignore[arg-type]
    _full_app()()
    return None


@functools.cache
def _full_app() -> typer.Typer:
    """The typer app with every command registered, once per process (tests call main often)."""
    from cronctl.cli import (
        doctor_cmd,  # noqa: F401  (registers doctor)
        exec_cmd,  # noqa: F401  (registers exec)
        explain_cmd,  # noqa: F401  (registers explain)
        ops_cmds,  # noqa: F401  (registers status, history, logs, pause, resume)
    )
    from cronctl.cli.app import app
    from cronctl.cli.import_cmd import register
    from cronctl.cli.view_cmds import register as register_views

    register(app)
    register_views(app)
    return app


def main() -> None:
    """Run the command; map cronctl's errors to exit 2 without a traceback."""
    try:
        code = _dispatch(sys.argv[1:])
    except CronctlError as exc:
        _die(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        _die("interrupted", 130)
    except OSError as exc:
        # A full disk or a permission problem is the machine's, not a bug: say it plainly.
        _die(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))
    except Exception as exc:
        if os.environ.get("CRONCTL_DEBUG"):
            raise
        _die(
            f"internal error {type(exc).__name__}: {exc} (rerun with CRONCTL_DEBUG=1 for a "
            "traceback, and please report it)"
        )
    if code is not None:
        sys.stdout.flush()
        raise SystemExit(code)


def entry() -> NoReturn:
    """The ``cronctl`` console script (and ``python -m cronctl``): :func:`main`, then leave
    without the interpreter's teardown.

    Tearing down the modules and every object a run made cost a `run` of 100 due tasks ~20
    ms of its ~280 (measured here: the last atexit handler to the process gone, 19 ms, against
    2 ms with ``os._exit``), and `run` starts 1,440 times a day. By this point whatever
    cronctl keeps is on disk (state commits, logs written with ``os.write``); what a normal
    exit still does is done here too: atexit handlers run and stdout and stderr are flushed
    (a failed flush exits 120, as Python's own exit does). While a thread that is not a daemon
    is alive, the normal exit, which waits for it, is kept. Tests call :func:`main`.
    """
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    leave(code)


def leave(code: int) -> NoReturn:
    """Exit with ``code`` as described in :func:`entry`."""
    threading = sys.modules.get("threading")  # not imported: no thread was started with it
    if threading is not None:
        main_thread = threading.main_thread()
        if any(
            t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate()
        ):
            raise SystemExit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            code = 120
    os._exit(code)


def _exit_code(value: object) -> int:
    """The exit status Python gives ``SystemExit(value)``; a message is printed, as Python
    prints it."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1
