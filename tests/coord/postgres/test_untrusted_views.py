"""What the state and the fleet store hold is untrusted: no view prints its escapes raw.

A pause reason, or a host or outcome another fleet member wrote into the store, reaches
`status`, `status --fleet` and `history --fleet` as visible text (``^[``), like task output.
"""

from __future__ import annotations

from pathlib import Path

import psycopg2

from tests.coord.conftest import PgServer
from tests.helpers import Cli, write_schedule

T = "2026-08-03T09:00:00Z"
# Clear screen, retitle the window, a forged line, a C1 CSI.
FREE = 'name = "free"\ncron = "* * * * *"\ncommand = "true"'
HOSTILE = "\x1b[2J\x1b]0;owned\x07\nforged row\x9b31m"


def _raw(text: str) -> bool:
    return any(c in text for c in ("\x1b", "\x07", "\x9b")) or "\nforged" in text


def test_a_pause_reason_reaches_status_visible(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", [FREE])
    assert cli("run", "--now", T).returncode == 0
    assert cli("pause", "free", "--reason", HOSTILE).returncode == 0
    status = cli("status")
    assert status.returncode == 0, status.stderr
    assert not _raw(status.stdout) and "^[[2J^[]0;owned^G^Jforged row" in status.stdout


def test_values_another_member_wrote_reach_fleet_views_visible(
    cli: Cli, pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    write_schedule(tmp_path / "schedules.toml", [FREE])
    env = {"CRONCTL_HOST": "a", "CRONCTL_COORDINATION": pg_url,
           "CRONCTL_STATE_DIR": str(tmp_path / "a")}  # fmt: skip
    assert cli("run", "--now", T, env=env).returncode == 0
    database = pg_url.split("@/", 1)[1].split("?")[0]
    conn = psycopg2.connect(pg_url)
    with conn, conn.cursor() as cur:  # as a hostile fleet member would write them
        cur.execute(
            "INSERT INTO cronctl.runs (id, task, occurrence, host, outcome, exit_code, started,"
            " ended, duration_s) VALUES ('x1', 'free', %s, %s, %s, 0, %s, %s, 0.1)",
            (T, "h\x1b]0;t\x07" + HOSTILE, "ok" + HOSTILE, T, T),
        )
        cur.execute(
            "INSERT INTO cronctl.pauses (task, reason, since, host, usr)"
            " VALUES ('free', %s, now(), 'a', 'root')",
            (HOSTILE,),
        )
    conn.close()
    rows = pg_server.sql("SELECT host, outcome FROM cronctl.runs WHERE id = 'x1'", database)
    assert "\x1b" in str(rows[0][0]) and "\x1b" in str(rows[0][1])  # the store holds them raw
    for args in (("status", "--fleet"), ("history", "--fleet"), ("status",)):
        shown = cli(*args, env=env)
        assert shown.returncode == 0, shown.stderr
        assert "^[" in shown.stdout, (args, shown.stdout)
        assert not _raw(shown.stdout), (args, shown.stdout)
