"""Resource caps held for real: memory_max, cpu_max and nice under `run`, `exec` and `work`.

On a machine whose cronctl has no delegated cgroup v2 with the memory and cpu controllers
(this one: cgroup v1 for them), the caps are held by the setrlimit fallback, which is what
these tests run; the cgroup v2 path is held against a fake cgroup in
tests/edge/test_limits.py.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from cronctl.edge.process import limits
from tests.helpers import Cli, write_schedule
from tests.run.test_work_start import _settled, _stop, _wait_lines

NOW = "2026-08-03T10:00:00Z"
PY = json.dumps(sys.executable)


def _v2_usable(controllers: tuple[str, ...]) -> bool:
    found = limits.find_cgroup()
    return found is not None and limits.cgroup_problem(*found, controllers) is None


pytestmark = pytest.mark.skipif(
    _v2_usable(("memory", "cpu")), reason="cgroup v2 holds the caps here, not setrlimit"
)


def test_a_task_allocating_past_memory_max_fails_and_says_which_limit(cli: Cli) -> None:
    grab = (
        "import sys\ntry: b = bytearray(int(sys.argv[1]) * 1024 * 1024)\n"
        "except MemoryError: sys.exit('no memory')\nprint('got', len(b))"
    )
    write_schedule(
        cli.cwd / "schedules.toml",
        [
            f'name = "greedy"\nevery_minute = true\nmemory_max = "64MB"\n'
            f"command = [{PY}, '-c', {json.dumps(grab)}, '200']",
            # The same program under the same cap, wanting less: the cap, not Python, failed.
            f'name = "modest"\nevery_minute = true\nmemory_max = "64MB"\n'
            f"command = [{PY}, '-c', {json.dumps(grab)}, '8']",
        ],
    )
    result = cli("run", "--now", NOW)
    assert result.returncode == 1
    assert "task greedy failed (exit 1)" in result.stderr
    assert "| no memory" in result.stderr
    assert (
        "under memory_max 64MB, held by setrlimit as an address-space limit (RLIMIT_AS): "
        "past it, allocations fail; cgroup v2 is not usable here:"
    ) in result.stderr
    assert "task modest" not in result.stderr
    (log,) = cli.cwd.rglob("logs/modest/*.log")
    assert log.read_text() == f"got {8 * 1024 * 1024}\n"


def test_a_busy_loop_past_its_cpu_budget_is_killed_by_sigxcpu(cli: Cli) -> None:
    # 10% of one CPU over a 20 s timeout: 2 s of CPU time, long before the timeout.
    write_schedule(
        cli.cwd / "schedules.toml",
        ['name = "spin"\nevery_minute = true\ncpu_max = "10%"\ntimeout = "20s"\n'
         'command = "while :; do :; done"'],
    )  # fmt: skip
    result = cli("run", "--now", NOW, "--json")
    assert result.returncode == 1
    [run] = json.loads(result.stdout)["runs"]
    assert run["outcome"] == "failed", run  # not "timeout": the CPU cap ended it first
    assert "task spin failed (killed by SIGXCPU)" in result.stderr
    assert (
        "cpu_max 10% of its 20s timeout used up: 2s of CPU time, held by setrlimit "
        "(RLIMIT_CPU); cgroup v2 is not usable here:"
    ) in result.stderr


def test_nice_is_the_tasks_niceness_and_others_keep_cronctls(cli: Cli) -> None:
    read = "ps -o ni= -p $$ > {0}.ps; cut -d' ' -f19 /proc/self/stat > {0}.stat"
    write_schedule(
        cli.cwd / "schedules.toml",
        [
            f'name = "low"\nevery_minute = true\nnice = 7\ncommand = "{read.format("low")}"',
            f'name = "plain"\nevery_minute = true\ncommand = "{read.format("plain")}"',
        ],
        header="[defaults]\nnice = 0\n",
    )
    assert cli("run", "--now", NOW).returncode == 0
    assert (cli.cwd / "low.ps").read_text().strip() == "7"
    assert (cli.cwd / "low.stat").read_text().strip() == "7"
    assert (cli.cwd / "plain.stat").read_text().strip() == "0"


@pytest.mark.skipif(shutil.which("ionice") is None, reason="util-linux's ionice is not installed")
def test_ionice_is_the_tasks_io_class_and_others_keep_cronctls(cli: Cli) -> None:
    read = "ionice -p $$ > {0}.io"
    write_schedule(
        cli.cwd / "schedules.toml",
        [
            f'name = "idle"\nevery_minute = true\nionice = "idle"\n'
            f'command = "{read.format("idle")}"',
            f'name = "be"\nevery_minute = true\nionice = "best-effort:6"\n'
            f'command = "{read.format("be")}"',
            f'name = "plain"\nevery_minute = true\ncommand = "{read.format("plain")}"',
        ],
    )
    assert cli("run", "--now", NOW).returncode == 0
    assert (cli.cwd / "idle.io").read_text().strip() == "idle"
    assert (cli.cwd / "be.io").read_text().strip() == "best-effort: prio 6"
    assert (cli.cwd / "plain.io").read_text().strip() != "idle"


def test_a_shell_whose_child_ran_past_its_cpu_budget_says_the_cap_killed_it(cli: Cli) -> None:
    # The shell outlives its child and reports the signal only as exit 128 + SIGXCPU.
    burn = f"{sys.executable} -c 'while 1: pass' && echo finished"
    write_schedule(
        cli.cwd / "schedules.toml",
        [f'name = "burn"\nevery_minute = true\ncpu_max = "10%"\ntimeout = "20s"\n'
         f"command = {json.dumps(burn)}"],
    )  # fmt: skip
    result = cli("run", "--now", NOW, "--json")
    assert result.returncode == 1
    [run] = json.loads(result.stdout)["runs"]
    assert (run["outcome"], run["exit_code"]) == ("failed", 152), run
    assert "task burn failed (exit 152)" in result.stderr
    assert (
        "  killed by SIGXCPU for exceeding its CPU limit (its shell's exit 152): cpu_max 10% of "
        "its 20s timeout used up: 2s of CPU time, held by setrlimit (RLIMIT_CPU)"
    ) in result.stderr


def test_exec_holds_the_caps_of_defaults_too(cli: Cli) -> None:
    write_schedule(
        cli.cwd / "schedules.toml",
        ['name = "job"\nhourly = true\ncommand = "cut -d\' \' -f19 /proc/self/stat"'],
        header='[defaults]\nnice = 12\nmemory_max = "1GB"\n',
    )
    result = cli("exec", "job")
    assert (result.returncode, result.stdout) == (0, "12\n")


def test_work_holds_the_caps_in_its_threaded_starts(cli: Cli, tmp_path: Path) -> None:
    # `work` starts tasks from several threads: the child applies its caps before exec there.
    spin = "while :; do :; done"
    write_schedule(
        tmp_path / "schedules.toml",
        [
            f'name = "spin"\non_start = true\ncpu_max = "5%"\ntimeout = "20s"\ncommand = "{spin}"',
            'name = "low"\non_start = true\nnice = 9\n'
            "command = \"cut -d' ' -f19 /proc/self/stat >> marks\"",
        ],
    )
    worker = cli.popen("work", "--grace", "5")
    try:
        _wait_lines(tmp_path / "marks", 1)
        [spun] = _settled(cli, "spin", 1)
    finally:
        _stop(worker)
    assert (tmp_path / "marks").read_text() == "9\n"
    assert spun["outcome"] == "failed"  # not "timeout": the CPU cap ended it first
