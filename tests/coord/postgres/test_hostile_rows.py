"""Rows of the store are untrusted input (docs/faults.md): what a fleet member, an older
cronctl or a person with psql may write into every column of every table, and every reader
of it. None crashes; each names the rows it skipped; no control character reaches a
terminal; the dashboard answers every page (counting what it left out) and refuses a NUL.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from cronctl.coord.postgres.lock import lock_key
from tests.coord.conftest import PgServer
from tests.coord.postgres.kit import T1, T, database_of, serving
from tests.helpers import Cli, wait_for, write_schedule
from tests.run.test_work import NEAR_BOUNDARY

# Clear the screen, ring, forge a line.
CONTROL = "\x1b[2J\x07\nforged line"
LONG = "x" * 100_000
SWEEP_AT = "2026-08-03T10:00:00Z"  # a run at minute 0 sweeps the store

#: (table, key the warning names): every row below that no reader can use. Another
#: project's pauses are never named: they are not this run's to read, and a warning about
#: them would reach every other project's cron mail each minute.
PAUSES = [("pauses", "held")]
OTHER_PAUSES = [("pauses", "other/inf"), ("pauses", "other/ninf"),
                ("pauses", "other/y20000"), ("pauses", "other/long")]  # fmt: skip
ORPHANS = [("claims", "guarded infinity"), ("claims", "guarded -infinity")]
RUNS = ["r-occ-inf", "r-occ-20000", "r-started", "r-ended", "r-nan", "r-dur-inf",
        "x/../../etc", "r-long-msg", "r-long-host", "r-upstream"]  # fmt: skip


def _hostile(url: str) -> None:
    """Write what the columns allow and no reader can use, as psql would."""
    run = ("INSERT INTO cronctl.runs (id, task, occurrence, host, outcome, exit_code, started, "
           "ended, duration_s, message, output) VALUES (%s, 'free', %s, %s, %s, 0, %s, %s, %s, "
           "%s, %s)")  # fmt: skip
    good = ("2026-08-03T08:00:00Z", "2026-08-03T08:00:01Z")
    conn = psycopg2.connect(url)
    with conn, conn.cursor() as cur:
        for task, reason, since, who in (
            ("other/inf", "r", "infinity", "u"),
            ("other/ninf", "r", "-infinity", "u"),
            ("other/y20000", "r", "20000-01-01", "u"),
            ("other/long", LONG, "2026-08-01", "u"),
            ("held", CONTROL, "infinity", CONTROL),
        ):
            cur.execute(
                "INSERT INTO cronctl.pauses (task, reason, since, host, usr) "
                "VALUES (%s, %s, %s, %s, %s)",
                (task, reason, since, who, who),
            )
        for i, (rid, occurrence, started, ended, duration, message, host) in enumerate(
            (
                ("r-occ-inf", "infinity", *good, "1", None, None),
                ("r-occ-20000", "20000-01-01", *good, "1", None, None),
                ("r-started", "2026-08-03T08:00:00Z", "20000-01-01", good[1], "1", None, None),
                ("r-ended", "2026-08-03T08:00:00Z", good[0], "infinity", "1", None, None),
                ("r-nan", "2026-08-03T08:00:00Z", *good, "NaN", None, None),
                ("r-dur-inf", "2026-08-03T08:00:00Z", *good, "Infinity", None, None),
                ("x/../../etc", "2026-08-03T08:00:00Z", *good, "1", None, None),
                ("r-long-msg", "2026-08-03T08:00:00Z", *good, "1", LONG, None),
                ("r-long-host", "2026-08-03T08:00:00Z", *good, "1", None, LONG),
                ("r-output", "2026-08-03T08:00:00Z", *good, "1", CONTROL, "h" + CONTROL),
                ("r-long-out", "2026-08-03T08:00:00Z", *good, "1", None, None),
            )
        ):
            output = {"r-output": CONTROL, "r-long-out": LONG}.get(rid)
            outcome = "failed" if output else "ok"
            cur.execute(run, (rid, "2026-08-03T08:00:00Z", host or f"h{i}", outcome, started,
                              ended, duration, message, output))  # fmt: skip
            # Written apart: the trigger copies a finished record into latest as written.
            cur.execute("UPDATE cronctl.runs SET occurrence = %s WHERE id = %s", (occurrence, rid))
        cur.execute(
            "INSERT INTO cronctl.runs (id, task, occurrence, host, outcome, trigger, upstream) "
            "VALUES ('r-upstream', 'free', '2026-08-03T08:00:00Z', 'hu', 'ok', 'after', %s)",
            ("r-1 " + CONTROL,),
        )
        cur.execute(
            "INSERT INTO cronctl.latest (id, task, occurrence, host, outcome, trigger, attempt) "
            "VALUES ('l-20000', 'free', '20000-01-01', 'lh', 'ok', 'schedule', 1)"
        )
        for host, version, clock, seen in (
            ("h-clock", "1", "infinity", "now"),
            ("h-seen", "1", "now", "20000-01-01"),
            ("h-version", LONG, "now", "now"),
        ):
            cur.execute(
                "INSERT INTO cronctl.hosts (project, host, version, clock, seen) "
                "VALUES ('', %s, %s, %s, %s)",
                (host, version, clock, seen),
            )
        # A live-looking holder of `guarded` with a hostile host; one of `locked` that no
        # reader can use (its lock is free: the row must not stop a run).
        cur.execute(
            "INSERT INTO cronctl.holders (task, host, pid, started, backend, seen, timeout_s) "
            "VALUES ('guarded', %s, 4242, now(), 0, now() + interval '1 day', 60), "
            "('locked', 'h', 4243, '20000-01-01', 0, 'infinity', 'NaN')",
            (CONTROL,),
        )
        cur.execute(
            "INSERT INTO cronctl.claims (task, occurrence, host, pid, claimed_at) "
            "VALUES ('free', 'infinity', 'c', -1, '20000-01-01')"
        )
        # Unstarted claims of a claimer gone, which every run reads to take over: of
        # occurrences no reader can name.
        cur.execute(
            "INSERT INTO cronctl.claims (task, occurrence, host, state, expires, wait_until) "
            "VALUES ('guarded', 'infinity', 'c', 'leased', now(), 'infinity'), "
            "('guarded', '-infinity', 'c', 'leased', now(), 'infinity')"
        )
    conn.close()


@pytest.fixture
def store(cli: Cli, pg_url: str, tmp_path: Path) -> Callable[..., Any]:
    """Machine ``a`` on a schedule of a plain task, two guarded ones and one paused by the
    store, after the hostile rows were written; ``store(*args)`` runs cronctl as ``a``."""
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "free"\ncron = "* * * * *"\ncommand = "echo $CRONCTL_OCCURRENCE >> free.log"',
            'name = "guarded"\ncron = "* * * * *"\ncommand = "true"\n'
            "on_one_server = true\nwithout_overlapping = true",
            'name = "locked"\ncron = "* * * * *"\ncommand = "echo x >> locked.log"\n'
            "without_overlapping = true",
            'name = "held"\ncron = "* * * * *"\ncommand = "echo x >> held.log"',
        ],
    )
    env = {"CRONCTL_HOST": "a", "CRONCTL_COORDINATION": pg_url,
           "CRONCTL_STATE_DIR": str(tmp_path / "a")}  # fmt: skip
    first = cli("run", "--now", T, env=env)
    assert first.returncode == 0, first.stderr
    _hostile(pg_url)

    def run(*args: str, code: int | None = 0) -> subprocess.CompletedProcess[str]:
        done = cli(*args, env=env)
        _no_crash(done, args)
        assert code is None or done.returncode == code, (args, done.stdout, done.stderr)
        return done

    run.env = env  # type: ignore[attr-defined]
    return run


def _no_crash(done: Any, what: object) -> None:
    text = done.stdout + done.stderr
    assert "Traceback" not in text and "internal error" not in text, (what, text[-3000:])
    assert "\x1b" not in text and "\x07" not in text, (what, text[-3000:])
    assert "\nforged" not in text, (what, text[-3000:])


def _named(stderr: str, *rows: tuple[str, str]) -> None:
    """Each row is named once, by its table and key; another project's pauses never."""
    for table, key in rows:
        found = stderr.count(f"cronctl.{table} {key!r}")
        assert found == 1, (table, key, found, stderr[-3000:])
    for table, key in OTHER_PAUSES:
        assert f"cronctl.{table} {key!r}" not in stderr, (table, key, stderr[-3000:])


def test_run_and_its_plain_tasks_go_on_past_every_bad_row(
    store: Callable[..., Any], tmp_path: Path
) -> None:
    done = store("run", "--now", T1, "-v", code=None)
    assert done.returncode in (0, 1), done.stderr
    assert T1 in (tmp_path / "free.log").read_text()
    assert len((tmp_path / "locked.log").read_text().split()) == 2  # the bad holder held nothing
    assert len((tmp_path / "held.log").read_text().split()) == 1  # a pause with a bad time holds
    _named(done.stderr, *PAUSES, ("holders", "locked"), *ORPHANS)
    assert "^[[2J^G^Jforged line" in done.stdout + done.stderr  # guarded's holder, visible


def test_a_work_tick_runs_its_tasks_past_every_bad_row(
    cli: Cli, store: Callable[..., Any], tmp_path: Path
) -> None:
    worker = cli.popen_code(NEAR_BOUNDARY, "work", "--grace", "10", env=store.env)
    try:
        wait_for(lambda: len((tmp_path / "free.log").read_text().split()) >= 2, "a tick")
    finally:
        worker.terminate()
        out, err = worker.communicate(timeout=30)
    _no_crash(subprocess.CompletedProcess([], worker.returncode, out, err), "work")
    assert worker.returncode == 0, err
    _named(err, *PAUSES)


def test_exec_names_a_bad_holder_and_shows_a_hostile_one_visible(
    cli: Cli, store: Callable[..., Any], pg_url: str, tmp_path: Path
) -> None:
    store("exec", "free")
    _named(store("exec", "locked").stderr, ("holders", "locked"))
    refused = store("exec", "guarded", code=2)
    assert "pid 4242 on ^[[2J^G^Jforged line since" in refused.stderr
    # --wait while another session holds the lock: its waiting line is visible too.
    conn = psycopg2.connect(pg_url)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SELECT pg_advisory_lock(%s)", (lock_key("guarded"),))
    waiting = cli.popen("exec", "guarded", "--wait", env=store.env)
    try:
        line = ""
        while "waiting" not in line:
            line = waiting.stderr.readline()  # type: ignore[union-attr]
            assert line, "exec --wait ended"
    finally:
        waiting.terminate()
        waiting.communicate(timeout=30)
        conn.close()
    assert "waiting for it to end" in line and "^[[2J^G^Jforged line" in line, line


def test_views_and_operations_skip_what_they_cannot_read(store: Callable[..., Any]) -> None:
    for args in (("status",), ("status", "--fleet"), ("history",), ("history", "--fleet"),
                 ("explain", "free", "--at", T1), ("pause", "free"), ("resume", "free"),
                 ("status", "--fleet", "--json")):  # fmt: skip
        store(*args)
    fleet = store("history", "--fleet", "--json", "--limit", "1000")
    shown = {run["id"] for run in json.loads(fleet.stdout)["runs"]}  # strict JSON: no NaN
    assert "r-output" in shown and not shown & set(RUNS)
    _named(fleet.stderr, *(("runs", rid) for rid in RUNS))
    store("run", "--now", T1, code=None)
    explained = store("explain", "held", "--at", T1)
    assert "paused by ^[[2J^G^Jforged line on ^[[2J^G^Jforged line" in explained.stdout
    doctor = store("doctor", code=None)
    assert "coordination" in doctor.stdout + doctor.stderr


def test_the_sweep_removes_records_no_age_would_reach(
    store: Callable[..., Any], pg_server: PgServer, pg_url: str
) -> None:
    store("run", "--now", SWEEP_AT, code=None)
    database = database_of(pg_url)
    for table in ("runs", "latest", "claims"):
        left = pg_server.sql(
            f"SELECT count(*) FROM cronctl.{table} WHERE NOT isfinite(occurrence) "  # noqa: S608
            "OR occurrence > '9999-12-31'",
            database,
        )
        assert left == [(0,)], table


def test_every_dashboard_page_answers_and_counts_what_it_left_out(
    cli: Cli, store: Callable[..., Any], pg_url: str, tmp_path: Path
) -> None:
    with serving(cli, tmp_path, pg_url, "a") as server:
        for path in ("/", "/tasks/free", "/tasks/free/timeline.svg", "/tasks/free/durations.svg",
                     "/tasks/held", "/tasks/guarded", "/runs/r-output", "/fleet", "/api/tasks",
                     "/api/tasks/free", "/api/tasks/free/explain", "/api/runs",
                     "/api/runs?task=free&limit=1000", "/api/hosts", "/?host=h1",
                     "/tasks/free?host=h6"):  # fmt: skip
            status, body = server.get(path)
            assert status == 200, (path, status, body[-2000:])
            assert b"/etc" not in body, path
            if path.startswith("/api/"):
                json.loads(body)  # strict: no NaN
        status, body = server.get("/tasks/free")
        assert b"of the coordination store could not be read" in body
        for path in ("/api/runs?host=%00", "/api/runs?task=a%00", "/runs/x%00",
                     "/tasks/free?before=2026-08-03T08:00:00Z~x%00", "/?host=%00",
                     "/api/runs?before=20000-01-01T00:00:00Z~x",
                     "/api/tasks/free/explain?at=20000-01-01T00:00:00Z"):  # fmt: skip
            status, body = server.get(path)
            assert status == 400, (path, status, body[-2000:])
        for path in ("/runs/r-nan", "/runs/r-long-out", "/runs/x%2F..%2F..%2Fetc"):
            assert server.get(path)[0] in (400, 404), path
