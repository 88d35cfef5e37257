"""Test helpers: run the real `cronctl` in a subprocess with a clean environment."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from unittest import mock

from cronctl.cli import main as cli_main
from cronctl.core.cronexpr import parse_cron
from cronctl.core.model import Task
from cronctl.core.zones import parse_zone

if TYPE_CHECKING:
    from datetime import datetime

    from cronctl.core.model import Schedule
    from cronctl.run.context import RunContext
    from cronctl.run.planning import Ahead

_T = TypeVar("_T")
_P = TypeVar("_P", bound="subprocess.Popen[Any]")
REPO_ROOT = Path(__file__).resolve().parents[1]
_REAL_FULL_APP = cli_main._full_app  # before any test patches it


@dataclass(frozen=True)
class Cli:
    """Runs `python -m cronctl` in `cwd` with HOME and state confined to the test's tmp_path."""

    cwd: Path
    env: Mapping[str, str]

    def __call__(
        self,
        *args: str,
        env: Mapping[str, str | None] | None = None,
        timeout: float = 60,
        input_text: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run to completion; assert no Python traceback was printed."""
        result = subprocess.run(
            [sys.executable, "-m", "cronctl", *args],
            cwd=self.cwd,
            env=_merged(self.env, env),
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input_text,
            check=False,
        )
        assert "Traceback" not in result.stderr, result.stderr
        return result

    def popen(
        self, *args: str, env: Mapping[str, str | None] | None = None
    ) -> subprocess.Popen[str]:
        """Start without waiting (for concurrency and signal tests)."""
        return self.popen_code(None, *args, env=env)

    def popen_code(
        self, code: str | None, *args: str, env: Mapping[str, str | None] | None = None
    ) -> subprocess.Popen[str]:
        """Start `python -c CODE ARGS` (a cronctl with something patched, such as its clock),
        or `python -m cronctl ARGS` for None, without waiting."""
        how = ["-m", "cronctl"] if code is None else ["-c", code]
        return subprocess.Popen(
            [sys.executable, *how, *args],
            cwd=self.cwd,
            env=_merged(self.env, env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


def patched_cronctl(patch: str) -> str:
    """`python -c` code (for Cli.popen_code) that runs ``patch``, such as a limit of cronctl's
    raised far past any test's bound, then cronctl's command line with the given arguments."""
    return f"{patch}\nimport sys\nsys.argv = ['cronctl', *sys.argv[1:]]\n" + (
        "from cronctl.cli.main import main\nmain()\n"
    )


#: Pass as ``env=`` to read state_dir from the schedule file: None removes the variable.
FILE_STATE: Mapping[str, str | None] = {"CRONCTL_STATE_DIR": None}


def _merged(base: Mapping[str, str], extra: Mapping[str, str | None] | None) -> dict[str, str]:
    """``base`` updated by ``extra``; a None value in ``extra`` removes the variable."""
    env = dict(base)
    for key, value in (extra or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def clean_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment minus CRONCTL_* and systemd's directories, HOME in the sandbox, no colour."""
    # systemd's STATE_DIRECTORY and CACHE_DIRECTORY too: a suite run from a unit must not
    # send cronctl to the unit's directories.
    unit_dirs = ("STATE_DIRECTORY", "CACHE_DIRECTORY")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("CRONCTL_") and k not in unit_dirs
    }
    # Tests run as root in CI: never let a default state dir land in /var/lib/cronctl.
    # A test that reads state_dir from its schedule file passes env=FILE_STATE (it removes
    # CRONCTL_STATE_DIR; an empty value is a usage error).
    env.update(
        {
            "HOME": str(home),
            "NO_COLOR": "1",
            "XDG_STATE_HOME": str(home / "state"),
            "CRONCTL_STATE_DIR": str(home / "state" / "cronctl"),
            # `run`'s schedule cache: /var/cache/cronctl as root, never the machine's own.
            "CRONCTL_CACHE_DIR": str(home / "cache" / "cronctl"),
        }
    )
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(extra or {})
    return env


def wait_for(
    condition: Callable[[], _T], what: str, timeout: float = 30.0, every: float = 0.02
) -> _T:
    """Poll ``condition`` every ``every`` seconds until it returns something true, and return
    that; after ``timeout`` seconds fail naming ``what`` (a bound against hanging, not a
    timing assertion: under load a wait may take many times what it takes alone, so keep the
    bound generous)."""
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:g} s waiting for {what}")
        time.sleep(every)


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs: a zombie counts as gone (orphans are not reaped in
    every container)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != b"Z"


def children(pid: int) -> list[int]:
    """The processes ``pid`` started that have not been reaped yet (none once it is gone)."""
    found: list[int] = []
    try:
        threads = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for thread in threads:
        try:
            found += [int(x) for x in (thread / "children").read_text().split()]
        except OSError:  # that thread ended meanwhile
            continue
    return found


def running_in(directory: Path) -> list[int]:
    """The pids of the processes whose working directory is ``directory`` (tasks a killed
    cronctl left behind, say); a zombie has none."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cwd").readlink() == directory.resolve():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def read_until(
    process: subprocess.Popen[Any], patterns: Mapping[str, str], timeout: float = 60.0
) -> dict[str, str]:
    """Read ``process``'s "out" and/or "err" (the keys of ``patterns``) until each holds a
    match of its regular expression, without waiting for the end; what was read from each.
    Fails naming what was read if a stream ends first or after ``timeout`` seconds."""
    pipes = {"out": process.stdout, "err": process.stderr}
    fds = {name: pipes[name].fileno() for name in patterns}  # type: ignore[union-attr]
    got = dict.fromkeys(fds, b"")
    deadline = time.monotonic() + timeout
    while not all(re.search(p, got[name].decode()) for name, p in patterns.items()):
        left = deadline - time.monotonic()
        assert left > 0, f"gave up after {timeout:g} s waiting for {dict(patterns)}: {got}"
        for fd in select.select(list(fds.values()), [], [], min(left, 1.0))[0]:
            name = next(n for n, f in fds.items() if f == fd)
            chunk = os.read(fd, 65536)  # raw: a text reader's buffer would hide lines
            assert chunk, f"{name} closed before {patterns[name]!r}: {got}"
            got[name] += chunk
    return {name: text.decode() for name, text in got.items()}


def free_port() -> int:
    """A loopback TCP port nothing listens on (at the moment of asking)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def listening(port: int, process: subprocess.Popen[str]) -> bool:
    """Whether something accepts connections on loopback ``port``; fails with its stderr
    if ``process`` (the server meant to) has exited."""
    if process.poll() is not None:
        raise AssertionError(process.communicate()[1])
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def git(repo: Path, *args: str) -> None:
    """Run git in ``repo`` as a throw-away committer (it must succeed)."""
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=t@example.invalid", "-c", "user.name=t", *args],
        check=True, capture_output=True,
    )  # fmt: skip


def metric_samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Prometheus text as {(sample name, sorted labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families  # the `health` extra

    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def written(path: Path) -> str:
    """The file's text once it holds something; "" while it is missing or blank."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return ""
    return text if text.strip() else ""


def history(
    cli: Cli, *args: str, env: Mapping[str, str | None] | None = None
) -> list[dict[str, object]]:
    """The runs `history --json ARGS` shows (it must succeed)."""
    result = cli("history", "--json", *args, env=env)
    assert result.returncode == 0, result.stderr
    runs: list[dict[str, object]] = json.loads(result.stdout)["runs"]
    return runs


def make_task(expression: str, zone: str = "UTC", name: str = "t", **extra: object) -> Task:
    """A cron Task built directly (the core needs no file); ``extra`` sets other fields."""
    return Task(
        name=name,
        command="true",
        schedule_key="cron",
        schedule_value=expression,
        cron=parse_cron(expression),
        at=None,
        zone=parse_zone(zone),
        source=Path("schedules.toml"),
        line=1,
        **extra,  # type: ignore[arg-type]
    )


def write_schedule(path: Path, tasks: Sequence[str], header: str = "") -> Path:
    """Write a schedule file from TOML snippets, one [[task]] each."""
    body = header + "".join(f"\n[[task]]\n{t.strip()}\n" for t in tasks)
    path.write_text(body, encoding="utf-8")
    return path


@functools.cache
def _built_app() -> Callable[[], object]:
    """The click command typer builds from cronctl's app, built once per test session.

    Typer rebuilds it on every call (once per process is all `cronctl` ever needs, but an
    in-process test calls it hundreds of times); the command tree, its parsing and the error
    mapping in cronctl's main() are the same."""
    import typer.main

    return typer.main.get_command(_REAL_FULL_APP())


@contextlib.contextmanager
def _as_process(cwd: Path | None, env: Mapping[str, str] | None) -> Iterator[None]:
    """This process's argv-independent surroundings (cwd, environment) for one call."""
    old_cwd, old_env = Path.cwd(), dict(os.environ)
    try:
        if cwd is not None:
            os.chdir(cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        yield
    finally:
        os.chdir(old_cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(old_env)


def invoke(
    *args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m cronctl ARGS` run in this process: cronctl's console entry point with its
    stdout and stderr captured, in `cwd` with exactly `env`.

    For the many tests whose subject is what cronctl says, not the process boundary (a real
    process costs ~0.2 s of start-up each). A traceback, as from a real process, shows up
    as the exception escaping."""
    out, err = io.StringIO(), io.StringIO()
    old_argv = sys.argv
    sys.argv = ["cronctl", *args]
    code: int | str | None = 0
    try:
        with (
            _as_process(cwd, env),
            mock.patch.object(cli_main, "_full_app", _built_app),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            try:
                cli_main.main()
            except SystemExit as exit_:
                code = exit_.code
    finally:
        sys.argv = old_argv
    returncode = code if isinstance(code, int) else (0 if code is None else 2)
    return subprocess.CompletedProcess(
        ["cronctl", *args], returncode, out.getvalue(), err.getvalue()
    )


def local_context(
    tmp_path: Path, env: Mapping[str, str] | None = None, host: str = "test", **fields: Any
) -> RunContext:
    """The RunContext of a `run` or `work` in this process, with state and locks in tmp_path
    (files in lock_dir coordinate); its tasks get `env` (none by default). `fields` as
    changed() takes them."""
    from cronctl.coord import open_coordinator
    from cronctl.run.context import RunContext

    locks = tmp_path / "state" / "locks"
    coord = open_coordinator(None, locks, host=host, pid=os.getpid())
    ctx = RunContext(state_dir=tmp_path / "state", lock_dir=locks, host=host,
                     env=dict(env or {}), coord=coord)  # fmt: skip
    return changed(ctx, **fields)


def changed(ctx: RunContext, **fields: Any) -> RunContext:
    """``ctx`` with `fields` changed: its own, its World's (clock, sleep, start, condition,
    spawn, warn) and its Listener's (starting, done, output), each by name."""
    from dataclasses import fields as names
    from dataclasses import replace

    from cronctl.run.context import Listener, World

    world = {k: fields.pop(k) for k in [f.name for f in names(World)] if k in fields}
    heard = {k: fields.pop(k) for k in [f.name for f in names(Listener)] if k in fields}
    ctx = replace(ctx, **fields)
    return replace(ctx, world=replace(ctx.world, **world), listener=replace(ctx.listener, **heard))


def ledger_task(name: str, ledger: Path, schedule: str = "every_minute = true") -> str:
    """A task whose command appends its occurrence to the file `ledger`."""
    return f'name = "{name}"\ncommand = "echo $CRONCTL_OCCURRENCE >> {ledger}"\n{schedule}'


def plan_ahead_at(schedule: Schedule, tmp_path: Path, now: datetime) -> Ahead:
    """What `work`'s lead does: the decisions for `now` from the rows as stored in
    local_context's state dir (none on an empty one)."""
    from cronctl.edge.safefiles import ensure_private_dir
    from cronctl.edge.state.store import Store
    from cronctl.run.planning import plan_ahead

    with Store.open(ensure_private_dir(tmp_path / "state")) as store:
        stored = store.stored_states()
    return plan_ahead(schedule, stored, store.parse_state, now)


@contextlib.contextmanager
def reaped(process: _P) -> Iterator[_P]:
    """The process, killed and waited for on the way out if it still runs (a failed assert
    must not leave it behind)."""
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def stop_worker(worker: subprocess.Popen[str]) -> str:
    """SIGTERM (after SIGCONT, for a stopped one) to a `work` started with popen; its stderr,
    once it has exited (killed after 30 s), with no traceback in it."""
    if worker.poll() is None:
        worker.send_signal(signal.SIGCONT)
        worker.send_signal(signal.SIGTERM)
    try:
        _, err = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    assert "Traceback" not in err, err
    return err


def mark_spans(marks: Path) -> list[tuple[float, float, str]]:
    """Each run's (start, end, WHO) from lines `start WHO STAMP` and `end WHO STAMP` that
    tasks append to ``marks`` (a group limit's tests)."""
    started: dict[str, list[float]] = {}
    found: list[tuple[float, float, str]] = []
    for line in marks.read_text().splitlines():
        kind, task, stamp = line.split()
        if kind == "start":
            started.setdefault(task, []).append(float(stamp))
        else:
            found.append((started[task].pop(0), float(stamp), task))
    assert not any(started.values()), "a run started and never ended"
    return found


def most_at_once(found: list[tuple[float, float, str]]) -> int:
    """The most runs overlapping at any instant (an end before a start at the same stamp)."""
    events = sorted([(s, 1) for s, _, _ in found] + [(e, -1) for _, e, _ in found])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def command_recorded(root: Path, task: str) -> bool:
    """Whether a `TASK.holder` record under `root` (a lock_dir's overlap lock) names the
    started command: cronctl writes it just after the start."""
    return any('"command"' in path.read_text() for path in root.rglob(f"{task}.holder"))
