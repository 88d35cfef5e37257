"""What a new user tripped over: each fixed, each pinned here."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import Cli, write_schedule

NOW = "2026-08-03T09:00:00Z"
GUARDED = 'name = "prune"\ncommand = "true"\nevery_minute = true\non_one_server = true'


def test_check_warns_about_a_local_lock_dir_before_run_creates_it(cli: Cli, tmp_path: Path) -> None:
    path = write_schedule(tmp_path / "s.toml", [GUARDED])
    locks = Path(cli.env["CRONCTL_STATE_DIR"]) / "locks"
    assert not locks.exists()
    result = cli("check", "-f", str(path))
    assert "lock-dir-not-shared" in cli("check", "-f", str(path), "--format", "json").stdout
    assert "warning: lock_dir" in result.stdout and "on_one_server (prune)" in result.stdout
    assert not locks.exists()  # check creates nothing


def test_check_still_leaves_a_missing_lock_dir_named_by_the_file_alone(
    cli: Cli, tmp_path: Path
) -> None:
    # A CI runner lacks the servers' mount: a lock_dir from the file is judged where it exists.
    header = '[cronctl]\nlock_dir = "/mnt/no-such-shared-mount/locks"\n'
    path = write_schedule(tmp_path / "s.toml", [GUARDED], header=header)
    assert "lock-dir-not-shared" not in cli("check", "-f", str(path), "--format", "json").stdout
    bare = write_schedule(tmp_path / "bare.toml", [GUARDED])
    named = {"CRONCTL_LOCK_DIR": "/mnt/no-such-shared-mount/locks"}
    out = cli("check", "-f", str(bare), "--format", "json", env=named).stdout
    assert "lock-dir-not-shared" not in out


def test_verbose_run_says_the_lock_dir_warning_once_a_day_too(cli: Cli, tmp_path: Path) -> None:
    # `run -v` used to repeat it every minute, under every line it printed.
    path = write_schedule(tmp_path / "s.toml", [GUARDED])
    result = cli("run", "-f", str(path), "--now", NOW, "-v")
    assert "warning: lock_dir" in result.stderr and "(repeated once a day)" in result.stderr
    for minute in ("01", "02"):
        again = cli("run", "-f", str(path), "--now", f"2026-08-03T09:{minute}:00Z", "-v")
        assert again.returncode == 0, again.stderr
        assert "warning" not in again.stderr
        assert f"09:{minute}:00Z  prune  ok" in again.stdout  # -v still prints every run


def test_list_names_warnings_only_with_verbose(cli: Cli, tmp_path: Path) -> None:
    # Every `list` used to end with "1 warning; see `cronctl check`".
    path = write_schedule(tmp_path / "s.toml", [GUARDED])
    plain = cli("list", "-f", str(path))
    assert plain.returncode == 0 and plain.stderr == "", plain.stderr
    verbose = cli("list", "-f", str(path), "-v")
    assert verbose.returncode == 0
    assert "warning: lock_dir" in verbose.stderr and "on_one_server (prune)" in verbose.stderr
    listed = cli("list", "-f", str(path), "--json").stdout
    assert "lock-dir-not-shared" in listed  # JSON keeps every problem


def test_dry_run_wording_has_no_nested_parentheses(cli: Cli, tmp_path: Path) -> None:
    task = 'name = "cond"\ncommand = "true"\nevery_minute = true\nwhen = "true"'
    path = write_schedule(tmp_path / "s.toml", [task])
    out = cli("run", "-f", str(path), "--now", NOW, "--dry-run").stdout
    assert "cond  would run (when/skip not evaluated)" in out


BROKEN = [
    'name = "dup"\ncommand = "true"\ncron = "61 * * * *"',
    'name = "good"\ncommand = "true"\nhourly = true',
    'name = "dup"\ncommand = "true"\nhourly = true\nwithot_overlapping = true',
]


def test_status_of_a_broken_file_shows_the_errors_and_exits_2(cli: Cli, tmp_path: Path) -> None:
    good = write_schedule(tmp_path / "good.toml", [BROKEN[1]])
    assert cli("run", "-f", str(good), "--now", NOW).returncode == 0  # a store to read
    path = write_schedule(tmp_path / "bad.toml", BROKEN)
    result = cli("status", "-f", str(path), "--now", NOW)
    assert result.returncode == 2
    assert "good" in result.stdout and "61" in result.stderr


def test_duplicate_names_are_reported_alongside_the_other_errors(cli: Cli, tmp_path: Path) -> None:
    path = write_schedule(tmp_path / "bad.toml", BROKEN)
    out = cli("check", "-f", str(path)).stdout
    assert "task name 'dup' is already used at" in out and "withot_overlapping" in out


def test_check_list_and_run_print_the_errors_in_the_same_order(cli: Cli, tmp_path: Path) -> None:
    path = write_schedule(tmp_path / "bad.toml", BROKEN)
    checked = [line for line in cli("check", "-f", str(path)).stdout.splitlines()
               if line.startswith(str(path))]  # fmt: skip
    listed = [line for line in cli("list", "-f", str(path)).stderr.splitlines()
              if line.startswith(str(path))]  # fmt: skip
    ran = [line for line in cli("run", "-f", str(path), "--now", NOW).stderr.splitlines()
           if line.startswith(str(path))]  # fmt: skip
    assert len(checked) == 3 and checked == listed == ran


def test_init_creates_missing_parent_directories(cli: Cli, tmp_path: Path) -> None:
    result = cli("init", "sub/dir/x.toml")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "sub" / "dir" / "x.toml").is_file()


def test_the_starter_file_checks_without_any_warning(cli: Cli, tmp_path: Path) -> None:
    cli("init")
    out = cli("check").stdout
    assert out.strip().endswith("0 errors, 0 warnings"), out


def test_next_on_a_paused_task_says_it_is_paused(cli: Cli, tmp_path: Path) -> None:
    tasks = ['name = "off"\ncommand = "true"\nhourly = true\npaused = true',
             'name = "on"\ncommand = "true"\nhourly = true']  # fmt: skip
    path = write_schedule(tmp_path / "s.toml", tasks)
    result = cli("next", "off", "-f", str(path), "--after", NOW)
    assert "note: off is paused (paused = true at" in result.stderr
    assert result.stdout.startswith("2026-08-03T10:00:00Z")
    assert "paused" not in cli("next", "on", "-f", str(path)).stderr
    cli("pause", "on", "-f", str(path))
    assert (
        "note: on is paused (paused by `cronctl pause`" in cli("next", "on", "-f", str(path)).stderr
    )
