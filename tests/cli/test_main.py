"""The entry point: a plain `cronctl run` skips typer, and behaves exactly as the typer command."""

from __future__ import annotations

import ast
import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from cronctl.cli import fastpath, wiring
from cronctl.cli.app import app
from cronctl.cli.main import parse_run
from tests.helpers import Cli, write_schedule

DEFAULTS = {
    "files": None, "now": None, "dry_run": False, "verbose": False, "strict": False,
    "as_json": False, "state_dir": None, "lock_dir": None, "host": None, "coordination": None,
}  # fmt: skip


@pytest.mark.parametrize(
    ("args", "changes"),
    [
        ([], {}),
        (["-v", "--json", "--dry-run", "--strict"],
         {"verbose": True, "as_json": True, "dry_run": True, "strict": True}),
        (["-f", "a.toml", "--file=b.toml"], {"files": [Path("a.toml"), Path("b.toml")]}),
        (["--now", "2026-08-03T09:00:00Z"], {"now": "2026-08-03T09:00:00Z"}),
        (["--state-dir", "/s", "--lock-dir=/l"], {"state_dir": Path("/s"), "lock_dir": Path("/l")}),
        (["--coordination", "postgresql://db/x"], {"coordination": "postgresql://db/x"}),
    ],
)  # fmt: skip
def test_plain_run_command_lines_are_parsed_without_typer(
    args: list[str], changes: dict[str, object]
) -> None:
    assert parse_run(args) == {**DEFAULTS, **changes}


@pytest.mark.parametrize(
    "args",
    [["--help"], ["-h"], ["--bogus"], ["-f"], ["--now"], ["-f", "--json"], ["extra"], ["--file="]],
)
def test_anything_unusual_goes_to_typer(args: list[str]) -> None:
    assert parse_run(args) is None


def test_the_fast_path_takes_exactly_the_typer_run_commands_options() -> None:
    """An option added to (or dropped from) the typer `run` but not the fast path would be
    refused by one and taken by the other: each flag of one is the other's, a flag or
    taking a value alike, and handed to run_command under a name it takes."""
    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    flags: set[str] = set()
    values: set[str] = set()
    for param in command.params:
        (flags if param.is_flag else values).update(param.opts, param.secondary_opts)
    assert flags == set(fastpath._RUN_FLAGS)
    assert values == set(fastpath._RUN_VALUES)
    taken = inspect.signature(wiring.run_command).parameters
    assert {*fastpath._RUN_FLAGS.values(), *fastpath._RUN_VALUES.values()} <= set(taken)


def test_fast_path_and_typer_command_give_the_same_result(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "a"\ncommand = "true"\nevery_minute = true',
            'name = "b"\ncommand = "exit 4"\nevery_minute = true',
        ],
    )
    args = [
        "run",
        "--dry-run",
        "--json",
        "--now",
        "2026-08-03T09:00:00Z",
        "-f",
        str(tmp_path / "schedules.toml"),
        "--state-dir",
        str(tmp_path / "s"),
    ]
    fast = cli(*args)
    slow = CliRunner().invoke(app, args)
    assert fast.returncode == slow.exit_code == 0
    assert json.loads(fast.stdout) == json.loads(slow.stdout)


def test_unknown_flag_gets_typers_usage_error(cli: Cli) -> None:
    result = cli("run", "--bogus")
    assert result.returncode == 2
    assert "No such option" in result.stderr and "--bogus" in result.stderr


def test_run_help_is_typers(cli: Cli) -> None:
    result = cli("run", "--help")
    assert result.returncode == 0 and "--dry-run" in result.stdout


# --- leaving without the interpreter's teardown (cronctl.cli.main.entry) ----------------------


def _leave_in_child(
    tmp_path: Path, body: str, *, stdout: int | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run ``body`` then ``leave`` in a fresh interpreter, as the console script does."""
    script = tmp_path / "child.py"
    script.write_text(
        "import atexit, sys, threading\n"
        "from pathlib import Path\n"
        "from cronctl.cli.main import entry, leave\n" + textwrap.dedent(body)
    )
    return subprocess.run(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE if stdout is None else stdout,
        stderr=subprocess.PIPE,
        timeout=60,
        check=False,
        # Buffered as in production: cron's environment has no PYTHONUNBUFFERED.
        env={k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"},
    )


def test_leave_flushes_buffered_output_and_runs_atexit_handlers(tmp_path: Path) -> None:
    done = tmp_path / "atexit-ran"
    result = _leave_in_child(
        tmp_path,
        f"""
        atexit.register(lambda: Path({str(done)!r}).write_text("yes"))
        sys.stdout.write("buffered, never flushed by hand")
        sys.stderr.write("to stderr")
        leave(3)
        """,
    )
    assert result.returncode == 3
    assert result.stdout == b"buffered, never flushed by hand"
    assert result.stderr == b"to stderr"
    assert done.read_text() == "yes"


def test_leave_waits_like_a_normal_exit_while_a_thread_that_is_not_a_daemon_lives(
    tmp_path: Path,
) -> None:
    done = tmp_path / "thread-finished"
    result = _leave_in_child(
        tmp_path,
        f"""
        started = threading.Event()
        def work():
            started.set()
            # Still running when leave() is called: it ends only once the main thread has
            # begun the interpreter's exit, which then waits for it (os._exit would not).
            threading.main_thread().join()
            Path({str(done)!r}).write_text("finished")
        threading.Thread(target=work).start()
        started.wait()
        leave(4)
        """,
    )
    assert result.returncode == 4
    assert done.read_text() == "finished"  # os._exit would have cut it short


def test_leave_exits_120_when_stdout_cannot_be_flushed_as_python_does(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody reads: the final flush meets EPIPE
    try:
        result = _leave_in_child(tmp_path, 'sys.stdout.write("lost")\nleave(0)\n', stdout=write_end)
    finally:
        os.close(write_end)
    assert result.returncode == 120


@pytest.mark.parametrize(
    ("raised", "code", "stderr"),
    [("None", 0, b""), ("5", 5, b""), ("'a message'", 1, b"a message\n"), ("256 + 7", 7, b"")],
)
def test_entry_exits_as_systemexit_would(
    tmp_path: Path, raised: str, code: int, stderr: bytes
) -> None:
    result = _leave_in_child(
        tmp_path,
        f"""
        import cronctl.cli.main as cli_main
        def fake_main():
            raise SystemExit({raised})
        cli_main.main = fake_main
        entry()
        """,
    )
    assert (result.returncode, result.stderr) == (code, stderr)


def test_the_console_script_and_python_m_cronctl_use_entry(tmp_path: Path) -> None:
    pyproject = Path(__file__).parents[2] / "pyproject.toml"
    assert 'cronctl = "cronctl.cli.main:entry"' in pyproject.read_text()
    result = subprocess.run(
        [sys.executable, "-m", "cronctl", "check", "-f", str(tmp_path / "missing.toml")],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert b"missing.toml" in result.stderr


# --- what a run does not import ----------------------------------------------------------------

#: Modules only a bad schedule's messages, other commands or other features need, each a
#: measurable cost: `run` starts every minute (docs/benchmarks.md).
_NOT_ON_THE_RUN_PATH = (
    *("unicodedata", "difflib", "json", "resource", "hashlib", "cronctl.edge.process.limits"),
    *("cronctl.core.opskeys", "cronctl.core.groups", "cronctl.coord.history"),
    "cronctl.coord.redact",
)


def test_a_run_that_starts_a_task_imports_nothing_it_does_not_need(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    tasks = [
        f'name = "due"\ncommand = "echo >> {ran}"\nevery_minute = true',
        'name = "quiet"\ncommand = "true"\ndaily_at = "03:00"\ntimezone = "Europe/Berlin"',
    ]
    assert _imported_by_a_second_run(tmp_path, tasks, _NOT_ON_THE_RUN_PATH) == []
    assert ran.read_text().count("\n") == 2  # the due task ran in both


def test_only_a_task_with_caps_loads_the_caps(tmp_path: Path) -> None:
    tasks = ['name = "capped"\ncommand = "true"\nevery_minute = true\nnice = 5']
    caps = ("resource", "cronctl.edge.process.limits")
    assert _imported_by_a_second_run(tmp_path, tasks, caps) == sorted(caps)


def _imported_by_a_second_run(
    tmp_path: Path, tasks: list[str], modules: tuple[str, ...]
) -> list[str]:
    """Which of `modules` the second of two `run`s (a minute apart) had imported at its end."""
    write_schedule(tmp_path / "schedules.toml", tasks)
    probe = (
        "import sys\n"
        "from cronctl.cli.main import main\n"
        "sys.argv = ['cronctl', 'run', *sys.argv[1:]]\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        f"    print(sorted(m for m in {modules!r} if m in sys.modules))\n"
    )
    args = ["-f", str(tmp_path / "schedules.toml")]
    args += ["--state-dir", str(tmp_path / "s"), "--lock-dir", str(tmp_path / "l")]
    # With bytecode, as installed: compiling a source with a \\N{...} escape imports unicodedata.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pycache")
    # The first run compiles (and sees the tasks first); the second is the one checked.
    for now in ("2026-08-03T12:33:00Z", "2026-08-03T12:34:00Z"):
        argv = [sys.executable, "-c", probe, *args, "--now", now]
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        assert done.returncode == 0, done.stderr
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


def test_the_library_api_loads_the_model_on_first_use() -> None:
    probe = (
        "import sys, cronctl\n"
        "assert 'cronctl.core.model' not in sys.modules\n"
        "from cronctl import Problem, Schedule, Settings, Task, load\n"
        "from cronctl.core import model\n"
        "assert (Problem, Schedule, Settings, Task) == "
        "(model.Problem, model.Schedule, model.Settings, model.Task)\n"
        "assert callable(load) and cronctl.Task is Task and 'load' in cronctl.__all__\n"
        "try:\n"
        "    cronctl.Nope\n"
        "except AttributeError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "module 'cronctl' has no attribute 'Nope'\n"
