"""Chains in real `cronctl run` and `cronctl work` processes: a chain runs in order under
`work`; a `kill -9` of cronctl between two links is caught up by the next run, on the same
machine or another sharing the lock_dir or the store, once; and a minute that is quiet by
the schedule still catches up."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from tests.helpers import Cli, history, stop_worker, wait_for, write_schedule, written
from tests.run.test_work import clock_from

#: transform freezes in its `when` until the test says `go`: cronctl is then between extract's
#: end and transform's start, where the test kills it.
FREEZE = "test -e go || { echo $$ > frozen; exec sleep 60; }"


def _schedule(root: Path, one_server: bool, coordination: str | None = None) -> None:
    trail = root / "trail.log"
    guard = "on_one_server = true\n" if one_server else ""
    header = f'[cronctl]\nlock_dir = "{root / "locks"}"\nlock_dir_shared = true\n'
    if coordination:
        header += f'coordination = "{coordination}"\n'

    def step(name: str, extra: str, before: str = "") -> str:
        command = f'{before}echo {name} $CRONCTL_OCCURRENCE "$CRONCTL_UPSTREAM" >> {trail}'
        return f"name = '{name}'\ncommand = '''{command}'''\n{guard}{extra}"

    write_schedule(
        root / "schedules.toml",
        [
            # extract waits for `release` when asked to (a machine still running it).
            step("extract", "daily_at = '02:00'\n", "while test -e hold; do sleep 0.05; done; "),
            step("transform", f"after = ['extract']\nwhen = '{FREEZE}'\n"),
            step("load", "after = ['transform']\n"),
            step("page-oncall", "after = ['extract']\nafter_outcome = 'failed'\n"),
        ],
        header,
    )


def _env(root: Path, host: str) -> dict[str, str]:
    return {"CRONCTL_HOST": host, "CRONCTL_STATE_DIR": str(root / host)}


def _run(cli: Cli, root: Path, host: str, at: str) -> subprocess.CompletedProcess[str]:
    return cli("run", "--now", f"2026-08-03T{at}:00Z", env=_env(root, host))


def _steps(root: Path) -> list[str]:
    trail = root / "trail.log"
    return [line.split()[0] for line in trail.read_text().splitlines()] if trail.exists() else []


def _killed_between_links(cli: Cli, root: Path, host: str) -> None:
    """A `cronctl run` at 02:00 on ``host`` killed (-9) once extract has ended and transform
    is about to start; its frozen condition ended too."""
    _kill_between_links(
        cli.popen("run", "--now", "2026-08-03T02:00:00Z", env=_env(root, host)), root
    )


def _kill_between_links(proc: subprocess.Popen[str], root: Path) -> None:
    """Kill (-9) ``proc``, a `cronctl run`, once transform's condition started (extract has
    ended), and the frozen condition too; later conditions go on at once."""
    try:
        frozen = wait_for(lambda: written(root / "frozen"), "transform's condition to start")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    os.kill(int(frozen), signal.SIGKILL)
    (root / "frozen").unlink()
    (root / "go").touch()


def test_a_kill_between_two_links_is_caught_up_by_the_next_run_here(
    cli: Cli, tmp_path: Path
) -> None:
    _schedule(tmp_path, one_server=False)
    assert _run(cli, tmp_path, "web-1", "01:59").returncode == 0
    _killed_between_links(cli, tmp_path, "web-1")
    assert _steps(tmp_path) == ["extract"]
    again = _run(cli, tmp_path, "web-1", "02:01")
    assert "it did not run" in again.stderr  # transform's row, closed as never started
    assert _steps(tmp_path) == ["extract", "transform", "load"]
    assert _run(cli, tmp_path, "web-1", "02:02").returncode == 0
    assert _steps(tmp_path) == ["extract", "transform", "load"]
    runs = history(cli, "transform", env=_env(tmp_path, "web-1"))
    extract = history(cli, "extract", env=_env(tmp_path, "web-1"))[0]
    ran = [r for r in runs if r["outcome"] == "ok"]
    assert [(r["trigger"], r["upstream"]) for r in ran] == [("after", [extract["id"]])]


def test_another_machine_catches_up_a_link_once_in_a_quiet_minute(cli: Cli, tmp_path: Path) -> None:
    caught_up_elsewhere(cli, tmp_path, None)


def caught_up_elsewhere(cli: Cli, tmp_path: Path, url: str | None) -> None:
    """web-2 is killed between extract and transform (on_one_server); web-1, whose next
    minute is quiet by the schedule, runs transform and load; web-2 back runs neither."""
    _schedule(tmp_path, one_server=True, coordination=url)
    for host in ("web-1", "web-2"):
        assert _run(cli, tmp_path, host, "01:59").returncode == 0
    # web-2 claims extract and holds it while web-1 plans 02:00: extract is another
    # server's, nothing follows yet, and by the schedule web-1's next minutes are quiet.
    (tmp_path / "hold").touch()
    web2 = cli.popen("run", "--now", "2026-08-03T02:00:00Z", env=_env(tmp_path, "web-2"))
    wait_for(lambda: _claimed(tmp_path, url), "web-2 to claim extract")
    assert _run(cli, tmp_path, "web-1", "02:00").returncode == 0
    (tmp_path / "hold").unlink()
    _kill_between_links(web2, tmp_path)
    caught = _run(cli, tmp_path, "web-1", "02:01")
    assert caught.returncode == 0, caught.stderr
    assert _steps(tmp_path) == ["extract", "transform", "load"]
    back = _run(cli, tmp_path, "web-2", "02:02")
    assert "it did not run" in back.stderr
    assert _run(cli, tmp_path, "web-1", "02:03").returncode == 0
    assert _steps(tmp_path) == ["extract", "transform", "load"]
    outcomes = {r["task"]: r["outcome"] for r in history(cli, env=_env(tmp_path, "web-2"))
                if r["trigger"] == "after" and r["outcome"] != "error"}  # fmt: skip
    assert outcomes == {"transform": "skipped: another server", "load": "skipped: another server"}


def _claimed(root: Path, url: str | None) -> bool:
    if url is None:
        return any((root / "locks" / "claims").glob("extract@*"))
    import psycopg2

    conn = psycopg2.connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM cronctl.claims WHERE task = 'extract'")
            return cur.fetchone() is not None
    except psycopg2.Error:
        return False
    finally:
        conn.close()


def test_a_chain_runs_in_order_under_work(cli: Cli, tmp_path: Path) -> None:
    _schedule(tmp_path, one_server=False)
    (tmp_path / "go").touch()
    start = "datetime(2026, 8, 3, 1, 59, 59, 500000, tzinfo=UTC)"
    worker = cli.popen_code(clock_from(start), "work", env=_env(tmp_path, "web-1"))
    try:
        wait_for(lambda: len(_steps(tmp_path)) == 3, "the chain to run under work")
    finally:
        err = stop_worker(worker)
    assert worker.returncode == 0, err
    assert _steps(tmp_path) == ["extract", "transform", "load"]
    runs = {r["task"]: r for r in history(cli, env=_env(tmp_path, "web-1"))}
    assert runs["load"]["upstream"] == [runs["transform"]["id"]]
    assert runs["load"]["occurrence"] == "2026-08-03T02:00:00Z"
