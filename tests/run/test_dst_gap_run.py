"""The first minute after a spring-forward gap, through the real `cronctl run --now`.

Europe/Berlin, 2026-03-29 (as on 2027-03-28, the issue's measured day): 02:00-02:59 never
happen; `0,30 2 * * *` has two occurrences
landing at 03:00 local (01:00Z). Real state dir, real history, real claims, two machines
sharing one lock dir.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import Cli, write_schedule

# 2026: a --now in the past is a real run (one ahead of the clock is a rehearsal, apart).
LANDING = "2026-03-29T01:00:00Z"
LANDING_2027 = "2027-03-28T01:00:00Z"
HEADER = '[cronctl]\nlock_dir = "locks"\nlock_dir_shared = true\n'


def schedule(tmp_path: Path, misfire: str) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "nightly"\ncommand = "echo $CRONCTL_OCCURRENCE >> ran.txt"\n'
            f'cron = "0,30 2 * * *"\ntimezone = "Europe/Berlin"\nmisfire = "{misfire}"\n'
            "on_one_server = true"
        ],
        header=HEADER,
    )


def run(cli: Cli, now: str, machine: str) -> list[dict[str, object]]:
    result = cli("run", "--now", now, "--json", "--host", machine, "--state-dir", machine)
    assert result.returncode == 0, result.stderr
    runs: list[dict[str, object]] = json.loads(result.stdout)["runs"]
    return runs


def outcomes(runs: list[dict[str, object]]) -> list[tuple[object, object]]:
    return sorted((r["occurrence"], r["outcome"]) for r in runs)


def test_catch_up_runs_each_swallowed_time_once_across_runs_and_machines(
    cli: Cli, tmp_path: Path
) -> None:
    schedule(tmp_path, "catch-up")
    first = run(cli, LANDING, "alpha")
    assert outcomes(first) == [(LANDING, "ok"), ("2026-03-29T01:00:01Z", "ok")]
    ran = tmp_path / "ran.txt"
    assert ran.read_text().split() == [LANDING, "2026-03-29T01:00:01Z"]
    # The same machine again within the minute: nothing new.
    assert run(cli, "2026-03-29T01:00:40Z", "alpha") == []
    # Another machine sharing the lock dir finds both occurrences claimed.
    second = run(cli, LANDING, "beta")
    assert outcomes(second) == [
        (LANDING, "skipped: another server"),
        ("2026-03-29T01:00:01Z", "skipped: another server"),
    ]
    assert len(ran.read_text().split()) == 2
    claims = sorted(p.name for p in (tmp_path / "locks" / "claims").iterdir())
    assert claims == ["nightly@20260329T010001Z", "nightly@20260329T0100Z"]
    history = json.loads(cli("history", "--json", "--state-dir", "alpha").stdout)["runs"]
    assert outcomes(history) == [(LANDING, "ok"), ("2026-03-29T01:00:01Z", "ok")]


@pytest.mark.parametrize("misfire", ["coalesce", "skip"])
def test_coalesce_and_skip_run_once_and_record_the_other_as_missed(
    cli: Cli, tmp_path: Path, misfire: str
) -> None:
    schedule(tmp_path, misfire)
    assert outcomes(run(cli, LANDING, "alpha")) == [
        (LANDING, "ok"),
        ("2026-03-29T01:00:01Z", "missed"),
    ]
    assert (tmp_path / "ran.txt").read_text().split() == [LANDING]
    history = json.loads(cli("history", "--json", "--state-dir", "alpha").stdout)["runs"]
    assert outcomes(history) == [(LANDING, "ok"), ("2026-03-29T01:00:01Z", "missed")]


def test_next_and_check_say_what_the_gap_does(cli: Cli, tmp_path: Path) -> None:
    schedule(tmp_path, "catch-up")
    text = cli("next", "nightly", "--after", "2027-03-27T02:00:00Z", "-n", "1").stdout
    assert text.startswith(
        f"{LANDING_2027}  Sun 2027-03-28 03:00 Europe/Berlin  \u00d72 (catch-up: "
    )
    assert "02:00, 02:30 do not exist (DST change) and land here; each runs, in turn" in text
    data = json.loads(cli("next", "nightly", "--after", "2027-03-27T02:00:00Z", "--json").stdout)
    assert data["occurrences"][0] == LANDING_2027
    assert data["details"][0]["runs"] == 2
    assert data["details"][0]["dst_skipped"] == ["2027-03-28T02:00", "2027-03-28T02:30"]
    check = cli("check", "--now", "2027-01-01T00:00:00Z").stdout
    assert "2 occurrences swallowed" in check
    assert 'misfire = "catch-up" runs it 2 times in turn' in check
