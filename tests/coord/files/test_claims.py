"""Occurrence claims in lock_dir, with real processes and real files."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from cronctl.coord.files.claims import claim_exists, claim_occurrence, sweep_claims
from tests.helpers import wait_for

T0 = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)

RACE = textwrap.dedent(
    """
    import sys, time
    from datetime import datetime
    from pathlib import Path
    from cronctl.coord.files.claims import claim_occurrence
    go = Path(sys.argv[2])
    Path(f"{go}.{sys.argv[4]}").touch()  # ready
    while not go.exists():  # all sixteen leave this loop within a few milliseconds
        time.sleep(0.001)
    won = claim_occurrence(Path(sys.argv[1]), "report", datetime.fromisoformat(sys.argv[3]),
                           host=sys.argv[4], pid=1, now=datetime.fromisoformat(sys.argv[3]))
    print("won" if won else "lost")
    """
)


def test_exactly_one_of_sixteen_racing_processes_wins_the_claim(tmp_path: Path) -> None:
    go = tmp_path / "go"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, str(tmp_path), str(go), T0.isoformat(), f"h{i}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(16)
    ]
    wait_for(lambda: len(list(tmp_path.glob("go.h*"))) == 16, "every racer to be ready", 120)
    go.touch()
    results = [racer.communicate(timeout=30)[0].strip() for racer in racers]
    assert all(racer.returncode == 0 for racer in racers)
    assert sorted(results) == ["lost"] * 15 + ["won"]
    claims = list((tmp_path / "claims").iterdir())
    assert [c.name for c in claims] == ["report@20260803T0900Z"]
    assert json.loads(claims[0].read_text())["host"] == f"h{results.index('won')}"


def test_claim_records_host_pid_and_time_privately(tmp_path: Path) -> None:
    assert claim_occurrence(tmp_path, "report", T0, host="web-1", pid=77, now=T0)
    path = tmp_path / "claims" / "report@20260803T0900Z"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {
        "host": "web-1",
        "pid": 77,
        "claimed": "2026-08-03T09:00:00Z",
        "occurrence": "2026-08-03T09:00:00Z",
    }


def test_claim_exists_reports_claims_without_taking_one(tmp_path: Path) -> None:
    assert not claim_exists(tmp_path, "report", T0)
    assert not (tmp_path / "claims").exists()
    claim_occurrence(tmp_path, "report", T0, host="a", pid=1, now=T0)
    assert claim_exists(tmp_path, "report", T0)
    assert not claim_exists(tmp_path, "report", T0 + timedelta(minutes=1))


def test_claim_is_never_released_so_a_second_claim_loses(tmp_path: Path) -> None:
    assert claim_occurrence(tmp_path, "report", T0, host="a", pid=1, now=T0)
    late = T0 + timedelta(seconds=1)
    assert not claim_occurrence(tmp_path, "report", T0, host="b", pid=2, now=late)


def test_claims_are_keyed_by_task_and_utc_occurrence(tmp_path: Path) -> None:
    assert claim_occurrence(tmp_path, "report", T0, host="a", pid=1, now=T0)
    assert claim_occurrence(tmp_path, "other", T0, host="a", pid=1, now=T0)
    assert claim_occurrence(tmp_path, "report", T0 + timedelta(minutes=1), host="a", pid=1, now=T0)
    berlin_summer = timezone(timedelta(hours=2))
    same_instant = T0.astimezone(berlin_summer)
    assert not claim_occurrence(tmp_path, "report", same_instant, host="b", pid=2, now=T0)


def test_task_names_with_colons_get_a_portable_claim_name(tmp_path: Path) -> None:
    assert claim_occurrence(tmp_path, "db:vacuum", T0, host="a", pid=1, now=T0)
    assert [p.name for p in (tmp_path / "claims").iterdir()] == ["db%vacuum@20260803T0900Z"]
    assert not claim_occurrence(tmp_path, "db:vacuum", T0, host="a", pid=1, now=T0)


@pytest.mark.parametrize(
    "occurrence",
    [T0 + timedelta(milliseconds=30), T0.replace(tzinfo=None)],
    ids=["fraction", "naive"],
)
def test_occurrence_must_be_an_aware_whole_second(tmp_path: Path, occurrence: datetime) -> None:
    with pytest.raises(ValueError):
        claim_occurrence(tmp_path, "report", occurrence, host="a", pid=1, now=T0)


def test_occurrences_one_second_apart_are_claimed_apart_and_swept(tmp_path: Path) -> None:
    # The first minute after a DST gap carries several occurrences: T0, T0+1s, ...
    second = T0 + timedelta(seconds=1)
    assert claim_occurrence(tmp_path, "report", T0, host="a", pid=1, now=T0)
    assert claim_occurrence(tmp_path, "report", second, host="a", pid=1, now=T0)
    assert not claim_occurrence(tmp_path, "report", second, host="b", pid=2, now=T0)
    names = sorted(p.name for p in (tmp_path / "claims").iterdir())
    assert names == ["report@20260803T090001Z", "report@20260803T0900Z"]
    # Aged by their minute: at the 7-day boundary both stay, a minute later both go.
    assert sweep_claims(tmp_path, now=T0 + timedelta(days=7)) == 0
    assert sweep_claims(tmp_path, now=T0 + timedelta(days=7, minutes=1)) == 2


def test_symlink_planted_at_the_claim_path_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "claims").mkdir(mode=0o700)
    victim = tmp_path / "victim"
    (tmp_path / "claims" / "report@20260803T0900Z").symlink_to(victim)
    assert not claim_occurrence(tmp_path, "report", T0, host="a", pid=1, now=T0)
    assert not victim.exists()


def test_sweep_removes_only_claims_older_than_a_week_by_their_name(tmp_path: Path) -> None:
    for days in (0, 6, 7, 8, 30):
        claim_occurrence(tmp_path, "report", T0 - timedelta(days=days), host="a", pid=1, now=T0)
    claims = tmp_path / "claims"
    (claims / "README").write_text("not a claim")
    (claims / "x@garbage").write_text("not a claim either")
    # mtimes say nothing: a copied or touched claim keeps the age of its occurrence.
    for path in claims.iterdir():
        os.utime(path, (0, 0))
    assert sweep_claims(tmp_path, now=T0) == 2
    assert sorted(p.name for p in claims.iterdir()) == [
        "README",
        "report@20260727T0900Z",
        "report@20260728T0900Z",
        "report@20260803T0900Z",
        "x@garbage",
    ]


def test_sweep_of_a_missing_claims_directory_removes_nothing(tmp_path: Path) -> None:
    assert sweep_claims(tmp_path / "nowhere", now=T0) == 0


def test_sweep_tolerates_claims_that_another_machine_already_removed(tmp_path: Path) -> None:
    claim_occurrence(tmp_path, "report", T0 - timedelta(days=9), host="a", pid=1, now=T0)
    first = sweep_claims(tmp_path, now=T0)
    second = sweep_claims(tmp_path, now=T0)
    assert (first, second) == (1, 0)
