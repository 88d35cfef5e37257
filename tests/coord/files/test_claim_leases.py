"""Leased claims in a shared lock_dir (docs/guarantees.md#on_one_server): a claim whose run
waits for a group's slot is taken over when its cronctl is provably gone (this host, this
boot, the process ended), and only then; machines sharing it claim only their free slots.
Who ran what comes from the tasks' own marks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cronctl.coord.files.adapter import FilesCoordinator
from tests.coord.postgres.kit import T, outcomes
from tests.helpers import Cli, wait_for, write_schedule


def _setup(tmp_path: Path) -> FilesCoordinator:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "g"\ncron = "* * * * *"\non_one_server = true\ngroup = "g"\n'
            'command = "echo $CRONCTL_RUN_ID >> ran"'
        ],
        f'[cronctl]\nlock_dir = "{tmp_path / "locks"}"\nlock_dir_shared = true\n\n'
        '[[group]]\nname = "g"\nmax_running = 1\n\n[defaults]\nmisfire_grace = "10m"\n',
    )
    return FilesCoordinator(tmp_path / "locks", host="holder", pid=1)


def _claim(tmp_path: Path) -> dict[str, object] | None:
    found = [p for p in (tmp_path / "locks" / "claims").glob("g@*") if p.suffix != ".start"]
    if not found or not found[0].read_text():
        return None
    record = json.loads(found[0].read_text())
    return record if isinstance(record, dict) else None


def _run(cli: Cli, tmp_path: Path, host: str, state: str) -> subprocess.Popen[str]:
    env = {"CRONCTL_HOST": host, "CRONCTL_STATE_DIR": str(tmp_path / state)}
    return cli.popen("run", "--json", "--now", T, env=env)


def _said(run: subprocess.Popen[str]) -> dict[str, str]:
    out, err = run.communicate(timeout=120)
    assert "Traceback" not in err, err
    return outcomes(subprocess.CompletedProcess([], 0, out, err))


def test_a_killed_cronctls_unstarted_claim_is_taken_over_on_its_host(
    cli: Cli, tmp_path: Path
) -> None:
    holder = _setup(tmp_path)
    slot = holder.try_group_slot("g", 1)  # the group is full: a's claim waits, unstarted
    assert slot is not None
    try:
        a = _run(cli, tmp_path, "web-1", "a")
        wait_for(lambda: (_claim(tmp_path) or {}).get("state") == "leased", "a's claim")
        a.kill()
        a.communicate(timeout=30)
        b = _run(cli, tmp_path, "web-1", "b")
        wait_for(lambda: list((tmp_path / "locks" / "claims").glob("*.start")), "the take-over")
        slot.release()
        assert _said(b) == {"g": "ok"}
    finally:
        slot.release()
    assert len((tmp_path / "ran").read_text().split()) == 1


def test_a_live_or_unprovable_holder_keeps_its_claim(cli: Cli, tmp_path: Path) -> None:
    holder = _setup(tmp_path)
    slot = holder.try_group_slot("g", 1)
    assert slot is not None
    try:
        a = _run(cli, tmp_path, "web-1", "a")
        wait_for(lambda: (_claim(tmp_path) or {}).get("state") == "leased", "a's claim")
        # Alive on this host: not taken over.
        assert _said(_run(cli, tmp_path, "web-1", "b")) == {"g": "skipped: another server"}
        a.kill()
        a.communicate(timeout=30)
        # Gone, but from another host's view nothing proves it: not taken over either.
        assert _said(_run(cli, tmp_path, "web-2", "c")) == {"g": "skipped: another server"}
    finally:
        slot.release()
    assert not (tmp_path / "ran").exists()


def test_machines_sharing_a_lock_dir_each_claim_only_their_free_slots(
    cli: Cli, tmp_path: Path
) -> None:
    wait = f"while [ ! -e {tmp_path}/release ]; do sleep 0.05; done"
    held = f"touch {tmp_path}/started.$CRONCTL_TASK; {wait}"
    tasks = [f"t{i}" for i in range(4)]
    write_schedule(
        tmp_path / "schedules.toml",
        [
            f'name = "{t}"\ncron = "* * * * *"\non_one_server = true\ncommand = "{held}"'
            for t in tasks
        ],
        f'[cronctl]\nlock_dir = "{tmp_path / "locks"}"\nlock_dir_shared = true\nmax_parallel = 2\n',
    )
    runs = {host: _run(cli, tmp_path, host, host) for host in ("web-1", "web-2")}
    try:
        # No task ends before `release`: each machine can hold two claims at most, so all four
        # are claimed only when each took its two.
        wait_for(lambda: len(list(tmp_path.glob("started.*"))) == len(tasks), "every start")
        claims = [json.loads(p.read_text()) for p in (tmp_path / "locks" / "claims").glob("t*@*")
                  if p.suffix != ".start"]  # fmt: skip
        assert sorted(c["host"] for c in claims) == ["web-1", "web-1", "web-2", "web-2"]
    finally:
        (tmp_path / "release").touch()
    for host, run in runs.items():
        said = _said(run)
        assert sorted(said.values()) == ["ok", "ok", *["skipped: another server"] * 2], host
