"""`cronctl exec`: run one task now, under its lock and timeout, recorded as manual."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from cronctl.edge.process import procs
from tests.helpers import Cli, command_recorded, history, wait_for, write_schedule, written


def test_exec_streams_output_logs_it_and_exits_with_the_tasks_code(
    cli: Cli, tmp_path: Path
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "job"\ncommand = "echo out-line; printf \'esc\\\\033[2J\\\\n\'; '
            'echo err-line >&2; exit 7"\ndaily_at = "03:00"'
        ],
    )
    result = cli("exec", "job")
    assert result.returncode == 7
    assert "out-line" in result.stdout and "err-line" in result.stdout
    assert "esc^[[2J" in result.stdout and "\x1b" not in result.stdout
    [run] = history(cli)
    assert run["trigger"] == "manual" and run["attempt"] == 1
    assert run["outcome"] == "failed" and run["exit_code"] == 7
    log = cli("logs", "job").stdout
    assert "out-line" in log and "\x1b[2J" in log  # the log keeps the bytes


def test_scheduled_runs_are_recorded_with_trigger_schedule_and_host(
    cli: Cli, tmp_path: Path
) -> None:
    write_schedule(
        tmp_path / "schedules.toml", ['name = "a"\ncommand = "true"\nevery_minute = true']
    )
    result = cli("run", "--now", "2026-08-03T09:00:00Z", "--json", "--host", "web-1")
    [run] = json.loads(result.stdout)["runs"]
    assert (run["trigger"], run["attempt"], run["host"]) == ("schedule", 1, "web-1")


def test_exec_skips_conditions_and_claims_and_leaves_the_window_alone(
    cli: Cli, tmp_path: Path
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "guarded"\ncommand = "touch ran"\nevery_minute = true\nwhen = "false"\n'
            "on_one_server = true"
        ],
    )
    assert cli("exec", "guarded").returncode == 0
    assert (tmp_path / "ran").exists()
    locks = tmp_path / "home" / "state" / "cronctl" / "locks"
    assert not list(locks.glob("claims/*")), "exec must not claim an occurrence"
    # The schedule window is untouched: the first scheduled run starts at its own minute.
    result = cli("run", "--now", "2026-08-03T09:00:00Z", "--json")
    outcomes = [r["outcome"] for r in json.loads(result.stdout)["runs"]]
    assert outcomes == ["skipped: condition"]


def test_a_paused_task_runs_with_a_note(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", ['name = "p"\ncommand = "true"\nhourly = true'])
    assert cli("pause", "p").returncode == 0
    result = cli("exec", "p")
    assert result.returncode == 0
    assert "task p is paused; running it anyway" in result.stderr


def test_exec_refuses_while_the_task_runs_and_waits_with_wait(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "slow"\ncommand = "touch started.$$; while [ ! -e release ]; do sleep 0.05; '
            'done"\nhourly = true'
        ],
    )
    first = cli.popen("exec", "slow")
    _wait_started(first, tmp_path, "started.*")
    refused = cli("exec", "slow")
    assert refused.returncode == 2
    assert "task slow is running" in refused.stderr and "--wait" in refused.stderr
    waiting = cli.popen("exec", "slow", "--wait")
    assert waiting.stderr is not None
    assert "task slow is running" in waiting.stderr.readline()  # it found the lock held
    (tmp_path / "release").touch()
    first.communicate(timeout=60)
    waiting.communicate(timeout=60)
    assert (first.returncode, waiting.returncode) == (0, 0)
    assert len(list(tmp_path.glob("started.*"))) == 2
    runs = history(cli)
    assert [r["outcome"] for r in runs] == ["ok", "ok"]


def test_exec_under_another_host_name_refuses_a_task_whose_exec_was_killed(
    cli: Cli, tmp_path: Path
) -> None:
    # The task closes the lock's descriptor, its exec is killed -9: only the holder record
    # says it runs, and a second exec under another CRONCTL_HOST on this machine must heed it.
    closer = (
        "import os, time; os.closerange(3, 65536); open('started', 'w').write(str(os.getpid()))"
        "\nwhile not os.path.exists('release'): time.sleep(0.05)"
    )
    command = json.dumps([sys.executable, "-c", closer])
    write_schedule(tmp_path / "schedules.toml", [f'name = "t"\ncommand = {command}\nhourly = true'])
    first = cli.popen("exec", "t", env={"CRONCTL_HOST": "box"})
    _wait_started(first, tmp_path)
    task = int(wait_for(lambda: written(tmp_path / "started"), "the task's pid"))
    # Past the instant the lock's holder record names the command (docs/guarantees.md's limit).
    wait_for(lambda: command_recorded(tmp_path, "t"), "the holder record to name the task")
    first.kill()
    first.communicate(timeout=60)
    try:
        second = cli("exec", "t", env={"CRONCTL_HOST": "box-alias"})
        assert second.returncode == 2, second.stderr
        assert f"task t is running (pid {task} on box" in second.stderr
    finally:
        (tmp_path / "release").touch()
    wait_for(lambda: procs.identify(task) is None, "the task to end")
    assert cli("exec", "t", env={"CRONCTL_HOST": "box-alias"}).returncode == 0


def test_exec_of_a_task_for_other_hosts_is_refused(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "db"\ncommand = "touch ran"\nhourly = true\nhosts = ["db-*"]'],
    )
    result = cli("exec", "db", "--host", "web-1")
    assert result.returncode == 2
    assert "runs only on hosts matching db-*" in result.stderr
    assert not (tmp_path / "ran").exists()
    assert cli("exec", "db", "--host", "db-2").returncode == 0


def test_exec_of_an_unknown_task_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", ['name = "a"\ncommand = "true"\nhourly = true'])
    result = cli("exec", "nope")
    assert result.returncode == 2 and "no task named 'nope'" in result.stderr


def test_exec_exit_codes_for_timeout_and_a_command_that_cannot_start(
    cli: Cli, tmp_path: Path
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "slow"\ncommand = "sleep 30"\nhourly = true\ntimeout = "1s"',
            'name = "gone"\ncommand = ["/nonexistent/program"]\nhourly = true',
        ],
    )
    slow = cli("exec", "slow")
    assert slow.returncode == 124 and "task slow timeout" in slow.stderr
    gone = cli("exec", "gone")
    assert gone.returncode == 127 and "task gone error" in gone.stderr


def test_exec_refuses_while_a_scheduled_run_of_an_unguarded_task_is_running(
    cli: Cli, tmp_path: Path
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "free"\ncommand = "touch started; while [ ! -e release ]; do sleep 0.05; '
            'done"\nevery_minute = true'
        ],
    )
    scheduled = cli.popen("run", "--now", "2026-08-03T09:00:00Z")
    _wait_started(scheduled, tmp_path)
    refused = cli("exec", "free")
    (tmp_path / "release").touch()
    with scheduled:
        scheduled.communicate(timeout=60)
    assert refused.returncode == 2 and "task free is running (pid" in refused.stderr


def _wait_started(process: subprocess.Popen[str], tmp_path: Path, name: str = "started") -> None:
    """Until the task has touched a file matching `name` (cronctl still running)."""

    def started() -> bool:
        assert process.poll() is None, "cronctl ended before its task started"
        return any(tmp_path.glob(name))

    wait_for(started, "the task to start")


def test_sigterm_to_exec_reaches_the_task_which_is_then_recorded(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "trapper"\ncommand = "trap \'echo got-term; exit 5\' TERM; touch started; '
            'sleep 30 & wait"\nhourly = true'
        ],
    )
    process = cli.popen("exec", "trapper")
    _wait_started(process, tmp_path)
    process.send_signal(signal.SIGTERM)
    with process:
        out, _ = process.communicate(timeout=60)
    assert process.returncode == 5 and "got-term" in out
    [run] = history(cli)
    assert (run["outcome"], run["exit_code"], run["trigger"]) == ("interrupted", 5, "manual")


def test_sighup_to_exec_is_ignored_and_the_task_completes_and_is_recorded(
    cli: Cli, tmp_path: Path
) -> None:
    # An operator's ssh session dropping sends SIGHUP: a manual run must go on to its end.
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "long"\ncommand = "touch started; while [ ! -e go ]; do sleep 0.05; done; '
            'grep SigIgn /proc/$$/status > ignored; echo finished"\nhourly = true'
        ],
    )
    process = cli.popen("exec", "long")
    try:
        _wait_started(process, tmp_path)
        # No wait for the signal's effect: it is pending from here on, so an exec it would
        # kill dies before it can record the task's end and exit 0 (checked below).
        process.send_signal(signal.SIGHUP)
    finally:
        # The task runs in its own session: were exec gone, it would wait for `go` for ever.
        (tmp_path / "go").touch()
    with process:
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "finished" in out
    [run] = history(cli)
    assert (run["outcome"], run["exit_code"], run["trigger"]) == ("ok", 0, "manual")
    # Ignored by a handler, not SIG_IGN, which the task would inherit.
    ignored = int((tmp_path / "ignored").read_text().split()[1], 16)
    assert not ignored & (1 << (signal.SIGHUP - 1))
