"""Four simulated days through `cronctl run`'s own code path, checked against an independent model.

Two machines share a lock directory; each has its own state directory. Ticks come
late, twice or not at all; machine b is down for five hours; machine a's clock is
stepped back an hour. Some tasks fail or time out, some are held "still running",
one is paused for a while. The process edge is a fake that records what would have
run, so days of minutes take seconds; everything else (SQLite state, claims,
flock locks, pause markers) is real.
"""

from __future__ import annotations

import hashlib
import os
import random
import tempfile
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cronctl.coord import open_coordinator
from cronctl.coord.files import overlap, pauses
from cronctl.edge.process.runner import CommandResult, RunSpec
from cronctl.edge.schedfiles import load_paths
from cronctl.edge.state.store import Store
from cronctl.run.context import RunContext, World
from cronctl.run.once import run_once
from tests.helpers import changed
from tests.soak.model import MINUTE, Model, SoakTask, utc

# Wednesday 31 December to Sunday 4 January, 01:00 UTC: a month's last day and a month's first,
# weekdays and a weekend, a Wednesday, a Friday and a Sunday midnight — every calendar shape the
# tasks below use — in four days (a full week took a CI worker five minutes).
START = utc("2025-12-31T00:00")
MINUTES = 4 * 24 * 60 + 60
H = timedelta(hours=1)

TASKS = [
    SoakTask("t01", "every_minute = true\non_one_server = true", "* * * * *", on_one_server=True),
    SoakTask(
        "t02",
        'every_minutes = 5\ntimezone = "+05:45"\nmisfire = "catch-up"',
        "*/5 * * * *",
        zone="+05:45",
        misfire="catch-up",
    ),
    SoakTask(
        "t03",
        'every_minutes = 15\ntimezone = "Europe/Berlin"\nmisfire = "skip"\n'
        "without_overlapping = true",
        "*/15 * * * *",
        zone="Europe/Berlin",
        misfire="skip",
        overlap=True,
    ),
    SoakTask(
        "t04",
        'hourly = true\ntimezone = "America/New_York"\non_one_server = true',
        "0 * * * *",
        zone="America/New_York",
        on_one_server=True,
    ),
    SoakTask(
        "t05",
        'hourly_at = 17\ntimezone = "Australia/Lord_Howe"\nmisfire = "catch-up"\n'
        "on_one_server = true\nwithout_overlapping = true",
        "17 * * * *",
        zone="Australia/Lord_Howe",
        misfire="catch-up",
        on_one_server=True,
        overlap=True,
    ),
    SoakTask("t06", 'daily = true\nmisfire = "skip"', "0 0 * * *", misfire="skip"),
    SoakTask(
        "t07",
        'daily_at = "03:30"\ntimezone = "Europe/Berlin"\nmisfire_grace = "2h"\n'
        "on_one_server = true",
        "30 3 * * *",
        zone="Europe/Berlin",
        grace=2 * H,
        on_one_server=True,
    ),
    SoakTask(
        "t08",
        'twice_daily = [6, 18]\ntimezone = "-03:30"\nmisfire = "catch-up"',
        "0 6,18 * * *",
        zone="-03:30",
        misfire="catch-up",
    ),
    SoakTask("t09", "weekly = true", "0 0 * * 0"),
    SoakTask(
        "t10",
        'weekly_on = [3, "09:00"]\ntimezone = "Asia/Kolkata"\nmisfire = "skip"\n'
        "on_one_server = true",
        "0 9 * * 3",
        zone="Asia/Kolkata",
        misfire="skip",
        on_one_server=True,
    ),
    SoakTask("t11", 'monthly = true\nmisfire = "catch-up"', "0 0 1 * *", misfire="catch-up"),
    SoakTask("t12", 'monthly_on = [31, "23:00"]', "0 23 31 * *"),
    SoakTask("t13", "yearly = true\non_one_server = true", "0 0 1 1 *", on_one_server=True),
    SoakTask("t14", "at = 2026-01-02T12:00:00Z", None, at=utc("2026-01-02T12:00")),
    SoakTask(
        "t15",
        'at = 2025-12-31T08:07:00Z\nmisfire = "skip"\non_one_server = true',
        None,
        at=utc("2025-12-31T08:07"),
        misfire="skip",
        on_one_server=True,
    ),
    SoakTask(
        "t16",
        'cron = "*/7 * * * *"\nmisfire = "catch-up"\non_one_server = true',
        "*/7 * * * *",
        misfire="catch-up",
        on_one_server=True,
    ),
    SoakTask(
        "t17",
        'cron = "0 9-17 * * MON-FRI"\ntimezone = "America/New_York"',
        "0 9-17 * * MON-FRI",
        zone="America/New_York",
    ),
    SoakTask(
        "t18",
        'cron = "30 */2 * * *"\nmisfire = "skip"\nwithout_overlapping = "30m"',
        "30 */2 * * *",
        misfire="skip",
        overlap=True,
        lease=timedelta(minutes=30),
    ),
    SoakTask("t19", 'cron = "0 0 13 * 5"', "0 0 13 * 5"),
    SoakTask(
        "t20",
        'cron = "15,45 * * * *"\ntimezone = "+14:00"\nmisfire = "catch-up"\n'
        'misfire_grace = "30m"\non_one_server = true',
        "15,45 * * * *",
        zone="+14:00",
        misfire="catch-up",
        grace=timedelta(minutes=30),
        on_one_server=True,
    ),
    SoakTask(
        "t21",
        'every_minute = true\nweekdays = true\ntimezone = "Europe/Berlin"\nmisfire = "skip"',
        "* * * * 1-5",
        zone="Europe/Berlin",
        misfire="skip",
    ),
    SoakTask(
        "t22",
        'daily_at = "12:00"\nweekends = true\non_one_server = true',
        "0 12 * * 0,6",
        on_one_server=True,
    ),
    SoakTask(
        "t23",
        'hourly = true\ndays = "MON,WED,FRI"\nmisfire = "catch-up"',
        "0 * * * MON,WED,FRI",
        misfire="catch-up",
    ),
    SoakTask(
        "t24",
        'every_minutes = 2\nmisfire_grace = "1m"\nwithout_overlapping = true',
        "*/2 * * * *",
        grace=MINUTE,
        overlap=True,
    ),
    SoakTask(
        "t25",
        'cron = "*/3 8-20 * * *"\ntimezone = "Asia/Tokyo"\nmisfire = "catch-up"\n'
        "on_one_server = true",
        "*/3 8-20 * * *",
        zone="Asia/Tokyo",
        misfire="catch-up",
        on_one_server=True,
    ),
    SoakTask(
        "t26",
        'every_minutes = 10\ntimezone = "-09:30"\nwhen = "cond"',
        "*/10 * * * *",
        zone="-09:30",
        when=True,
    ),
    SoakTask(
        "t27",
        'every_minutes = 30\nmisfire = "skip"\nskip = "cond"',
        "*/30 * * * *",
        misfire="skip",
        skip=True,
    ),
    SoakTask(
        "t28",
        'cron = "59 23 * * *"\nmisfire = "catch-up"\non_one_server = true',
        "59 23 * * *",
        misfire="catch-up",
        on_one_server=True,
    ),
    SoakTask(
        "t29",
        'cron = "0 12 1 1 *"\ntimezone = "Pacific/Auckland"\npaused = true',
        "0 12 1 1 *",
        zone="Pacific/Auckland",
        paused=True,
    ),
    SoakTask(
        "t30",
        'every_minute = true\nmisfire = "catch-up"\non_one_server = true\n'
        "without_overlapping = true",
        "* * * * *",
        misfire="catch-up",
        on_one_server=True,
        overlap=True,
    ),
]
FAILING = {"t01", "t16", "t24", "t30"}
TIMING_OUT = {"t02", "t25"}
# (task, from minute, to minute): the overlap lock is held by a "stuck" run meanwhile.
HELD = [
    ("t03", 600, 700),
    ("t05", 2000, 2200),
    ("t18", 4000, 4240),
    ("t24", 100, 130),
    ("t30", 5300, 5310),
]
PAUSED = ("t11", 4400, 4500)  # an operator pause (marker in lock_dir)
DOWN_B = range(3000, 3300)  # machine b is off
BACK_A = range(5000, 5090)  # machine a's clock reads an hour behind


def outcome_of(task: str, occurrence: datetime) -> str:
    digest = int(hashlib.sha256(f"{task}{occurrence:%Y%m%d%H%M}".encode()).hexdigest(), 16)
    if task in FAILING and digest % 5 == 0:
        return "failed"
    if task in TIMING_OUT and digest % 7 == 0:
        return "timeout"
    return "ok"


def condition(kind: str, occurrence: datetime) -> bool:
    return (occurrence.minute // 10 + occurrence.hour) % 2 == 0


def held_since(task: str, now: datetime) -> datetime | None:
    minute = int((now - START).total_seconds() // 60)
    for name, start, end in HELD:
        if name == task and start <= minute < end:
            return START + timedelta(minutes=start)
    return None


def marker_paused(task: str, now: datetime) -> bool:
    minute = int((now - START).total_seconds() // 60)
    return task == PAUSED[0] and PAUSED[1] <= minute < PAUSED[2]


class FakeRunning:
    """What runner.start returns, for a command that 'ran' instantly."""

    def __init__(self, result: CommandResult) -> None:
        self.result = result
        self.pid = None

    def wait(self) -> CommandResult:
        return self.result

    def signal(self, sig: int) -> None:
        pass


class Edge:
    """The fake process edge: records each start in a ledger."""

    def __init__(self) -> None:
        self.ledger: list[tuple[str, str, datetime, str]] = []

    def start(self, spec: RunSpec) -> FakeRunning:
        task, machine = spec.env["CRONCTL_TASK"], spec.env["MACHINE"]
        occurrence = datetime.fromisoformat(spec.env["CRONCTL_OCCURRENCE"])
        outcome = outcome_of(task, occurrence)
        self.ledger.append((machine, task, occurrence, outcome))
        now = datetime.now(UTC)
        code = {"ok": 0, "failed": 1, "timeout": None}[outcome]
        return FakeRunning(CommandResult(outcome, code, None, now, now, 0.0, ""))  # type: ignore[arg-type]

    @staticmethod
    def condition(command: str, *, env: dict[str, str], **_: object) -> bool:
        return condition(command, datetime.fromisoformat(env["CRONCTL_OCCURRENCE"]))


def ticks(rng: random.Random) -> Iterator[tuple[str, datetime]]:
    """(machine, now) in the order they happen: late, doubled, skipped, down, stepped back."""
    for minute in range(MINUTES):
        for machine in rng.sample(["a", "b"], 2):
            if machine == "b" and minute in DOWN_B:
                continue
            roll = rng.random()
            if roll < 0.02:
                continue  # cron skipped this minute
            base = START + timedelta(minutes=minute)
            if machine == "a" and minute in BACK_A:
                base -= H
            now = base + timedelta(seconds=rng.uniform(0, 4))
            if roll > 0.995:
                now += timedelta(minutes=rng.randint(1, 3))  # very late
            yield machine, now
            if 0.02 <= roll < 0.03:
                yield machine, now + timedelta(seconds=rng.uniform(1, 20))  # doubled


@pytest.fixture
def fast_dir() -> Iterator[Path]:
    # tmpfs when there is one: the store fsyncs every commit, and four days are 12,000 runs.
    base = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(dir=base) as directory:
        yield Path(directory)


@pytest.mark.long
def test_four_days_of_ticks_on_two_machines_matches_the_model(fast_dir: Path) -> None:
    schedule_file = fast_dir / "schedules.toml"
    schedule_file.write_text(
        "[defaults]\n"
        + "".join(f'\n[[task]]\nname = "{t.name}"\ncommand = "work"\n{t.toml}\n' for t in TASKS)
    )
    schedule = load_paths([schedule_file])
    assert not schedule.errors, schedule.errors
    edge = Edge()
    lock_dir = fast_dir / "locks"
    contexts = {
        m: RunContext(
            state_dir=fast_dir / f"state-{m}",
            lock_dir=lock_dir,
            host=f"host-{m}",
            env={"MACHINE": m},
            coord=open_coordinator(None, lock_dir, host=f"host-{m}", pid=os.getpid()),
            max_parallel=4,
            world=World(
                clock=lambda: START,
                start=edge.start,
                condition=edge.condition,
                warn=lambda _m: None,
            ),
        )
        for m in ("a", "b")
    }
    model = Model(TASKS, outcome_of, condition, held_since, marker_paused)
    held: dict[str, overlap.OverlapLock] = {}
    for machine, now in ticks(random.Random(1130)):
        _stage_world(lock_dir, now, held)
        ctx = contexts[machine]
        run_once(schedule, now, changed(ctx, clock=lambda now=now: now))
        model.tick(machine, now)
    for lock in held.values():
        lock.release()

    # Every start the model expects happened, once, and nothing else did.
    executed = Counter((m, t, o) for m, t, o, _ in edge.ledger)
    assert max(executed.values()) == 1
    expected_runs = {k: v for k, v in model.outcomes.items() if not v.startswith("skipped")}
    assert {(m, t, o): out for m, t, o, out in edge.ledger} == expected_runs
    # No on_one_server occurrence ran on both machines.
    one_server = {t.name for t in TASKS if t.on_one_server}
    across = Counter((t, o) for _, t, o, _ in edge.ledger if t in one_server)
    assert max(across.values()) == 1
    # The recorded history agrees with the model, skips included; missed counts too.
    for machine in ("a", "b"):
        with Store.open(fast_dir / f"state-{machine}") as store:
            rows = store.history(None, 10**6)
            states = store.states()
        recorded = {
            (machine, r.task, r.occurrence): r.outcome for r in rows if r.outcome != "missed"
        }
        mine = {k: v for k, v in model.outcomes.items() if k[0] == machine}
        assert recorded == mine
        assert {n: s.missed_total for n, s in states.items()} == {
            t.name: model.missed.get((machine, t.name), 0) for t in TASKS
        }
    # The scenario exercised what it claims to.
    kinds = Counter(model.outcomes.values())
    assert {
        "ok",
        "failed",
        "timeout",
        "skipped: another server",
        "skipped: still running",
        "skipped: condition",
        "skipped: paused",
    } <= set(kinds)
    assert sum(model.missed.values()) > 100


def _stage_world(lock_dir: Path, now: datetime, held: dict[str, overlap.OverlapLock]) -> None:
    """Hold or release the stuck runs' locks and the operator pause for this instant."""
    for name, _start, _end in HELD:
        since = held_since(name, now)
        if since is not None and name not in held:
            result = overlap.try_overlap_lock(
                lock_dir, name, lease=None, now=since, host="stuck", pid=1
            )
            assert result.lock is not None
            held[name] = result.lock
        elif since is None and name in held:
            held.pop(name).release()
    if marker_paused(PAUSED[0], now):
        if PAUSED[0] not in pauses.paused_tasks(lock_dir):
            pauses.set_pause(lock_dir, PAUSED[0], reason="soak", now=now, host="x", user="y")
    else:
        pauses.clear_pause(lock_dir, PAUSED[0])
