"""`cronctl run` end to end: real processes, real locks, real claims, a pretended clock."""

from __future__ import annotations

import json
import signal
import stat
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.helpers import FILE_STATE, Cli, alive, wait_for, write_schedule

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)


def at(minutes: int) -> str:
    return (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def runs(result_stdout: str) -> dict[str, str]:
    """task -> outcome of the occurrences that were not missed, from `run --json`."""
    data = json.loads(result_stdout)
    return {r["task"]: r["outcome"] for r in data["runs"] if r["outcome"] != "missed"}


def test_successful_run_prints_nothing_and_exits_zero(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml", ['name = "a"\ncommand = "true"\nevery_minute = true']
    )
    result = cli("run", "--now", at(0))
    assert result.returncode == 0
    assert result.stdout == "" and result.stderr == ""


def test_failing_task_does_not_stop_others_and_reports_its_tail(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "breaks"\ncommand = "echo first; echo the-error-detail >&2; exit 3"\n'
            "every_minute = true",
            'name = "works"\ncommand = "touch works.done"\nevery_minute = true',
        ],
    )
    result = cli("run", "--now", at(0))
    assert result.returncode == 1
    assert "task breaks failed (exit 3)" in result.stderr
    assert "| the-error-detail" in result.stderr
    assert "works" not in result.stderr
    assert (tmp_path / "works.done").exists()


def test_verbose_prints_every_run(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml", ['name = "a"\ncommand = "true"\nevery_minute = true']
    )
    result = cli("run", "--now", at(0), "-v")
    assert "2026-08-03T09:00:00Z  a  ok" in result.stdout


def test_run_refuses_a_schedule_with_errors(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "good"\ncommand = "touch ran"\nevery_minute = true',
            'name = "bad"\ncommand = "true"\ncron = "61 * * * *"',
        ],
    )
    result = cli("run", "--now", at(0))
    assert result.returncode == 2
    assert "schedules.toml:" in result.stderr and "nothing was run" in result.stderr
    assert "1 error in the schedule" in result.stderr and "Fix it " in result.stderr
    assert not (tmp_path / "ran").exists()


def test_command_gets_env_workdir_and_cronctl_variables(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "sub").mkdir()
    write_schedule(
        tmp_path / "jobs" / "schedules.toml",
        [
            'name = "env"\nworkdir = "sub"\nenv = { B = "task" }\nevery_minute = true\n'
            'command = "echo $A $B $CRONCTL_TASK $CRONCTL_OCCURRENCE $CRONCTL_RUN_ID > out.txt"'
        ],
        header='[defaults]\nenv = { A = "default", B = "default" }\n',
    )
    result = cli("run", "-f", "jobs/schedules.toml", "--now", at(0))
    assert result.returncode == 0, result.stderr
    words = (tmp_path / "jobs" / "sub" / "out.txt").read_text().split()
    assert words[:4] == ["default", "task", "env", "2026-08-03T09:00:00Z"]
    assert words[4].startswith("20260803T0900Z-")


def test_array_command_is_executed_without_a_shell(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "arr"\ncommand = ["touch", "$HOME;x"]\nevery_minute = true'],
    )
    assert cli("run", "--now", at(0)).returncode == 0
    assert (tmp_path / "$HOME;x").exists()


def test_when_and_skip_conditions_decide_before_anything_else(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "when-false"\nwhen = "false"\ncommand = "touch a"\nevery_minute = true',
            'name = "skip-true"\nskip = "true"\ncommand = "touch b"\nevery_minute = true',
            'name = "both-pass"\nwhen = "true"\nskip = "false"\ncommand = "touch c"\n'
            "every_minute = true",
        ],
    )
    result = cli("run", "--now", at(0), "--json")
    assert runs(result.stdout) == {
        "when-false": "skipped: condition",
        "skip-true": "skipped: condition",
        "both-pass": "ok",
    }
    assert sorted(p.name for p in tmp_path.iterdir() if len(p.name) == 1) == ["c"]


def test_paused_in_file_is_skipped(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "p"\npaused = true\ncommand = "touch ran"\nevery_minute = true'],
    )
    result = cli("run", "--now", at(0), "--json")
    assert runs(result.stdout) == {"p": "skipped: paused"}
    assert not (tmp_path / "ran").exists()


def test_timeout_kills_the_whole_process_group(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "hang"\ntimeout = "1s"\nevery_minute = true\n'
            'command = "sleep 300 & echo $! > grandchild.pid; wait"'
        ],
    )
    # Had run waited for the grandchild's `sleep 300`, cli's own 60 s bound would fail it.
    result = cli("run", "--now", at(0), "--json")
    assert result.returncode == 1
    assert runs(result.stdout) == {"hang": "timeout"}
    assert "task hang timed out" in result.stderr
    pid = int((tmp_path / "grandchild.pid").read_text())
    assert not alive(pid)


def test_command_that_cannot_start_is_an_error_not_a_crash(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "missing"\ncommand = ["/nonexistent/program"]\nevery_minute = true',
            'name = "fine"\ncommand = "touch fine"\nevery_minute = true',
        ],
    )
    result = cli("run", "--now", at(0), "--json")
    assert result.returncode == 1
    assert runs(result.stdout) == {"missing": "error", "fine": "ok"}
    assert "task missing could not run" in result.stderr


def test_logs_are_private_files_under_state_dir(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "talk"\ncommand = "echo secret-output"\nevery_minute = true'],
        header='[cronctl]\nstate_dir = "state"\n',
    )
    assert cli("run", "--now", at(0), env=FILE_STATE).returncode == 0
    logs = list((tmp_path / "state" / "logs" / "talk").glob("*.log"))
    assert len(logs) == 1
    assert stat.S_IMODE(logs[0].stat().st_mode) == 0o600
    assert logs[0].read_text() == "secret-output\n"
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700


def test_world_writable_state_dir_is_refused(cli: Cli, tmp_path: Path) -> None:
    state = tmp_path / "open"
    state.mkdir()
    state.chmod(0o777)
    write_schedule(
        tmp_path / "schedules.toml", ['name = "a"\ncommand = "true"\nevery_minute = true']
    )
    result = cli("run", "--now", at(0), "--state-dir", str(state))
    assert result.returncode == 2
    assert str(state) in result.stderr and "world-writable" in result.stderr


def test_dry_run_takes_no_claim_or_lock_and_runs_nothing(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "guarded"\ncommand = "touch ran"\nevery_minute = true\n'
            "on_one_server = true\nwithout_overlapping = true"
        ],
        header='[cronctl]\nstate_dir = "state"\nlock_dir_shared = true\n',
    )
    result = cli("run", "--now", at(0), "--dry-run", "--json", env=FILE_STATE)
    assert result.returncode == 0
    assert runs(result.stdout) == {"guarded": "would run"}
    assert not (tmp_path / "ran").exists()
    claims = tmp_path / "state" / "locks" / "claims"
    assert not claims.exists() or not any(claims.iterdir())
    # Nothing was recorded either: the real run afterwards still deals with the occurrence.
    assert runs(cli("run", "--now", at(0), "--json", env=FILE_STATE).stdout) == {"guarded": "ok"}


@pytest.mark.parametrize("how", ["strict", "production"])
def test_on_one_server_over_local_lock_dir_is_refused_when_asked(
    cli: Cli, tmp_path: Path, how: str
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "one"\ncommand = "touch ran"\nevery_minute = true\non_one_server = true'],
    )
    args = ["run", "--now", at(0)] + (["--strict"] if how == "strict" else [])
    env = {"CRONCTL_ENV": "production"} if how == "production" else {}
    result = cli(*args, env=env)
    assert result.returncode == 2
    assert "lock-dir" in result.stderr or "lock_dir" in result.stderr
    assert not (tmp_path / "ran").exists()
    # Without either, it warns and runs.
    relaxed = cli("run", "--now", at(0))
    assert relaxed.returncode == 0 and "only this machine sees" in relaxed.stderr


def _ledger_schedule(tmp_path: Path, tasks: int) -> Path:
    snippets = [
        f'name = "job{i}"\nevery_minute = true\non_one_server = true\n'
        'command = "echo $CRONCTL_TASK $CRONCTL_OCCURRENCE $CRONCTL_HOST_TAG >> ../ledger"'
        for i in range(tasks)
    ]
    (tmp_path / "work").mkdir()
    return write_schedule(
        tmp_path / "work" / "schedules.toml",
        snippets,
        header='[cronctl]\nlock_dir = "../shared-locks"\nlock_dir_shared = true\n',
    )


# (2 machines, 20 minutes, 10 tasks) was dropped: the same claim path, in the same shared
# lock_dir, with 2 contenders per occurrence instead of 16; five consecutive minutes already
# carry each machine's state from one minute to the next.
@pytest.mark.parametrize(("machines", "minutes", "tasks"), [(16, 5, 40)])
def test_on_one_server_occurrence_runs_exactly_once_across_machines(
    cli: Cli, tmp_path: Path, machines: int, minutes: int, tasks: int
) -> None:
    _ledger_schedule(tmp_path, tasks)
    for minute in range(minutes):
        procs = [
            cli.popen(
                "run",
                "-f",
                "work/schedules.toml",
                "--now",
                at(minute),
                "--state-dir",
                str(tmp_path / f"state-{m}"),
                env={"CRONCTL_HOST_TAG": f"m{m}"},
            )
            for m in range(machines)
        ]
        for proc in procs:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
    lines = (tmp_path / "ledger").read_text().splitlines()
    keys = Counter(tuple(line.split()[:2]) for line in lines)
    assert len(keys) == minutes * tasks >= 200
    assert set(keys.values()) == {1}


def _overlap_schedule(tmp_path: Path, guard: str) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            f'name = "slow"\nevery_minute = true\nwithout_overlapping = {guard}\n'
            # The run of an occurrence with a hold-<occurrence> file waits until the test
            # removes it (was a fixed sleep 4, which a loaded machine could outlast).
            'command = "echo $$ >> pids; echo $CRONCTL_OCCURRENCE >> started; '
            'while [ -e hold-$CRONCTL_OCCURRENCE ]; do sleep 0.05; done; touch finished"'
        ],
        header='[cronctl]\nstate_dir = "state"\n',
    )


def test_overlap_lock_outlives_a_killed_cronctl_until_the_task_ends(
    cli: Cli, tmp_path: Path
) -> None:
    _overlap_schedule(tmp_path, "true")
    (tmp_path / f"hold-{at(0)}").touch()
    first = cli.popen("run", "--now", at(0))
    wait_for((tmp_path / "started").exists, "started to appear")
    assert runs(cli("run", "--now", at(1), "--json").stdout) == {"slow": "skipped: still running"}
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=10)
    # cronctl is gone, the task is not: the lock it inherited still keeps a second copy out.
    assert not (tmp_path / "finished").exists()
    assert runs(cli("run", "--now", at(2), "--json").stdout) == {"slow": "skipped: still running"}
    (tmp_path / f"hold-{at(0)}").unlink()
    wait_for((tmp_path / "finished").exists, "finished to appear")
    task = int((tmp_path / "pids").read_text().split()[0])
    wait_for(lambda: not alive(task), "the task, which holds the lock, to end")
    after = cli("run", "--now", at(3), "--json")
    assert runs(after.stdout) == {"slow": "ok"}
    assert (tmp_path / "started").read_text().split() == [at(0), at(3)]


def test_lease_lets_a_stuck_run_be_overtaken_with_a_warning(cli: Cli, tmp_path: Path) -> None:
    _overlap_schedule(tmp_path, '"2m"')
    (tmp_path / f"hold-{at(0)}").touch()
    first = cli.popen("run", "--now", at(0))
    wait_for((tmp_path / "started").exists, "started to appear")
    within = cli("run", "--now", at(1), "--json")
    assert runs(within.stdout) == {"slow": "skipped: still running"}
    overtaking = cli("run", "--now", at(3), "--json")
    assert runs(overtaking.stdout) == {"slow": "ok"}
    assert "longer than the 2m lease" in overtaking.stderr
    assert "pid" in overtaking.stderr
    (tmp_path / f"hold-{at(0)}").unlink()
    first.communicate(timeout=60)


def test_lock_dir_warning_is_printed_once_a_day_not_every_minute(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "one"\ncommand = "true"\nevery_minute = true\non_one_server = true'],
    )
    assert "only this machine sees" in cli("run", "--now", at(0)).stderr
    assert cli("run", "--now", at(1)).stderr == ""
    assert cli("run", "--now", at(2), "-v").stderr == ""  # -v too (docs/commands.md)
