"""The console entry point: one place that maps errors to exit codes, and a plain `run`
parsed without typer (cli/fastpath.py; docs/architecture.md#devices-kept-for-speed)."""

from __future__ import annotations

import atexit
import functools
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from cronctl._version import __version__
from cronctl.cli.fastpath import parse_run, quiet_minute, reject_empty_paths, reject_logs_file_habit
from cronctl.errors import CronctlError
from cronctl.run import quiet

if TYPE_CHECKING:
    import typer


def _die(message: str, code: int = 2) -> NoReturn:
    print(f"cronctl: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def _dispatch(argv: Sequence[str]) -> int | None:
    reject_empty_paths(argv)
    reject_logs_file_habit(argv)
    if list(argv) == ["--version"]:
        print(f"cronctl {__version__}")
        return 0
    if argv[:1] == ["run"]:
        options = parse_run(argv[1:])
        if options is not None:
            minute = quiet_minute(**options)  # type: ignore[arg-type]
            if minute.status == quiet.DONE:
                return 0
            # Imported only now, as the typer app below: a quiet minute, served above, never
            # loads the schedule model or the run machinery (docs/architecture.md).
            from cronctl.cli.wiring import run_command

            return run_command(**options, minute=minute)  # type: ignore[arg-type]
    _full_app()()
    return None


@functools.cache
def _full_app() -> typer.Typer:
    """The typer app, imported once and only here: it costs more than a plain `run` itself."""
    from cronctl.cli.app import app

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
    """The ``cronctl`` console script: :func:`main`, then :func:`leave` without the
    interpreter's teardown (docs/architecture.md#devices-kept-for-speed)."""
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    leave(code)


def leave(code: int) -> NoReturn:
    """Exit with ``code`` by ``os._exit``, once whatever a normal exit does is done: atexit
    handlers run, stdout and stderr flushed (a failed flush exits 120, as Python's does); while
    a thread that is not a daemon is alive, the normal exit, which waits for it."""
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
