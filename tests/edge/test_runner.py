"""Starting, capturing, timing out and killing real commands."""

from __future__ import annotations

import os
import signal
import stat
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cronctl.edge.process.runner import CommandResult, RunSpec, run_condition, start, sweep_logs
from tests.helpers import alive, wait_for, written

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}


def _spec(tmp_path: Path, command: str | tuple[str, ...], **changes: object) -> RunSpec:
    fields: dict[str, object] = {
        "command": command,
        "shell": "/bin/sh",
        "workdir": tmp_path,
        "env": ENV,
        "timeout": None,
        "log_path": tmp_path / "run.log",
    }
    fields.update(changes)
    return RunSpec(**fields)  # type: ignore[arg-type]


def _run(tmp_path: Path, command: str | tuple[str, ...], **changes: object) -> CommandResult:
    return start(_spec(tmp_path, command, **changes)).wait()


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_bytes().rpartition(b")")[2].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != b"Z":
                members.append(int(entry.name))
    return members


# --- outcomes and exit codes ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "outcome", "exit_code"),
    [("exit 0", "ok", 0), ("exit 3", "failed", 3), ("exit 255", "failed", 255)],
)
def test_exit_status_decides_the_outcome(
    tmp_path: Path, command: str, outcome: str, exit_code: int
) -> None:
    result = _run(tmp_path, command)
    assert (result.outcome, result.exit_code, result.signal) == (outcome, exit_code, None)


def test_command_killed_by_a_signal_fails_with_no_exit_code(tmp_path: Path) -> None:
    result = _run(tmp_path, "kill -KILL $$")
    assert (result.outcome, result.exit_code, result.signal) == ("failed", None, signal.SIGKILL)


def test_times_are_aware_utc_and_duration_is_measured(tmp_path: Path) -> None:
    before = datetime.now(UTC)
    result = _run(tmp_path, "sleep 0.2")
    assert result.started.tzinfo is UTC
    assert before <= result.started <= result.ended <= datetime.now(UTC)
    assert result.duration_s >= 0.2
    assert abs((result.ended - result.started).total_seconds() - result.duration_s) < 0.01


# --- how the command is started ---------------------------------------------------------------


def test_array_command_is_executed_without_a_shell(tmp_path: Path) -> None:
    result = _run(tmp_path, ("printf", "%s\n", "$HOME * `id`"))
    assert result.outcome == "ok"
    assert result.tail == "$HOME * `id`"


def test_string_command_runs_under_the_given_shell(tmp_path: Path) -> None:
    result = _run(tmp_path, "echo $0", shell="/bin/sh")
    assert result.tail == "/bin/sh"


def test_environment_is_exactly_the_given_one_and_workdir_applies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRONCTL_TEST_LEAK", "leaked")
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = ENV | {"GREETING": "hello world"}
    command = 'pwd; echo "$GREETING"; echo "${CRONCTL_TEST_LEAK-unset}"'
    result = _run(tmp_path, command, env=env, workdir=workdir)
    assert result.tail.splitlines() == [str(workdir), "hello world", "unset"]


def test_stdout_and_stderr_share_the_log_and_stdin_is_empty(tmp_path: Path) -> None:
    result = _run(tmp_path, "echo out; echo err >&2; cat; echo done")
    assert result.tail.splitlines() == ["out", "err", "done"]
    assert (tmp_path / "run.log").read_text() == "out\nerr\ndone\n"


def test_command_runs_in_its_own_process_group(tmp_path: Path) -> None:
    running = start(_spec(tmp_path, ("sh", "-c", "ps -o pgid= -p $$")))
    result = running.wait()
    assert int(result.tail) == running.pid
    assert running.pid != os.getpgrp()


def test_passed_descriptor_is_open_in_the_command(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    try:
        # /proc/self/fd: dash only redirects single-digit descriptors.
        command = f"echo through > /proc/self/fd/{write_end}"
        result = _run(tmp_path, command, pass_fds=(write_end,))
        os.close(write_end)
        assert result.outcome == "ok"
        assert os.read(read_end, 100) == b"through\n"
    finally:
        os.close(read_end)


def test_descriptors_not_passed_are_closed_in_the_command(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)
    try:
        result = _run(tmp_path, f"echo leak > /proc/self/fd/{write_end}")
        assert result.outcome == "failed"
    finally:
        os.close(read_end)
        os.close(write_end)


# --- commands that cannot start ---------------------------------------------------------------


def test_missing_executable_is_an_error_result_not_an_exception(tmp_path: Path) -> None:
    result = _run(tmp_path, ("no-such-program-xyz", "--flag"))
    assert (result.outcome, result.exit_code) == ("error", None)
    assert result.message is not None
    assert "no-such-program-xyz" in result.message
    assert "no-such-program-xyz" in (tmp_path / "run.log").read_text()
    assert "no-such-program-xyz" in result.tail


def test_missing_shell_is_an_error_naming_the_shell(tmp_path: Path) -> None:
    result = _run(tmp_path, "echo hi", shell="/no/such/shell")
    assert result.outcome == "error"
    assert result.message == "cannot start: shell /no/such/shell: No such file or directory"


def test_missing_workdir_is_an_error_naming_the_directory(tmp_path: Path) -> None:
    result = _run(tmp_path, "echo hi", workdir=tmp_path / "gone")
    assert result.outcome == "error"
    assert result.message is not None
    assert f"working directory {tmp_path / 'gone'}" in result.message


def test_non_executable_file_is_an_error(tmp_path: Path) -> None:
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    if os.geteuid() == 0 and os.access(script, os.X_OK):
        pytest.skip("root may execute anything here")
    result = _run(tmp_path, (str(script),))
    assert result.outcome == "error"


def test_empty_array_command_is_an_error(tmp_path: Path) -> None:
    result = _run(tmp_path, ())
    assert (result.outcome, result.message) == ("error", "cannot start: the command is empty")


def test_unopenable_log_is_an_error_result(tmp_path: Path) -> None:
    result = _run(tmp_path, "echo hi", log_path=tmp_path / "missing-dir" / "run.log")
    assert result.outcome == "error"
    assert result.message is not None
    assert "cannot open log file" in result.message
    assert result.tail == result.message


# --- the log file ----------------------------------------------------------------------------


def test_log_file_is_private_even_when_it_already_existed(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("old output\n")
    log.chmod(0o644)
    result = _run(tmp_path, "echo new")
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert log.read_text() == "new\n"
    assert result.tail == "new"


def test_new_log_file_is_created_0600(tmp_path: Path) -> None:
    _run(tmp_path, "echo hi", log_path=tmp_path / "fresh.log")
    assert stat.S_IMODE((tmp_path / "fresh.log").stat().st_mode) == 0o600


def test_log_path_symlink_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "run.log").symlink_to(victim)
    result = _run(tmp_path, "echo overwritten")
    assert result.outcome == "error"
    assert victim.read_text() == "precious\n"


def test_log_path_fifo_does_not_hang_the_run(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "run.log")
    result = _run(tmp_path, "echo hi")
    assert result.outcome == "error"
    assert result.message is not None
    assert "cannot open log file" in result.message


def test_tail_keeps_the_last_twenty_lines(tmp_path: Path) -> None:
    result = _run(tmp_path, "i=1; while [ $i -le 1000 ]; do echo line $i; i=$((i+1)); done")
    lines = result.tail.splitlines()
    assert lines == [f"line {i}" for i in range(981, 1001)]


def test_tail_is_bounded_to_4_kib_for_long_lines(tmp_path: Path) -> None:
    result = _run(tmp_path, "head -c 100000 /dev/zero | tr '\\0' x; echo; echo end")
    assert result.tail.startswith("\N{HORIZONTAL ELLIPSIS}xxx")
    assert result.tail.endswith("x\nend")
    assert len(result.tail.encode()) <= 4096 + len("\N{HORIZONTAL ELLIPSIS}".encode())


def test_tail_cut_inside_a_character_starts_cleanly(tmp_path: Path) -> None:
    # 3000 two-byte "é" then "x": 4096 bytes from the end falls inside an "é".
    result = _run(tmp_path, ("sh", "-c", "printf 'é%.0s' $(seq 3000); printf x"))
    assert result.tail == "\N{HORIZONTAL ELLIPSIS}" + "é" * 2047 + "x"


def test_tail_replaces_undecodable_bytes(tmp_path: Path) -> None:
    result = _run(tmp_path, ("printf", "caf\\351\\n"))
    assert result.tail == "caf\N{REPLACEMENT CHARACTER}"


# --- timeouts and signals ---------------------------------------------------------------------


def test_timeout_kills_the_whole_group_including_a_grandchild(tmp_path: Path) -> None:
    command = "sleep 1000 & echo $! > grandchild.pid; wait"
    running = start(_spec(tmp_path, command, timeout=timedelta(seconds=0.5), kill_grace=5.0))
    result = running.wait()
    grandchild = int((tmp_path / "grandchild.pid").read_text())
    assert result.outcome == "timeout"
    assert result.signal == signal.SIGTERM
    assert not alive(grandchild)
    assert running.pid is not None
    assert _group_members(running.pid) == []


def test_timeout_escalates_to_sigkill_for_a_grandchild_that_ignores_sigterm(
    tmp_path: Path,
) -> None:
    command = "(trap '' TERM; exec sleep 1000) & echo $! > stubborn.pid; wait"
    spec = _spec(tmp_path, command, timeout=timedelta(seconds=0.3), kill_grace=0.7)
    running = start(spec)
    result = running.wait()
    stubborn = int((tmp_path / "stubborn.pid").read_text())
    assert result.outcome == "timeout"
    assert not alive(stubborn)
    assert running.pid is not None
    assert _group_members(running.pid) == []
    assert result.duration_s >= 0.3 + 0.7 - 0.05


def test_command_that_exits_cleanly_on_sigterm_is_still_a_timeout(tmp_path: Path) -> None:
    command = "trap 'echo stopping; exit 0' TERM; sleep 1000 & wait"
    result = _run(tmp_path, command, timeout=timedelta(seconds=0.3), kill_grace=5.0)
    assert (result.outcome, result.exit_code) == ("timeout", 0)
    assert result.tail == "stopping"


def test_fast_command_is_unaffected_by_its_timeout(tmp_path: Path) -> None:
    result = _run(tmp_path, "echo quick", timeout=timedelta(seconds=30))
    assert (result.outcome, result.tail) == ("ok", "quick")


class _Sleeps:
    """Counts time.sleep calls: Popen.wait with a timeout polls with them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = time.sleep

        def sleep(seconds: float) -> None:
            self.calls += 1
            real(seconds)

        monkeypatch.setattr(time, "sleep", sleep)


def test_a_timed_command_and_condition_are_waited_for_without_polling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sleeps = _Sleeps(monkeypatch)
    result = _run(tmp_path, "sleep 0.2; exit 3", timeout=timedelta(seconds=30))
    assert (result.outcome, result.exit_code) == ("failed", 3)
    assert run_condition("sleep 0.2", shell="/bin/sh", workdir=tmp_path, env=ENV, timeout_s=30)
    assert sleeps.calls == 0  # woken by the exits (a pidfd), not by a sleep loop


def test_without_a_pidfd_a_timed_command_falls_back_to_popen_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(pid: int, flags: int = 0) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", refuse)
    sleeps = _Sleeps(monkeypatch)
    result = _run(tmp_path, "sleep 0.2; exit 3", timeout=timedelta(seconds=30))
    assert (result.outcome, result.exit_code) == ("failed", 3)
    timed_out = _run(tmp_path, "sleep 1000", timeout=timedelta(seconds=0.3), kill_grace=1.0)
    assert timed_out.outcome == "timeout"
    assert not run_condition("sleep 9", shell="/bin/sh", workdir=tmp_path, env=ENV, timeout_s=0.2)
    assert sleeps.calls > 0  # Popen's own polling wait did the waiting


def test_signal_is_forwarded_to_the_group(tmp_path: Path) -> None:
    running = start(_spec(tmp_path, "sleep 1000 & echo $! > child.pid; wait"))
    child = int(wait_for(lambda: written(tmp_path / "child.pid"), "the child's pid"))
    running.signal(signal.SIGTERM)
    result = running.wait()
    assert (result.outcome, result.signal) == ("interrupted", signal.SIGTERM)
    # Delivery to the grandchild is asynchronous; it only has to die soon.
    wait_for(lambda: not alive(child), "the child to end")
    assert running.wait() is result
    running.signal(signal.SIGTERM)  # after the end: a no-op, never a stray signal


# --- conditions -------------------------------------------------------------------------------


@pytest.mark.parametrize(("command", "expected"), [("true", True), ("exit 1", False)])
def test_condition_is_true_only_on_exit_zero(tmp_path: Path, command: str, expected: bool) -> None:
    assert run_condition(command, shell="/bin/sh", workdir=tmp_path, env=ENV) is expected


def test_condition_sees_env_and_workdir_and_its_output_is_discarded(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    env = ENV | {"FLAG": "on"}
    (tmp_path / "marker").touch()
    command = 'echo noise; echo noise >&2; [ "$FLAG" = on ] && [ -e marker ]'
    assert run_condition(command, shell="/bin/sh", workdir=tmp_path, env=env)
    assert capfd.readouterr() == ("", "")


def test_condition_past_its_timeout_is_killed_with_its_group_and_false(tmp_path: Path) -> None:
    command = "sleep 1000 & echo $! > cond.pid; wait"
    assert not run_condition(command, shell="/bin/sh", workdir=tmp_path, env=ENV, timeout_s=0.3)
    assert not alive(int((tmp_path / "cond.pid").read_text()))


@pytest.mark.parametrize(
    ("shell", "workdir"), [("/no/such/shell", None), ("/bin/sh", "missing")], ids=["shell", "dir"]
)
def test_condition_that_cannot_start_is_false(
    tmp_path: Path, shell: str, workdir: str | None
) -> None:
    where = tmp_path if workdir is None else tmp_path / workdir
    assert not run_condition("true", shell=shell, workdir=where, env=ENV)


# --- log sweeping -----------------------------------------------------------------------------


def test_sweep_logs_removes_only_old_log_files(tmp_path: Path) -> None:
    now = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)
    logs = tmp_path / "logs"
    (logs / "backup").mkdir(parents=True)
    ages = {"backup/old.log": 15, "backup/recent.log": 13, "top-old.log": 20, "old.txt": 30}
    for name, days in ages.items():
        path = logs / name
        path.write_text("x")
        stamp = (now - timedelta(days=days)).timestamp()
        os.utime(path, (stamp, stamp))
    (logs / "link.log").symlink_to(logs / "backup" / "recent.log")
    os.utime(logs / "link.log", (0, 0), follow_symlinks=False)
    assert sweep_logs(logs, now=now) == 2
    remaining = sorted(str(p.relative_to(logs)) for p in logs.rglob("*"))
    assert remaining == ["backup", "backup/recent.log", "link.log", "old.txt"]


def test_sweep_logs_of_a_missing_directory_removes_nothing(tmp_path: Path) -> None:
    now = datetime(2026, 8, 3, tzinfo=UTC)
    assert sweep_logs(tmp_path / "nowhere", now=now) == 0


# --- quiet runs and processes left behind -------------------------------------------------------


def test_a_run_that_printed_nothing_leaves_no_log_file(tmp_path: Path) -> None:
    result = _run(tmp_path, "true")
    assert (result.outcome, result.log_kept) == ("ok", False)
    assert not (tmp_path / "run.log").exists()


def test_a_run_that_printed_something_keeps_its_log(tmp_path: Path) -> None:
    result = _run(tmp_path, "echo hi")
    assert result.log_kept
    assert (tmp_path / "run.log").read_text() == "hi\n"


def test_a_process_left_behind_without_a_lock_is_not_waited_for(tmp_path: Path) -> None:
    # Only a command holding the overlap lock is watched past its exit; this one holds none.
    result = _run(tmp_path, "sleep 60 & echo $! > bg.pid", timeout=timedelta(seconds=30))
    background = int((tmp_path / "bg.pid").read_text())
    try:
        assert result.outcome == "ok"
        assert alive(background)
        assert result.log_kept  # it may still write to the log
    finally:
        os.kill(background, signal.SIGKILL)


def test_a_process_left_behind_holding_the_lock_dies_at_the_timeout(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()  # stands for the overlap lock's descriptor
    try:
        result = _run(
            tmp_path,
            "sleep 60 & echo $! > bg.pid",
            timeout=timedelta(seconds=1),
            pass_fds=(write_end,),
        )
    finally:
        os.close(read_end)
        os.close(write_end)
    background = int((tmp_path / "bg.pid").read_text())
    assert (result.outcome, result.exit_code) == ("timeout", 0)
    assert result.message is not None and "left processes" in result.message
    assert not alive(background)


# --- output copied by cronctl (capped, masked) ------------------------------------------------


def test_the_output_of_many_capped_commands_at_once_is_copied_each_to_its_log(
    tmp_path: Path,
) -> None:
    """Twenty commands at once, each printing its own lines (one a secret): each log holds
    exactly its command's output, masked."""
    running = []
    for i in range(20):
        command = f"for n in 1 2 3; do echo cmd{i}-line$n; done; echo token-{i}-s3cret"
        log, secret = tmp_path / f"{i}.log", f"token-{i}-s3cret"
        spec = _spec(tmp_path, command, log_path=log, max_output=1 << 20, mask=(secret,))
        running.append(start(spec))
    results = [r.wait() for r in running]
    assert [r.outcome for r in results] == ["ok"] * 20
    for i in range(20):
        lines = [f"cmd{i}-line{n}" for n in (1, 2, 3)] + ["***"]
        assert (tmp_path / f"{i}.log").read_text().splitlines() == lines


def test_a_grandchild_holding_one_pipe_does_not_hold_up_another_commands_log(
    tmp_path: Path,
) -> None:
    """A command leaves a background process that keeps its output open; a command started
    after it still has its whole log copied and its result at once."""
    # The background process holds the first command's output until the test opens the gate.
    command = "echo first; (while [ ! -e gate ]; do sleep 0.05; done) & echo started"
    first = start(_spec(tmp_path, command, log_path=tmp_path / "a.log", max_output=1 << 20))
    second = start(_spec(tmp_path, "echo second", log_path=tmp_path / "b.log", max_output=1 << 20))
    ended: list[str] = []
    waiter = threading.Thread(target=lambda: ended.append(second.wait().outcome))
    waiter.start()
    try:
        waiter.join(30)  # a bound against hanging: before, it waited for the gate
        assert ended == ["ok"], "the second command's result waited for the first's output"
    finally:
        (tmp_path / "gate").touch()
        waiter.join()
    assert (tmp_path / "b.log").read_text() == "second\n"
    assert first.wait().outcome == "ok"


def test_a_copied_output_is_copied_by_the_thread_that_waits_not_one_per_command(
    tmp_path: Path,
) -> None:
    """A capped command's output reaches its log through the thread that waits for it: a run
    of 100 due tasks started 100 copier threads before."""

    def copiers() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "cronctl-output"}

    before = copiers()
    command = "echo first; while [ ! -e gate ]; do sleep 0.01; done; echo second"
    running = start(_spec(tmp_path, command, max_output=1 << 20))
    try:
        assert not copiers() - before, "a thread was started to copy the output"
    finally:
        (tmp_path / "gate").touch()
    result = running.wait()
    assert (result.outcome, result.tail) == ("ok", "first\nsecond")
    assert (tmp_path / "run.log").read_text() == "first\nsecond\n"


def test_a_command_that_never_stops_printing_still_times_out(tmp_path: Path) -> None:
    """The thread that copies the output also keeps the timeout: a pipe that is never empty
    must not keep it copying past it."""
    spec = _spec(tmp_path, "yes", max_output=1 << 16, timeout=timedelta(seconds=0.3))
    result = start(spec).wait()
    assert result.outcome == "timeout"
    assert 0 < (tmp_path / "run.log").stat().st_size < 1 << 17
