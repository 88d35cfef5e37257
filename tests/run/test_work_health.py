"""`cronctl work --health ADDR` and `--health-file PATH`: real `work` processes, real HTTP."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.edge.test_reaper import FAST_WORK
from tests.helpers import (
    Cli,
    free_port,
    metric_samples,
    read_until,
    stop_worker,
    wait_for,
    write_schedule,
)

# FAST_WORK, whose minute loop also hangs in its reload while a file named "stall" exists in
# its directory (as on a hung mount): the loop stops, the HTTP server goes on answering.
STALLING = FAST_WORK.replace(
    "sys.argv = ",
    """import os
real_refresh = work.Worker.refresh

def refresh(self, watched):
    while os.path.exists("stall"):
        time.sleep(0.05)
    return real_refresh(self, watched)

work.Worker.refresh = refresh
sys.argv = """,
    1,
)
EVERY_MINUTE = 'name = "tick"\nevery_minute = true\ncommand = "echo $CRONCTL_OCCURRENCE >> ticks"'


def _get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:  # noqa: S310 (loopback)
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def _serving(url: str) -> bool:
    try:
        _get(url, timeout=2)
    except OSError:
        return False
    return True


@pytest.fixture
def started(cli: Cli) -> Iterator[Callable[..., tuple[subprocess.Popen[str], str]]]:
    """Start a `work` (or a `script` that patches it) with --health on a free port;
    its process and base URL, once it answers. Stopped after the test."""
    workers: list[subprocess.Popen[str]] = []

    def start(*args: str, script: str | None = None) -> tuple[subprocess.Popen[str], str]:
        port = free_port()
        argv = ("work", "--grace", "5", "--health", f"127.0.0.1:{port}", *args)
        worker = cli.popen_code(script, *argv)
        workers.append(worker)
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: _serving(base + "/healthz") or worker.poll() is not None, "the server", 60)
        assert worker.poll() is None, worker.communicate()
        return worker, base

    yield start
    for worker in workers:
        if worker.returncode is None:  # not stopped by the test itself
            stop_worker(worker)


def test_healthz_answers_200_while_the_minute_loop_is_on_time(
    cli: Cli, started: Callable[..., tuple[subprocess.Popen[str], str]]
) -> None:
    write_schedule(cli.cwd / "schedules.toml", [EVERY_MINUTE])
    worker, base = started(script=FAST_WORK)
    ticks = cli.cwd / "ticks"
    wait_for(lambda: ticks.exists() and len(ticks.read_text().split()) >= 2, "two ticks", 60)
    status, body = _get(base + "/healthz")
    assert (status, body.split(":")[0]) == (200, "ok")
    assert _get(base + "/nothing-here")[0] == 404
    err = stop_worker(worker)
    assert worker.returncode == 0, err
    assert "health on http://127.0.0.1:" in err


def test_healthz_answers_503_when_the_minute_loop_stalls_and_200_once_it_recovers(
    cli: Cli, started: Callable[..., tuple[subprocess.Popen[str], str]]
) -> None:
    write_schedule(cli.cwd / "schedules.toml", [EVERY_MINUTE])
    worker, base = started(script=STALLING)
    ticks = cli.cwd / "ticks"
    wait_for(ticks.exists, "the first tick", 60)
    (cli.cwd / "stall").touch()
    # 90 s of the worker's clock pass in 3 s: the minute it waits for is then past due.
    wait_for(lambda: _get(base + "/healthz")[0] == 503, "a 503 for the stall", 60)
    status, body = _get(base + "/healthz")
    assert status == 503 and body.startswith("stalled: the minute loop is"), body
    (cli.cwd / "stall").unlink()
    wait_for(lambda: _get(base + "/healthz")[0] == 200, "a 200 again", 60)
    err = stop_worker(worker)
    assert worker.returncode == 0, err


def test_a_stopped_worker_gives_a_probe_no_answer(
    cli: Cli, started: Callable[..., tuple[subprocess.Popen[str], str]]
) -> None:
    write_schedule(cli.cwd / "schedules.toml", [EVERY_MINUTE])
    worker, base = started()
    assert _get(base + "/healthz")[0] == 200
    worker.send_signal(signal.SIGSTOP)
    try:
        with pytest.raises(OSError):  # a probe's timeout: the supervisor counts a failure
            _get(base + "/healthz", timeout=2)
    finally:
        worker.send_signal(signal.SIGCONT)
    wait_for(lambda: _get(base + "/healthz")[0] == 200, "a 200 again", 30)


def test_metrics_serves_what_metrics_file_holds(
    cli: Cli, started: Callable[..., tuple[subprocess.Popen[str], str]]
) -> None:
    write_schedule(
        cli.cwd / "schedules.toml",
        [
            'name = "warm"\non_start = true\ncommand = "echo warm"',
            'name = "broken"\non_start = true\ndaily_at = "03:00"\ncommand = "exit 3"',
        ],
        header='[cronctl]\nmetrics_file = "cronctl.prom"\n',
    )
    _, base = started()
    wait_for(lambda: (cli.cwd / "cronctl.prom").exists(), "the metrics file", 30)
    status, served = _get(base + "/metrics")
    assert status == 200
    written = metric_samples((cli.cwd / "cronctl.prom").read_text())
    assert metric_samples(served) == written
    assert written[("cronctl_runs_total", (("outcome", "failed"), ("task", "broken")))] == 1
    assert written[("cronctl_last_exit_code", (("task", "broken"),))] == 3


def test_health_file_is_touched_every_minute_and_removed_at_stop(cli: Cli) -> None:
    write_schedule(cli.cwd / "schedules.toml", [EVERY_MINUTE])
    alive = cli.cwd / "alive"
    worker = cli.popen_code(FAST_WORK, "work", "--grace", "5", "--health-file", str(alive))
    try:
        wait_for(alive.exists, "the health file", 60)
        first = alive.stat().st_mtime_ns
        wait_for(lambda: alive.stat().st_mtime_ns > first, "the health file touched again", 60)
    finally:
        err = stop_worker(worker)
    assert worker.returncode == 0, err
    assert not alive.exists()


def test_a_link_planted_at_the_health_file_is_not_followed(cli: Cli) -> None:
    write_schedule(cli.cwd / "schedules.toml", [EVERY_MINUTE])
    target = cli.cwd / "precious"
    target.write_text("keep\n")
    os.utime(target, (0, 0))
    (cli.cwd / "alive").symlink_to(target)
    refused = cli("work", "--health-file", str(cli.cwd / "alive"))
    assert refused.returncode == 2
    assert "--health-file" in refused.stderr and "symbolic link" in refused.stderr
    assert target.stat().st_mtime == 0 and target.read_text() == "keep\n"
    missing = cli("work", "--health-file", str(cli.cwd / "no-such-dir" / "alive"))
    assert missing.returncode == 2 and "cannot write it" in missing.stderr


def _shared_tmp(cli: Cli) -> Path:
    """A directory like a machine's /tmp: everyone may write, sticky."""
    shared = cli.cwd / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    return shared


def test_the_health_file_may_live_in_a_sticky_directory_everyone_writes(cli: Cli) -> None:
    # docs/containers.md's recipe: --health-file /tmp/cronctl-alive, /tmp being mode 1777.
    write_schedule(cli.cwd / "schedules.toml", [EVERY_MINUTE])
    alive = _shared_tmp(cli) / "cronctl-alive"
    worker = cli.popen_code(FAST_WORK, "work", "--grace", "5", "--health-file", str(alive))
    try:
        wait_for(lambda: alive.exists() or worker.poll() is not None, "the health file", 60)
        assert worker.poll() is None, worker.communicate()
        first = alive.stat().st_mtime_ns
        wait_for(lambda: alive.stat().st_mtime_ns > first, "the health file touched again", 60)
        assert alive.stat().st_uid == os.geteuid()
    finally:
        err = stop_worker(worker)
    assert worker.returncode == 0, err
    assert not alive.exists()


def _plant_fifo(path: Path) -> str:
    os.mkfifo(path)
    return "not a regular file"


def _plant_other_users_file(path: Path) -> str:
    if os.geteuid() != 0:
        pytest.skip("making another user's file needs root")
    path.write_text("theirs\n")
    path.chmod(0o666)
    os.chown(path, 54321, 54321)
    return "belongs to uid 54321"


def _plant_link(path: Path) -> str:
    path.symlink_to(path.parent.parent / "schedules.toml")
    return "symbolic link"


def _plant_other_users_link(path: Path) -> str:
    # Another user's link in a sticky directory: open() answers EACCES there, not ELOOP.
    if os.geteuid() != 0:
        pytest.skip("making another user's link needs root")
    _plant_link(path)
    os.lchown(path, 54321, 54321)
    return "symbolic link"


@pytest.mark.parametrize(
    "plant", [_plant_fifo, _plant_other_users_file, _plant_link, _plant_other_users_link]
)
def test_what_another_user_planted_at_a_shared_health_file_is_refused_and_kept(
    cli: Cli, plant: Callable[[Path], str]
) -> None:
    write_schedule(cli.cwd / "schedules.toml", [EVERY_MINUTE])
    alive = _shared_tmp(cli) / "cronctl-alive"
    said = plant(alive)
    before = os.lstat(alive)
    refused = cli("work", "--health-file", str(alive))
    assert refused.returncode == 2, refused.stderr
    assert f"--health-file {alive}: cannot write it: " in refused.stderr
    assert said in refused.stderr
    assert "chmod" not in refused.stderr  # never advice to close a shared /tmp
    after = os.lstat(alive)  # still there, untouched: not ours to remove
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_world_writable_health_file_directory_without_sticky_bit_is_refused(cli: Cli) -> None:
    write_schedule(cli.cwd / "schedules.toml", [EVERY_MINUTE])
    loose = cli.cwd / "loose"
    loose.mkdir()
    loose.chmod(0o777)  # others could rename our file away and plant theirs
    refused = cli("work", "--health-file", str(loose / "alive"))
    assert refused.returncode == 2 and f"{loose} is world-writable" in refused.stderr
    assert not (loose / "alive").exists()


@pytest.mark.parametrize(
    ("address", "said"),
    [
        ("nonsense", "the port 'nonsense' is not a number"),
        ("127.0.0.1:99999", "the port '99999' is not a number"),
        ("127.0.0.1:", "the port '' is not a number"),
        ("example.com:8080", "'example.com' is not an IP address"),
        ("::1:8080", "an IPv6 address goes in brackets"),
        ("1.2.3.4.5:80", "'1.2.3.4.5' is not an IP address"),
    ],
)
def test_a_bad_health_address_is_refused_with_exit_2(cli: Cli, address: str, said: str) -> None:
    write_schedule(cli.cwd / "schedules.toml", [EVERY_MINUTE])
    refused = cli("work", "--health", address)
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"cronctl: error: --health {address!r}: {said}")
    assert "e.g. 127.0.0.1:8080" in refused.stderr


def test_a_health_port_in_use_is_refused_before_anything_runs(cli: Cli) -> None:
    write_schedule(
        cli.cwd / "schedules.toml", ['name = "w"\non_start = true\ncommand = "touch ran"']
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        alive = cli.cwd / "alive"
        refused = cli("work", "--health", str(port), "--health-file", str(alive))
    assert refused.returncode == 2
    assert f"--health 127.0.0.1:{port}: cannot listen there" in refused.stderr
    assert not (cli.cwd / "ran").exists()
    assert not alive.exists()  # a `work` that never ran must not look alive


def test_work_without_health_never_imports_the_server_or_prometheus_client(cli: Cli) -> None:
    write_schedule(cli.cwd / "schedules.toml", [EVERY_MINUTE])
    worker = cli.popen("work", env={"PYTHONPROFILEIMPORTTIME": "1"})
    err = ""
    try:
        # Up to its wait for the first minute: everything it imports is imported.
        err = read_until(worker, {"err": "cronctl work: 1 task; waiting"})["err"]
    finally:
        err += stop_worker(worker)
    imported = {line.rsplit("|", 1)[-1].strip() for line in err.splitlines() if "|" in line}
    assert "cronctl.run.work" in imported
    assert not {"http.server", "prometheus_client", "socketserver"} & imported


def test_health_without_prometheus_client_says_which_extra_to_install(cli: Cli) -> None:
    write_schedule(cli.cwd / "schedules.toml", [EVERY_MINUTE])
    # As on a machine without the `health` extra: the import fails.
    without = (
        "import sys; sys.modules['prometheus_client'] = None; "
        "sys.argv = ['cronctl', *sys.argv[1:]]; "
        "from cronctl.cli.main import main; main()"
    )
    worker = cli.popen_code(without, "work", "--health", str(free_port()))
    _, err = worker.communicate(timeout=60)
    assert worker.returncode == 2, err
    assert "--health needs prometheus-client: pip install 'cronctl[health]'" in err
    assert "Traceback" not in err
