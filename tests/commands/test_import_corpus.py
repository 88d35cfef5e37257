"""`cronctl import` on a corpus of real-world crontabs, compared exactly.

tests/data/crontabs holds NAME.crontab files; a name starting with ``system-``
is in the system format (a user field, as /etc/crontab and /etc/cron.d/*).
Next to each: NAME.expected.toml (the schedule file written) and
NAME.expected.report (the report, one `CRONTAB:LINE: message` line each).

To regenerate the expected files after a deliberate change, run::

    CRONCTL_REGEN=1 pytest tests/commands/test_import_corpus.py

then read every changed file (git diff) before committing: the expected files
are the specification, not a snapshot to wave through.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from cronctl import load
from cronctl.commands.importer import ImportResult, import_crontab

REPO_ROOT = Path(__file__).resolve().parents[2]
CORPUS = REPO_ROOT / "tests" / "data" / "crontabs"
CRONTABS = sorted(CORPUS.glob("*.crontab"))
REGENERATE = os.environ.get("CRONCTL_REGEN") == "1"
#: The environment of a `cronctl` process: this checkout's code, whatever is installed.
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
)}  # fmt: skip


def cronctl_import(
    *args: str, cwd: Path, stdin: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `cronctl import ARGS` as a real process; the one place that says how."""
    completed = subprocess.run(
        [sys.executable, "-m", "cronctl", "import", *args],
        cwd=cwd,
        env=ENV,
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )
    return subprocess.CompletedProcess(
        completed.args,
        completed.returncode,
        completed.stdout.decode("utf-8"),
        completed.stderr.decode("utf-8"),
    )


def _expected(crontab: Path, kind: str) -> Path:
    return crontab.with_name(f"{crontab.stem}.expected.{kind}")


def _convert(crontab: Path) -> ImportResult:
    text = crontab.read_bytes().decode("utf-8")
    # As root would run the file: a system line for another user runs through runuser.
    system = crontab.name.startswith("system-")
    return import_crontab(text, system=system, source_name=crontab.name, run_as="root")


def _report_text(result: ImportResult) -> str:
    return "".join(f"{line}\n" for line in result.report)


def _read(path: Path) -> str:
    # newline="" keeps "\r\n" if a checkout ever added it, so the comparison says so.
    with path.open(encoding="utf-8", newline="") as handle:
        return handle.read()


@pytest.mark.parametrize("crontab", CRONTABS, ids=[c.stem for c in CRONTABS])
def test_crontab_converts_to_the_expected_toml_and_report(crontab: Path) -> None:
    result = _convert(crontab)
    toml_file, report_file = _expected(crontab, "toml"), _expected(crontab, "report")
    if REGENERATE:
        toml_file.write_text(result.toml, encoding="utf-8", newline="")
        report_file.write_text(_report_text(result), encoding="utf-8", newline="")
        pytest.skip(f"regenerated {toml_file.name} and {report_file.name}: review them")
    assert result.toml == _read(toml_file)
    assert _report_text(result) == _read(report_file)


@pytest.mark.parametrize("crontab", CRONTABS, ids=[c.stem for c in CRONTABS])
def test_exit_status_is_1_exactly_when_the_report_leaves_something_out(crontab: Path) -> None:
    result = _convert(crontab)
    left_out = any(": left out: " in line for line in result.report)
    assert result.exit_status == (1 if left_out else 0)


@pytest.mark.parametrize("crontab", CRONTABS, ids=[c.stem for c in CRONTABS])
def test_expected_toml_loads_without_errors(crontab: Path, tmp_path: Path) -> None:
    toml_file = _expected(crontab, "toml")
    target = tmp_path / "schedules.toml"
    target.write_bytes(toml_file.read_bytes())
    schedule = load(target)
    assert schedule.errors == []
    assert len(schedule.tasks) == _convert(crontab).tasks


def test_corpus_covers_both_formats_crlf_tabs_percent_and_macros() -> None:
    assert len(CRONTABS) >= 15
    assert sum(c.name.startswith("system-") for c in CRONTABS) >= 5
    assert sum(not c.name.startswith("system-") for c in CRONTABS) >= 10
    texts = {c.name: c.read_bytes() for c in CRONTABS}
    # A checkout that normalized line endings would quietly drop the CRLF case.
    assert b"\r\n" in texts["crlf-line-endings.crontab"]
    assert any(b"\t" in t for t in texts.values())
    assert any(b"\\%" in t for t in texts.values())
    assert any(b"@reboot" in t for t in texts.values())
    for crontab in CRONTABS:
        assert _expected(crontab, "toml").is_file(), f"run CRONCTL_REGEN=1 for {crontab.name}"
        assert _expected(crontab, "report").is_file(), f"run CRONCTL_REGEN=1 for {crontab.name}"


def test_every_task_name_in_the_corpus_is_unique_within_its_file() -> None:
    import tomllib

    for crontab in CRONTABS:
        tasks = tomllib.loads(_read(_expected(crontab, "toml"))).get("task", [])
        names = [t["name"] for t in tasks]
        assert len(names) == len(set(names)), crontab.name


# --- The real CLI, as a process ------------------------------------------------------


def test_cli_writes_toml_to_stdout_and_the_report_to_stderr() -> None:
    crontab = CORPUS / "backups-percent-signs.crontab"
    run = cronctl_import(crontab.name, cwd=CORPUS)
    assert run.returncode == 1  # bare '%' lines were left out
    assert run.stdout == _read(_expected(crontab, "toml"))
    assert run.stderr == _read(_expected(crontab, "report"))


def test_cli_shows_the_crontabs_control_characters_in_the_report_never_sends_them() -> None:
    crontab = CORPUS / "control-characters.crontab"
    run = cronctl_import(crontab.name, cwd=CORPUS)
    assert run.returncode == 1
    assert "\x1b" not in run.stderr
    assert "MAILTO=ops^[[2J@example.com has no equivalent" in run.stderr


def test_cli_exits_0_when_everything_converted() -> None:
    crontab = CORPUS / "system-debian-etc-crontab.crontab"
    run = cronctl_import("--system", "--user", "root", crontab.name, cwd=CORPUS)
    assert run.returncode == 0
    assert run.stdout == _read(_expected(crontab, "toml"))
    assert run.stderr == _read(_expected(crontab, "report"))


def test_cli_reads_standard_input_for_dash() -> None:
    crontab = CORPUS / "crlf-line-endings.crontab"
    run = cronctl_import("-", cwd=CORPUS, stdin=crontab.read_bytes())
    assert run.returncode == 1
    expected_report = _read(_expected(crontab, "report")).replace(crontab.name, "<stdin>")
    assert run.stderr == expected_report
    assert run.stdout == _read(_expected(crontab, "toml")).replace(crontab.name, "<stdin>")


def test_cli_output_file_is_never_overwritten_without_force(tmp_path: Path) -> None:
    crontab = CORPUS / "django-app.crontab"
    target = tmp_path / "schedules.toml"
    target.write_text("# mine\n", encoding="utf-8")

    refused = cronctl_import(crontab.name, "-o", str(target), cwd=CORPUS)
    assert refused.returncode == 2
    assert refused.stderr == (
        f"cronctl: error: {target} already exists; pass --force to overwrite it\n"
    )
    assert target.read_text(encoding="utf-8") == "# mine\n"

    forced = cronctl_import(crontab.name, "-o", str(target), "--force", cwd=CORPUS)
    assert forced.returncode == 0
    assert forced.stdout == ""
    assert target.read_text(encoding="utf-8") == _read(_expected(crontab, "toml"))
    assert "wrote" in forced.stderr and "cronctl check -f" in forced.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["schedules.toml"]


def test_cli_output_passes_cronctl_check(tmp_path: Path) -> None:
    target = tmp_path / "imported.toml"
    crontab = CORPUS / "system-cron-d-app-several-users.crontab"
    run = cronctl_import(
        "--system", "--user", "root", str(crontab), "-o", str(target), cwd=tmp_path
    )
    assert run.returncode == 1  # MAILTO was left out
    env = {**ENV, "CRONCTL_STATE_DIR": str(tmp_path / "state")}
    check = subprocess.run(
        [sys.executable, "-m", "cronctl", "check", "-f", str(target)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize(
    ("argument", "reason"),
    [("no-such.crontab", "No such file or directory"), (".", "Is a directory")],
)
def test_cli_unreadable_crontab_exits_2_without_traceback(argument: str, reason: str) -> None:
    run = cronctl_import(argument, cwd=CORPUS)
    assert run.returncode == 2
    assert run.stderr == f"cronctl: error: cannot read {argument}: {reason}\n"
    assert run.stdout == ""


def test_cli_non_utf8_crontab_exits_2_naming_the_line(tmp_path: Path) -> None:
    (tmp_path / "latin1.crontab").write_bytes(b"# ok\n0 3 * * * echo caf\xe9\n")
    run = cronctl_import("latin1.crontab", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.startswith("cronctl: error: latin1.crontab:2: not UTF-8 text (byte 0xe9)")
    assert "Traceback" not in run.stderr


# --- Who runs a job: `import --system` keeps each line's user -------------------------

THREE_USERS = CORPUS / "system-three-users.crontab"


def test_other_users_lines_are_left_out_with_skip_other_users_naming_each() -> None:
    run = cronctl_import("--system", "--user", "root", "--skip-other-users", THREE_USERS.name,
                         cwd=CORPUS)  # fmt: skip
    assert run.returncode == 1
    left = [line for line in run.stderr.splitlines() if ": left out: " in line]
    assert [line.split(":")[1] for line in left] == ["6", "9", "10", "16"]
    assert "left out: it runs as user 'postgres', and cronctl will run as 'root': " in left[0]
    assert "--skip-other-users leaves it out" in left[0]
    assert "runuser" not in run.stdout.split("\n\n", 1)[1]  # past the header: no task wraps
    assert 'command = "/usr/local/sbin/rotate-backups --keep 14"' in run.stdout
    assert run.stdout.count("[[task]]") == 1


def test_a_user_who_is_not_root_keeps_only_their_own_lines() -> None:
    run = cronctl_import("--system", "--user", "www-data", THREE_USERS.name, cwd=CORPUS)
    assert run.returncode == 1
    assert "cronctl will run as 'www-data': 'www-data' cannot switch to another user " in (
        run.stderr
    )
    assert run.stderr.count(": left out: ") == 3  # the two postgres lines and root's
    assert "lines 9, 10 ran as user 'www-data'; the user cronctl will run as" in run.stderr
    assert "runuser" not in run.stdout.split("\n\n", 1)[1]
    assert run.stdout.count("[[task]]") == 2


def test_the_importing_user_is_the_default_and_a_bad_user_is_refused() -> None:
    run = cronctl_import("--system", THREE_USERS.name, cwd=CORPUS)
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert f"running as {me}:" in run.stdout
    bad = cronctl_import("--system", "--user", "-rf", THREE_USERS.name, cwd=CORPUS)
    assert (bad.returncode, bad.stdout) == (2, "")
    assert "--user '-rf' is not a user name" in bad.stderr


def test_a_reboot_line_left_out_is_not_also_said_to_be_converted(tmp_path: Path) -> None:
    (tmp_path / "c.crontab").write_text(
        "@reboot www-data /usr/local/bin/warm\n@reboot root /usr/local/bin/mount-all\n"
        "@reboot root date +%F\n"  # a bare %: left out too
    )
    run = cronctl_import("--system", "--user", "root", "--skip-other-users", "c.crontab",
                         cwd=tmp_path)  # fmt: skip
    assert run.returncode == 1
    said = [line.split(":", 2)[1:] for line in run.stderr.splitlines()]
    reboot = [number for number, message in said if "@reboot became on_start" in message]
    assert reboot == ["2"], run.stderr  # only the line that became a task
    assert run.stdout.count("on_start = true") == 1


@pytest.mark.parametrize("flags", [("--user", "root"), ("--skip-other-users",)])
def test_a_user_flag_without_system_is_refused_not_ignored(flags: tuple[str, ...]) -> None:
    # A system crontab read as a user's: --user would be ignored, and every line would run
    # as whoever runs cronctl, its user name taken for the command's first word.
    run = cronctl_import(*flags, THREE_USERS.name, cwd=CORPUS)
    assert (run.returncode, run.stdout) == (2, "")
    assert f"{flags[0]} is for a system crontab: add --system" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="runs a command as another user: needs root")
def test_an_imported_line_for_another_user_still_runs_as_that_user(tmp_path: Path) -> None:
    (tmp_path / "c.crontab").write_text(
        # A PATH without sbin, as most crontabs have: runuser is named by its path.
        "SHELL=/bin/bash\nPATH=/usr/bin:/bin\n"
        '* * * * * nobody echo "$0 as $(id -un)"\n* * * * * root id -un\n'
    )
    run = cronctl_import("--system", "--user", "root", "c.crontab", "-o", "s.toml", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "line 3 ran as user 'nobody'; cronctl will run as 'root', so its command now runs " \
        "through `runuser -u nobody -- SHELL -c COMMAND`" in run.stderr  # fmt: skip
    env = {**os.environ, "CRONCTL_STATE_DIR": str(tmp_path / "state")}
    said = {}
    for name in ("echo", "id"):
        for args in (["exec", name], ["logs", name]):
            done = subprocess.run(
                [sys.executable, "-m", "cronctl", *args, "--file", "s.toml"],
                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr
        said[name] = done.stdout.splitlines()[0]
    # The user cron ran each as, and the shell cron ran the command with (SHELL=).
    assert said == {"echo": "/bin/bash as nobody", "id": "root"}
