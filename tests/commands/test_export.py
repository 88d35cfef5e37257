"""`cronctl export`: systemd units checked by systemd itself, CronJobs checked field by field."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cronctl import load
from tests.helpers import Cli, write_schedule

BASE = "2026-03-20T10:00:30Z"  # spans Europe/Berlin's spring-forward on 2026-03-29
TASKS = [
    'name = "backup"\ncommand = "true"\ndaily_at = "02:30"\ntimezone = "Europe/Berlin"',
    'name = "digest"\ncommand = ["echo", "a \\"quoted\\" $HOME 100%"]\ndaily_at = "09:00"\n'
    'weekdays = true\ntimezone = "America/New_York"',
    'name = "refresh"\ncommand = "echo $PATH"\ncron = "*/5 8-18 * * MON-FRI"\n'
    'without_overlapping = true\ntimeout = "4m"\nmisfire = "skip"',
    'name = "thirteenth"\ncommand = "true"\ncron = "0 0 13 * 5"',
    'name = "quarter"\ncommand = "true"\nevery_minutes = 15\ntimezone = "+05:00"',
    'name = "odd-zone"\ncommand = "true"\nhourly_at = 7\ntimezone = "+05:30"',
    'name = "billing"\ncommand = "true"\nmonthly_on = [1, "06:00"]\nmisfire = "catch-up"\n'
    'misfire_grace = "2d"\nwhen = "test -e /etc/hostname"',
    'name = "wild"\ncommand = "true"\ncron = "*/20 1-3 * * *"\ntimezone = "Europe/Berlin"',
    'name = "Old_Job:v2"\ncommand = "true"\nyearly = true\npaused = true\non_one_server = true',
    'name = "launch"\ncommand = "true"\nat = 2026-04-01T09:00:00Z',
]


@pytest.fixture
def schedule(tmp_path: Path) -> Path:
    return write_schedule(tmp_path / "schedules.toml", TASKS)


def _systemd_next(expression: str, count: int) -> list[datetime]:
    base = BASE.replace("T", " ").replace("Z", " UTC")
    out = subprocess.run(
        ["systemd-analyze", "calendar", f"--iterations={count}", f"--base-time={base}",
         expression],
        capture_output=True, text=True, check=True, env={"TZ": "UTC", "PATH": "/usr/bin:/bin"},
    ).stdout  # fmt: skip
    found = re.findall(r"(?:Next elapse|Iter\. #\d+): \w+ (\S+ \S+) UTC", out)
    return [datetime.fromisoformat(f"{f}+00:00") for f in found]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemd_timers_fire_when_cronctl_would_for_every_exported_task(
    cli: Cli, schedule: Path, tmp_path: Path
) -> None:
    out = tmp_path / "units"
    result = cli("export", "--to", "systemd", "-f", str(schedule), "-o", str(out), "--now", BASE)
    assert result.returncode == 0, result.stderr
    base = datetime.fromisoformat(BASE)
    tasks = load(schedule).tasks
    compared = 0
    for task in tasks:
        timer = out / f"cronctl-{task.name.replace(':', '-')}.timer"
        if task.name == "odd-zone":
            assert not timer.exists()
            assert "task odd-zone: NOT EXPORTED: timezone +05:30" in result.stderr
            continue
        calendars = re.findall(r"^OnCalendar=(.*)$", timer.read_text(), re.M)
        count = 40
        fired = sorted({t for c in calendars for t in _systemd_next(c, count)})[:count]
        expected = task.next_runs(base, count)
        if task.name == "backup":
            # 02:30 does not exist in Berlin on 2026-03-29: cronctl runs at 03:00 (Debian's
            # rule), systemd skips the day; the export lists it.
            gap = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
            assert gap in expected and not [t for t in fired if t.date() == gap.date()]
            assert "task backup: not expressed: DST rule (dst-gap)" in result.stderr
            expected = [t for t in expected if t != gap]
        assert fired[: len(expected)] == expected[: len(fired)], task.name
        compared += 1
    assert compared == len(tasks) - 1


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemd_units_pass_systemd_analyze_verify(
    cli: Cli, schedule: Path, tmp_path: Path
) -> None:
    out = tmp_path / "units"
    cli("export", "--to", "systemd", "-f", str(schedule), "-o", str(out), "--now", BASE)
    units = sorted(str(p) for p in out.iterdir())
    assert len(units) == 18
    verify = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *units],
        capture_output=True, text=True, check=False, cwd=out,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stderr
    service = (out / "cronctl-digest.service").read_text()
    assert 'ExecStart="echo" "a \\"quoted\\" $$HOME 100%%"' in service
    refresh = (out / "cronctl-refresh.service").read_text()
    assert "TimeoutStartSec=240" in refresh and "$$PATH" in refresh
    assert "Persistent=false" in (out / "cronctl-refresh.timer").read_text()
    billing = (out / "cronctl-billing.service").read_text()
    assert 'ExecCondition="/bin/sh" -c "test -e /etc/hostname"' in billing


def _cronjobs(text: str) -> dict[str, str]:
    docs = text.split("\n---\n")
    return {re.search(r'cronctl/task: "(.*)"', d).group(1): d for d in docs}  # type: ignore[union-attr]


def test_kubernetes_cronjobs_carry_schedule_zone_and_guards(cli: Cli, schedule: Path) -> None:
    result = cli("export", "--to", "kubernetes", "--image", "registry.example/app:1",
                 "-f", str(schedule), "--now", BASE)  # fmt: skip
    assert result.returncode == 0, result.stderr
    jobs = _cronjobs(result.stdout)
    assert "launch" not in jobs and "odd-zone" not in jobs
    assert "task launch: NOT EXPORTED: one-shot `at` task" in result.stderr
    refresh = jobs["refresh"]
    assert 'schedule: "*/5 8-18 * * 1-5"' in refresh and 'timeZone: "UTC"' in refresh
    assert "concurrencyPolicy: Forbid" in refresh and "startingDeadlineSeconds: 60" in refresh
    assert "activeDeadlineSeconds: 240" in refresh
    assert 'image: "registry.example/app:1"' in refresh
    assert 'command: ["/bin/sh", "-c", "echo $PATH"]' in refresh
    assert 'timeZone: "Etc/GMT-5"' in jobs["quarter"]
    billing = jobs["billing"]
    assert "startingDeadlineSeconds: 172800" in billing and "concurrencyPolicy: Allow" in billing
    assert "task billing: not expressed: when condition" in result.stderr
    old = jobs["Old_Job:v2"]
    assert 'name: "old-job-v2"' in old and "suspend: true" in old
    assert "task Old_Job:v2: not expressed: on_one_server" in result.stderr
    # Each value is a JSON string, which YAML reads as the same double-quoted scalar.
    line = next(x for x in jobs["digest"].splitlines() if "command:" in x)
    assert json.loads(line.split("command: ", 1)[1]) == ["echo", 'a "quoted" $HOME 100%']


def test_export_refuses_unknown_target_and_missing_image(cli: Cli, schedule: Path) -> None:
    result = cli("export", "--to", "cron", "-f", str(schedule))
    assert result.returncode == 2 and "use systemd or kubernetes" in result.stderr
    result = cli("export", "--to", "kubernetes", "-f", str(schedule))
    assert result.returncode == 2 and "needs --image IMAGE" in result.stderr


def test_export_never_overwrites_without_force(cli: Cli, schedule: Path, tmp_path: Path) -> None:
    out = tmp_path / "units"
    assert cli("export", "--to", "systemd", "-f", str(schedule), "-o", str(out)).returncode == 0
    again = cli("export", "--to", "systemd", "-f", str(schedule), "-o", str(out))
    assert again.returncode == 2 and "pass --force" in again.stderr
    forced = cli("export", "--to", "systemd", "-f", str(schedule), "-o", str(out), "--force")
    assert forced.returncode == 0


def test_only_settings_a_task_uses_are_listed_as_not_expressed(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "plain"\ncommand = "true"\nhourly = true',
            'name = "quiet"\ncommand = "true"\nhourly = true\nnotify = "change"',
        ],
    )
    result = cli("export", "--to", "systemd", "-o", "units")
    assert result.returncode == 0, result.stderr
    assert "task plain" not in result.stderr  # notify's default loses nothing
    assert "task quiet: not expressed: notify" in result.stderr


def test_the_target_and_directory_are_arguments(cli: Cli, schedule: Path, tmp_path: Path) -> None:
    out = tmp_path / "units"
    result = cli("export", "systemd", str(out), "-f", str(schedule), "--now", BASE)
    assert result.returncode == 0, result.stderr
    old = cli("export", "--to", "systemd", "-f", str(schedule), "-o", str(tmp_path / "old"),
              "--now", BASE)  # fmt: skip
    assert old.returncode == 0, old.stderr  # the options still work, for scripts
    made = sorted(p.name for p in out.iterdir())
    assert "cronctl-backup.timer" in made and made == sorted(
        p.name for p in (tmp_path / "old").iterdir()
    )
    assert (out / "cronctl-backup.timer").read_text() == (
        tmp_path / "old" / "cronctl-backup.timer"
    ).read_text()
    jobs = cli("export", "kubernetes", "--image", "img:1", "-f", str(schedule), "--now", BASE)
    assert jobs.returncode == 0 and "kind: CronJob" in jobs.stdout, jobs.stderr


def test_a_missing_target_says_how_to_name_it(cli: Cli, schedule: Path) -> None:
    result = cli("export", "-f", str(schedule))
    assert result.returncode == 2
    assert "Missing option" not in result.stderr
    assert "name the target: `cronctl export systemd [DIR]` or `cronctl export kubernetes" in (
        result.stderr
    )
    twice = cli("export", "systemd", "--to", "kubernetes", "-f", str(schedule))
    assert twice.returncode == 2 and "given twice" in twice.stderr
    unknown = cli("export", "cron", "-f", str(schedule))
    assert unknown.returncode == 2 and "'cron' is not an export target" in unknown.stderr
