"""`cronctl export`: systemd units checked by systemd itself, CronJobs checked field by field."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
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
    result = cli("export", "--to", "systemd", "--user", "app", "-f", str(schedule), "-o", str(out),
                 "--now", BASE)  # fmt: skip
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
    cli("export", "--to", "systemd", "--user", "app", "-f", str(schedule), "-o", str(out),
        "--now", BASE)  # fmt: skip
    units = sorted(str(p) for p in out.iterdir())
    assert len(units) == 18
    verify = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *units],
        capture_output=True, text=True, check=False, cwd=out,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stderr
    service = (out / "cronctl-digest.service").read_text()
    assert 'ExecStart="/usr/bin/env" "echo" "a \\"quoted\\" $$HOME 100%%"' in service
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
    # A CronJob runs once per occurrence in its cluster: on_one_server loses nothing there.
    assert "on_one_server" not in result.stderr and "on_one_server" not in result.stdout
    # Each value is a JSON string, which YAML reads as the same double-quoted scalar.
    line = next(x for x in jobs["digest"].splitlines() if "command:" in x)
    assert json.loads(line.split("command: ", 1)[1]) == ["echo", 'a "quoted" $HOME 100%']


def test_export_refuses_unknown_target_and_missing_image(cli: Cli, schedule: Path) -> None:
    result = cli("export", "--to", "cron", "-f", str(schedule))
    assert result.returncode == 2 and "use systemd or kubernetes" in result.stderr
    result = cli("export", "--to", "kubernetes", "-f", str(schedule))
    assert result.returncode == 2 and "needs --image IMAGE" in result.stderr
    result = cli(
        "export", "--to", "kubernetes", "--image", "x", "--user", "app", "-f", str(schedule)
    )
    assert result.returncode == 2 and "--user is for systemd" in result.stderr


def test_export_never_overwrites_without_force(cli: Cli, schedule: Path, tmp_path: Path) -> None:
    out = tmp_path / "units"
    args = ("export", "--to", "systemd", "--user", "app", "-f", str(schedule), "-o", str(out))
    assert cli(*args).returncode == 0
    again = cli(*args)
    assert again.returncode == 2 and "pass --force" in again.stderr
    forced = cli(*args, "--force")
    assert forced.returncode == 0


def test_only_settings_a_task_uses_are_listed_as_not_expressed(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        [
            'name = "plain"\ncommand = "true"\nhourly = true',
            'name = "quiet"\ncommand = "true"\nhourly = true\nnotify = "change"',
        ],
    )
    result = cli("export", "--to", "systemd", "--user", "app", "-o", "units")
    assert result.returncode == 0, result.stderr
    assert "task plain" not in result.stderr  # notify's default loses nothing
    assert "task quiet: not expressed: notify" in result.stderr


def test_resource_caps_are_named_as_not_expressed(cli: Cli, tmp_path: Path) -> None:
    write_schedule(
        tmp_path / "schedules.toml",
        ['name = "capped"\ncommand = "true"\nhourly = true\nmemory_max = "1GB"\nnice = 5'],
    )
    result = cli("export", "--to", "systemd", "--user", "app", "-o", "units")
    assert result.returncode == 0, result.stderr
    assert "task capped: not expressed: memory_max, nice: not exported; set the target's" in (
        result.stderr
    )


def test_the_count_of_files_written_is_said_in_words_that_fit_it(cli: Cli, tmp_path: Path) -> None:
    write_schedule(tmp_path / "schedules.toml", ['name = "one"\ncommand = "true"\nhourly = true'])
    one = cli("export", "kubernetes", "jobs", "--image", "app:1")
    assert one.returncode == 0 and one.stderr.startswith("wrote 1 file to jobs\n"), one.stderr
    two = cli("export", "systemd", "units", "--user", "app")
    assert "wrote 2 files to units" in two.stderr  # a .service and a .timer


def test_the_target_and_directory_are_arguments(cli: Cli, schedule: Path, tmp_path: Path) -> None:
    out = tmp_path / "units"
    result = cli("export", "systemd", str(out), "--user", "app", "-f", str(schedule),
                 "--now", BASE)  # fmt: skip
    assert result.returncode == 0, result.stderr
    old = cli("export", "--to", "systemd", "--user", "app", "-f", str(schedule),
              "-o", str(tmp_path / "old"), "--now", BASE)  # fmt: skip
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
    assert "name the target: `cronctl export systemd [DIR] --user NAME` or `cronctl export" in (
        result.stderr
    )
    twice = cli("export", "systemd", "--to", "kubernetes", "-f", str(schedule))
    assert twice.returncode == 2 and "given twice" in twice.stderr
    unknown = cli("export", "cron", "-f", str(schedule))
    assert unknown.returncode == 2 and "'cron' is not an export target" in unknown.stderr


PROGRAMS = [
    'name = "bashy"\ncommand = "echo $0"\nshell = "bash"\nhourly = true\nskip = "test -e /x"',
    'name = "script"\ncommand = ["./bin/report", "--all"]\ndaily_at = "01:00"',
    'name = "plain"\ncommand = "true"\nhourly = true\nwhen = "true"',
]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemd_services_run_as_the_given_user_with_absolute_programs(
    cli: Cli, tmp_path: Path
) -> None:
    path = write_schedule(tmp_path / "schedules.toml", PROGRAMS)
    out = tmp_path / "units"
    result = cli("export", "--to", "systemd", "--user", "www-data", "-f", str(path), "-o", str(out))
    assert result.returncode == 0, result.stderr
    verify = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *sorted(str(p) for p in out.iterdir())],
        capture_output=True, text=True, check=False, cwd=out,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stderr
    services = {p.stem: p.read_text() for p in out.glob("*.service")}
    assert len(services) == 3
    for name, text in services.items():
        assert re.findall(r"^User=(.*)$", text, re.M) == ["www-data"], name
        # systemd ignores PATH for a bare name and refuses ./x: every program is absolute.
        for line in re.findall(r"^Exec\w+=(.*)$", text, re.M):
            assert line.startswith('"/'), (name, line)
    bashy = services["cronctl-bashy"]
    assert 'ExecStart="/usr/bin/env" "bash" -c "echo $$0"' in bashy
    assert 'ExecCondition="/usr/bin/env" "bash" -c "! { test -e /x' in bashy
    assert 'ExecStart="/usr/bin/env" "./bin/report" "--all"' in services["cronctl-script"]
    plain = services["cronctl-plain"]
    assert 'ExecStart="/bin/sh" -c "true"' in plain and 'ExecCondition="/bin/sh" -c' in plain


def test_systemd_export_needs_a_user_and_refuses_one_that_is_no_name(
    cli: Cli, tmp_path: Path
) -> None:
    path = write_schedule(tmp_path / "schedules.toml", PROGRAMS[2:])
    missing = cli("export", "--to", "systemd", "-f", str(path))
    assert missing.returncode == 2 and not missing.stdout
    assert "systemd needs --user NAME" in missing.stderr and "root" in missing.stderr
    for bad in ("a b", "app\nUser=root", "%i", "-x", "a" * 33, "4294967295", ""):
        result = cli("export", "--to", "systemd", "--user", bad, "-f", str(path))
        assert result.returncode == 2 and not result.stdout, bad
        assert "--user" in result.stderr and "use a user name" in result.stderr, bad
    for good in ("root", "0", "svc.cron_1-a", "a"):
        result = cli("export", "--to", "systemd", "--user", good, "-f", str(path))
        assert result.returncode == 0, result.stderr
        assert f"\nUser={good}\n" in result.stdout


DEADLINES = [
    'name = "nightly"\ncommand = "true"\ndaily_at = "02:30"\ntimezone = "Europe/Berlin"',
    'name = "often"\ncommand = "true"\nevery_minutes = 5\nmisfire_grace = "1d"',
    'name = "late-ok"\ncommand = "true"\nmonthly_on = [1, "06:00"]\nmisfire_grace = "2d"',
    'name = "now-only"\ncommand = "true"\nhourly = true\nmisfire = "skip"',
    'name = "catchup"\ncommand = "true"\ncron = "*/10 9-17 * * 1-5"\nmisfire = "catch-up"',
    'name = "shared"\ncommand = "true"\nhourly = true\non_one_server = true',
]


def test_every_cronjob_has_a_starting_deadline_spanning_fewer_than_100_runs(
    cli: Cli, tmp_path: Path
) -> None:
    yaml = pytest.importorskip("yaml")
    path = write_schedule(tmp_path / "schedules.toml", DEADLINES)
    result = cli("export", "--to", "kubernetes", "--image", "img", "-f", str(path), "--now", BASE)
    assert result.returncode == 0, result.stderr
    jobs = {
        d["metadata"]["annotations"]["cronctl/task"]: d["spec"]
        for d in yaml.safe_load_all(result.stdout)
    }
    deadlines = {name: spec["startingDeadlineSeconds"] for name, spec in jobs.items()}
    assert set(deadlines) == {t.split('"')[1] for t in DEADLINES}
    base = datetime.fromisoformat(BASE)
    for task in load(path).tasks:
        runs = task.next_runs(base, 2000)
        deadline = deadlines[task.name]
        assert isinstance(deadline, int) and deadline >= 60, task.name
        # However long the controller was away, the deadline holds fewer than 100 starts.
        most = max(sum(1 for r in runs[i:] if r - runs[i] < timedelta(seconds=deadline))
                   for i in range(0, len(runs), 7))  # fmt: skip
        assert most < 100, task.name
    assert deadlines["now-only"] == 60  # skip: only a run due this minute
    assert deadlines["late-ok"] == 2 * 86400  # misfire_grace, well under 100 months
    assert deadlines["often"] == 90 * 300  # a day of 5-minute runs is 288: cut, and said
    assert "task often: not expressed: misfire_grace (1d): cut to 7h30m" in result.stderr
    # coalesce, catch-up: as late as Kubernetes allows (it starts only the latest missed).
    assert deadlines["nightly"] >= 80 * 86400 and deadlines["catchup"] == 90 * 600
    # A CronJob runs once per occurrence in its cluster: nothing to say about on_one_server.
    assert "on_one_server" not in result.stderr + result.stdout


def _kubelet_expands(text: str, env: dict[str, str]) -> str:
    """What a kubelet makes of a container's command or env value, as the Kubernetes API
    reference gives it: `$(VAR)` becomes the variable's value (left as it is when unset),
    `$$` becomes `$`, every other character stays."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text):
            if text[i + 1] == "$":
                out.append("$")
                i += 2
                continue
            end = text.find(")", i + 2) if text[i + 1] == "(" else -1
            if end != -1:
                name = text[i + 2 : end]
                out.append(env.get(name, f"$({name})"))
                i = end + 1
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def test_kubernetes_runs_commands_and_env_values_as_written(cli: Cli, tmp_path: Path) -> None:
    yaml = pytest.importorskip("yaml")
    shell = "echo $(CRONCTL_TASK) $$ $(date +%F) $HOME cost: 5$ ./bin/backup.sh"
    argv = ["printf", "%s", "$(HOME)", "$$(x)", "$"]
    write_schedule(
        tmp_path / "schedules.toml",
        [
            f'name = "shell"\ncommand = {json.dumps(shell)}\nhourly = true\n'
            'env = { GREETING = "hi $(CRONCTL_TASK) $$" }',
            f'name = "array"\ncommand = {json.dumps(argv)}\nhourly = true',
        ],
    )
    result = cli("export", "kubernetes", "--image", "img", "--now", BASE)
    assert result.returncode == 0, result.stderr
    for doc in yaml.safe_load_all(result.stdout):
        [container] = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e["value"] for e in container["env"]}
        # The kubelet expands each env value with those before it, then the command.
        seen: dict[str, str] = {}
        for name, value in env.items():
            seen[name] = _kubelet_expands(value, seen)
        ran = [_kubelet_expands(arg, seen) for arg in container["command"]]
        if doc["metadata"]["name"] == "shell":
            assert ran == ["/bin/sh", "-c", shell]
            assert seen["GREETING"] == "hi $(CRONCTL_TASK) $$"
        else:
            assert ran == argv
    # The schedule's folder is the default working directory; no image holds it.
    assert (
        f"task shell: not expressed: working directory: the default, the schedule's folder "
        f"({tmp_path}), is not in the image" in result.stderr
    )
