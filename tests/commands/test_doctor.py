"""`cronctl doctor` agrees with `check` and `run`, and says what calls cronctl here."""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers import Cli, write_schedule

NOW = "2026-03-02T10:00:00Z"
HOURLY = 'name = "hourly"\ncron = "0 * * * *"\ncommand = "true"'
BROKEN = 'name = "broken"\ncron = "99 * * * *"\ncommand = "true"'
ONE_SERVER = 'name = "backup"\ncron = "0 3 * * *"\ncommand = "true"\non_one_server = true'


def _no_crontab(tmp_path: Path) -> dict[str, str]:
    """An empty place to look in, and a `crontab` on PATH that has no crontab for us."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True, exist_ok=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "crontab"
    fake.write_text('#!/bin/sh\n[ -f "$FAKE_CRONTAB" ] && exec cat "$FAKE_CRONTAB"\nexit 1\n')
    fake.chmod(0o755)
    return {
        "CRONCTL_DOCTOR_ROOT": str(root),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_CRONTAB": str(tmp_path / "my-crontab"),
    }


def test_a_schedule_run_refuses_is_not_ok(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", [HOURLY, BROKEN])
    env = _no_crontab(tmp_path)
    doctor = cli("doctor", "--now", NOW, env=env)
    assert doctor.returncode == 1, doctor.stdout
    assert "PROBLEM schedule: " in doctor.stdout
    assert "99 is out of range in the minute field" in doctor.stdout
    assert cli("check", "--now", NOW).returncode == 1
    assert cli("run", "--now", NOW, env=env).returncode == 2


def test_a_good_schedule_is_ok(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", [HOURLY])
    doctor = cli("doctor", "--now", NOW, env=_no_crontab(tmp_path))
    assert doctor.returncode == 0, doctor.stdout
    assert "ok      schedule: schedules.toml: 1 task, no problems" in doctor.stdout
    assert "note    callers: no crontab line or systemd unit" in doctor.stdout


def test_the_lock_dir_verdict_matches_check_before_the_first_run(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", [ONE_SERVER])
    state_dir = Path(cli.env["CRONCTL_STATE_DIR"])
    assert not state_dir.exists()
    check = cli("check", "--now", NOW)
    assert "lock_dir" in check.stdout + check.stderr and "only this machine" in check.stdout
    doctor = cli("doctor", "--now", NOW, env=_no_crontab(tmp_path))
    assert doctor.returncode == 1, doctor.stdout
    assert "PROBLEM lock_dir sharing: lock_dir " in doctor.stdout
    assert "shared, or no task needs it" not in doctor.stdout
    assert not state_dir.exists(), "doctor created the state directory"


def test_it_finds_crontab_lines_and_units_that_call_cronctl(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", [HOURLY])
    env = _no_crontab(tmp_path)
    root = Path(env["CRONCTL_DOCTOR_ROOT"])
    (tmp_path / "my-crontab").write_text(
        "MAILTO=ops\n# * * * * * cronctl run  (commented out)\n"
        "* * * * * cd /srv/app && cronctl run\n"
    )
    (root / "etc/crontab").write_text("17 * * * * root cd / && run-parts /etc/cron.hourly\n")
    (root / "etc/cron.d").mkdir()
    (root / "etc/cron.d/app").write_text("* * * * * app /opt/venv/bin/cronctl -v run\n")
    unreadable = root / "etc/cron.d/secret"
    unreadable.write_text("* * * * * root cronctl run\n")
    unreadable.chmod(0)
    units = root / "etc/systemd/system"
    units.mkdir(parents=True)
    (units / "cronctl.service").write_text(
        "[Service]\nUser=app\nExecStart=/opt/venv/bin/cronctl work -f /srv/app/s.toml\n"
    )
    (units / "other.service").write_text("[Service]\nExecStart=/usr/bin/cronctl-like status\n")
    (units / "broken").mkdir()  # a directory where a unit file would be: skipped
    doctor = cli("doctor", "--now", NOW, env=env)
    assert doctor.returncode == 0, doctor.stdout
    line = next(ln for ln in doctor.stdout.splitlines() if "callers:" in ln)
    assert line.startswith("ok      callers: ")
    assert "crontab -l:3: * * * * * cd /srv/app && cronctl run" in line
    assert f"{root}/etc/cron.d/app:1: * * * * * app /opt/venv/bin/cronctl -v run" in line
    assert f"{units}/cronctl.service:3: ExecStart=/opt/venv/bin/cronctl work" in line
    assert "other.service" not in line and "commented out" not in line
    assert "run-parts" not in line
    if os.geteuid() != 0:  # root reads a mode-0 file; others must skip it quietly
        assert "secret" not in line


def test_unreadable_places_never_fail_it(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", [HOURLY])
    env = _no_crontab(tmp_path)
    root = Path(env["CRONCTL_DOCTOR_ROOT"])
    (root / "etc/cron.d").write_text("not a directory")
    (root / "etc/crontab").mkdir()  # a directory where the file would be
    (tmp_path / "bin/crontab").write_text("#!/bin/sh\nexec sleep 0\n")
    doctor = cli("doctor", "--now", NOW, env={**env, "HOME": "/nonexistent"})
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "note    callers:" in doctor.stdout


def test_acknowledged_warnings_are_counted_not_shown_and_do_not_fail(
    cli: Cli, tmp_path: Path
) -> None:
    night = 'name = "night"\ncron = "30 2 * * *"\ncommand = "true"'
    zone = '[defaults]\ntimezone = "Europe/Berlin"\n'
    write_schedule(tmp_path / "schedules.toml", [night, HOURLY], zone)
    env = _no_crontab(tmp_path)
    warned = cli("doctor", "--now", NOW, env=env)
    assert warned.returncode == 1, warned.stdout
    assert warned.stdout.count("WARN    schedule: ") == 2  # the gap and the overlap; not hourly
    assert "[dst-gap]" in warned.stdout and "add its code to the task's ignore_warnings" in (
        warned.stdout
    )
    accepted = zone + 'ignore_warnings = ["dst-gap", "dst-overlap"]\n'
    write_schedule(tmp_path / "schedules.toml", [night, HOURLY], accepted)
    doctor = cli("doctor", "--now", NOW, env=env)
    assert doctor.returncode == 0, doctor.stdout
    assert "WARN" not in doctor.stdout
    assert "ok      schedule: schedules.toml: 2 tasks, no problems" in doctor.stdout
    assert "note    schedule: 2 warnings acknowledged by ignore_warnings" in doctor.stdout
