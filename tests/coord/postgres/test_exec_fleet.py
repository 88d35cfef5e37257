"""`cronctl exec` with a coordination store: the same fleet-wide lock and pauses as a
scheduled run (docs/faults.md). Real processes, a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.coord.postgres.kit import T1, T, outcomes
from tests.helpers import wait_for


def test_exec_on_one_machine_refuses_while_a_scheduled_run_on_another_holds_the_lock(
    fleet: Callable[..., object], tmp_path: Path
) -> None:
    a = fleet("a", "run", "--json", "--now", T, background=True)
    wait_for(lambda: (tmp_path / "started").exists(), "a's task to start")
    refused = fleet("b", "exec", "long")
    assert refused.returncode == 2, refused.stderr  # type: ignore[attr-defined]
    assert "task long is running (pid " in refused.stderr  # type: ignore[attr-defined]
    assert " on a since " in refused.stderr  # type: ignore[attr-defined]
    (tmp_path / "release").touch()
    _, err = a.communicate(timeout=60)  # type: ignore[attr-defined]
    assert a.returncode == 0, err  # type: ignore[attr-defined]
    assert (tmp_path / "finished").read_text().count("done") == 1


def test_a_scheduled_run_on_another_machine_sees_execs_lock(
    fleet: Callable[..., object], tmp_path: Path
) -> None:
    e = fleet("a", "exec", "long", background=True)
    wait_for(lambda: (tmp_path / "started").exists(), "exec's task to start")
    b = fleet("b", "run", "--json", "--now", T1)
    assert outcomes(b)["long"] == "skipped: still running", b.stderr  # type: ignore[attr-defined]
    (tmp_path / "release").touch()
    _, err = e.communicate(timeout=60)  # type: ignore[attr-defined]
    assert e.returncode == 0, err  # type: ignore[attr-defined]
    assert (tmp_path / "finished").read_text().count("done") == 1


def test_exec_reads_a_pause_stored_in_the_store(
    fleet: Callable[..., object], tmp_path: Path
) -> None:
    (tmp_path / "release").touch()
    assert fleet("a", "pause", "free", "--reason", "db move").returncode == 0  # type: ignore[attr-defined]
    result = fleet("b", "exec", "free")
    assert result.returncode == 0, result.stderr  # type: ignore[attr-defined]
    assert "task free is paused; running it anyway" in result.stderr  # type: ignore[attr-defined]


def test_exec_with_the_store_unreachable_starts_nothing_and_says_why(
    cli: object, tmp_path: Path, fleet: Callable[..., object]
) -> None:
    from tests.helpers import Cli

    assert isinstance(cli, Cli)
    bad = "postgresql://u:sekret@/x?host=/nonexistent"
    result = cli("exec", "long", env={"CRONCTL_COORDINATION": bad})
    assert result.returncode == 2, result.stderr
    assert "coordination store unreachable" in result.stderr
    assert "sekret" not in result.stderr
    assert not (tmp_path / "started").exists()
