"""Time in words: `check --diff` moves in the task's zone, `next`'s DST notes and weekdays."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import Cli, git, write_schedule

NOW = "2026-08-03T00:00:00Z"  # a Monday; Berlin is at +02:00
BEFORE = [
    'name = "report"\ncommand = "report.sh"\ncron = "30 7 * * 1"\ntimezone = "Europe/Berlin"',
    'name = "audit"\ncommand = "audit.sh"\ncron = "0 3 * * *"',
    'name = "poll"\ncommand = "poll.sh"\ncron = "*/15 * * * *"\ntimezone = "Europe/Berlin"',
]
AFTER = [
    'name = "report"\ncommand = "report.sh"\ncron = "30 7 * * 2"\ntimezone = "Europe/Berlin"',
    'name = "audit"\ncommand = "audit.sh"\ncron = "0 4 * * 1-5"',
    'name = "poll"\ncommand = "poll.sh"\ncron = "*/30 * * * *"\ntimezone = "Europe/Berlin"',
]


def _diff(cli: Cli, tmp_path: Path, *extra: str) -> str:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    write_schedule(repo / "schedules.toml", BEFORE)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "before")
    write_schedule(repo / "schedules.toml", AFTER)
    result = Cli(repo, cli.env)("check", "--diff", "HEAD", "--now", NOW, *extra)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _block(out: str, task: str) -> list[str]:
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if f"task {task}: changed" in line)
    return lines[first : first + 4]


def test_diff_says_a_weekly_move_in_days_and_lists_runs_in_the_tasks_zone(
    cli: Cli, tmp_path: Path
) -> None:
    report = _block(_diff(cli, tmp_path), "report")
    assert report[0].endswith(
        "this change moves report from Monday 07:30 to Tuesday 07:30 (Europe/Berlin)"
    )
    # The lists speak the summary's zone, named (07:30 in Berlin is 05:30 UTC).
    assert report[1] == "  next 14 days, Europe/Berlin time: 2 runs gained, 2 lost"
    assert report[2] == "  gained: Tue 2026-08-04 07:30, Tue 2026-08-11 07:30"
    assert report[3] == "  lost:   Mon 2026-08-03 07:30, Mon 2026-08-10 07:30"


def test_diff_words_for_daily_to_weekdays_and_for_other_shapes(cli: Cli, tmp_path: Path) -> None:
    out = _diff(cli, tmp_path)
    audit = _block(out, "audit")
    assert audit[0].endswith(
        "moves audit from 03:00 every day to Monday through Friday 04:00 (UTC)"
    )
    assert audit[1].startswith("  next 14 days, UTC time: 10 runs gained, 14 lost")
    assert audit[2].startswith("  gained: Mon 2026-08-03 04:00, Tue 2026-08-04 04:00")
    poll = _block(out, "poll")
    assert poll[0].endswith(
        "moves poll from every 15 minutes to every hour at :00 and :30 (Europe/Berlin)"
    )
    assert poll[2].startswith("  lost:   Mon 2026-08-03 02:15, Mon 2026-08-03 02:45")
    assert "'30 7 * * 1'" not in out and "T05:30:00Z" not in out


def test_github_annotations_carry_the_same_words(cli: Cli, tmp_path: Path) -> None:
    out = _diff(cli, tmp_path, "--format", "github")
    notice = next(line for line in out.splitlines() if "moves report" in line)
    assert "from Monday 07:30 to Tuesday 07:30 (Europe/Berlin)" in notice
    assert "gained: Tue 2026-08-04 07:30" in notice


def test_next_says_where_the_dst_gaps_times_go_and_how_often_they_run(cli: Cli) -> None:
    args = ("next", "--cron", "0,30 2 * * *", "--tz", "Europe/Berlin", "-n", "1",
            "--after", "2027-03-27T01:30:00Z")  # fmt: skip
    coalesce = cli(*args).stdout
    assert "skipped" not in coalesce
    assert coalesce.endswith(
        "\u00d71 (coalesce: 02:00, 02:30 do not exist (DST change) and land here; "
        "run once, the other recorded as missed)\n"
    )
    catch_up = cli(*args, "--misfire", "catch-up").stdout
    assert catch_up.endswith(
        "\u00d72 (catch-up: 02:00, 02:30 do not exist (DST change) and land here; "
        "each runs, in turn)\n"
    )
    own = cli("next", "--cron", "0,30 2,3 * * *", "--tz", "Europe/Berlin", "-n", "1",
              "--after", "2027-03-28T00:30:00Z").stdout  # fmt: skip
    assert "land on its own 03:00 run; run once, the other 2 recorded as missed" in own
    single = cli("next", "--cron", "0 2 * * *", "--tz", "Europe/Berlin", "-n", "1",
                 "--after", "2027-03-27T01:30:00Z").stdout  # fmt: skip
    assert single.endswith("\u00d71 (coalesce: 02:00 does not exist (DST change) and lands here)\n")


def test_next_shows_the_weekday_without_a_zone_too(cli: Cli, tmp_path: Path) -> None:
    lines = cli("next", "--cron", "30 7 * * 1", "-n", "2", "--after", NOW).stdout.splitlines()
    assert lines == [
        "2026-08-03T07:30:00Z  Mon 2026-08-03 07:30 UTC",
        "2026-08-10T07:30:00Z  Mon 2026-08-10 07:30 UTC",
    ]
    task = 'name = "a"\ncommand = "true"\ndaily_at = "06:00"'
    write_schedule(tmp_path / "schedules.toml", [task])
    assert cli("next", "a", "-n", "1", "--after", NOW).stdout == (
        "2026-08-03T06:00:00Z  Mon 2026-08-03 06:00 UTC\n"
    )
