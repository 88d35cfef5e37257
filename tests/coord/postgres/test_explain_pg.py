"""`cronctl explain` with a PostgreSQL coordination store: the claim another machine took,
and a pause, read through the coordination port (real `cronctl` processes, a real server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers import Cli, write_schedule

AT = "2026-03-02T10:00:00Z"


def explain(cli: Cli, url: str, host: str, name: str) -> dict[str, Any]:
    result = cli(
        "explain", name, "--at", AT, "--json", "--coordination", url, "--host", host,
        "--state-dir", host,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_explain_reads_claims_and_pauses_from_the_store(
    cli: Cli, tmp_path: Path, pg_url: str
) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "once"\ncommand = "true"\nhourly = true\non_one_server = true',
            'name = "held"\ncommand = "true"\nhourly = true',
        ],
    )
    paused = cli("pause", "held", "--reason", "vendor outage", "--coordination", pg_url,
                 "--host", "ops", env={"USER": "bo"})  # fmt: skip
    assert paused.returncode == 0, paused.stderr
    for host in ("alpha", "beta"):
        ran = cli("run", "--now", AT, "--coordination", pg_url, "--host", host,
                  "--state-dir", host)  # fmt: skip
        assert ran.returncode == 0, ran.stderr
    assert explain(cli, pg_url, "alpha", "once")["verdict"] == "ran"
    assert explain(cli, pg_url, "beta", "once")["verdict"] == "another-server"
    held = explain(cli, pg_url, "beta", "held")
    assert held["verdict"] == "paused"
    assert (held["pause"]["reason"], held["pause"]["user"], held["pause"]["host"]) == (
        "vendor outage",
        "bo",
        "ops",
    )
