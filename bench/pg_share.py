"""A fleet sharing a minute's on_one_server work through PostgreSQL (docs/fleets-postgresql.md).

Machines are `cronctl run` processes, each with its own host name and state dir, started
together for each minute as cron would start them (`--now` names the minute, so minutes
follow each other without waiting for the clock). Each job appends its (task, minute, host,
start time) to a marks file, then sleeps: who ran what comes from the jobs, not from cronctl.

1. share: H machines x J jobs a minute (`sleep S`), default max_parallel: each (job, minute)
   started once, per-host counts, start latency p50/p95 (from the machines' launch, their
   Python start-up included, to the job's start; and from the minute's first job start, which
   shows waves), store transactions a minute (pg_stat_database xact_commit), connections.
2. kill: as 1, then `kill -9` of one machine (its cronctl and every task of it) K s after
   its first job of the minute started (it is started first, the others then); the
   survivors record its started runs as of unknown outcome. Lost (never started) and
   doubled (started twice) jobs, unstarted claims at the kill, when the unknown outcomes
   were recorded.
3. big: H machines x N jobs at max_parallel P.
4. idle: H machines, a minute with nothing due: store transactions a machine a minute;
   idle_work (only when asked: real minutes): the same with H `cronctl work` processes.
5. work (only when asked: it takes real minutes): as 1 (or 3, with --work-jobs and
   --work-parallel) with H `cronctl work` processes, latency from the minute boundary.
6. groupkill (only when asked: real minutes): H `cronctl work` machines (max_parallel 2)
   and --group-jobs jobs of one minute in a group of one slot, which the bench holds: the
   claims wait for it. 50 s into the minute one claimer is killed (`kill -9`, its cronctl
   and tasks), another frozen (SIGSTOP, resumed once taken over); then the slot is freed.
   Lost and doubled jobs, and for each victim's claims the seconds from the kill (freeze)
   to the take-over (the store's claimed_at of the taker's claim).
7. aps (only when asked): as 5 with H APScheduler 4 processes (bench/pg_share_aps.py) on
   the same server, each job the same shell command; skipped, with a note, when the Python
   given by --apscheduler-python cannot import apscheduler, sqlalchemy and asyncpg (never
   cronctl's dependencies: install them in a venv of their own).

    python bench/pg_share.py [--hosts 4] [--jobs 20] [--sleep 2] [--minutes 3]
                             [--big-jobs 1000] [--big-parallel 100] [--big-minutes 2]
                             [--work-minutes 3] [--group-jobs 4]
                             [--only share,kill,big,idle,work,aps,idle_work,groupkill]
                             [--apscheduler-python PYTHON]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "coord"))

from conftest import PgServer, _bindir  # noqa: E402  (the tests' server, reused)

sys.path.insert(0, str(ROOT))
from cronctl.coord.postgres.adapter import PostgresCoordinator  # noqa: E402

#: The minutes pretended (`--now`): in the past, so a run is no rehearsal.
T0 = (datetime.now(UTC) - timedelta(days=1)).replace(second=0, microsecond=0)


def _schedule(path: Path, jobs: int, sleep: float, cron: str, max_parallel: int | None) -> None:
    mark = 'echo \\"$CRONCTL_TASK $CRONCTL_OCCURRENCE $CRONCTL_HOST $(date +%s.%N)\\" >> marks'
    head = f"[cronctl]\nmax_parallel = {max_parallel}\n" if max_parallel else ""
    path.write_text(
        head
        + "".join(
            f'\n[[task]]\nname = "j{i:04d}"\ncron = "{cron}"\non_one_server = true\n'
            f'command = "{mark}; sleep {sleep}"\n'
            for i in range(jobs)
        )
    )


class Store:
    """One database of the bench's server, and what its statistics say."""

    def __init__(self, server: PgServer, name: str) -> None:
        server.sql(f"CREATE DATABASE {name}")
        self.server, self.name, self.url = server, name, server.url(name)

    def commits(self) -> int:
        rows = self.server.sql(
            f"SELECT xact_commit FROM pg_stat_database WHERE datname = '{self.name}'"  # noqa: S608
        )
        return int(rows[0][0])  # type: ignore[call-overload]

    def connections(self, application: str | None = "cronctl") -> int:
        """The sessions on the database (of ``application``; None: any but this one's)."""
        which = f"= '{application}'" if application else "<> 'psql'"
        rows = self.server.sql(
            "SELECT count(*) FROM pg_stat_activity "  # noqa: S608
            f"WHERE datname = '{self.name}' AND pid <> pg_backend_pid() "
            f"AND application_name {which}"
        )
        return int(rows[0][0])  # type: ignore[call-overload]

    def sql(self, statement: str) -> list[tuple[object, ...]]:
        return self.server.sql(statement, self.name)


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process under it (from /proc), to kill a whole machine at once."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


class Fleet:
    """H machines on one schedule and store, run minute after minute."""

    def __init__(self, work: Path, store: Store, hosts: int) -> None:
        self.work, self.store = work, store
        self.hosts = [f"h{i}" for i in range(hosts)]
        self.launched: dict[str, float] = {}  # minute -> when its machines were started

    def minute(
        self, i: int, hosts: list[str] | None = None, kill: tuple[str, float] | None = None
    ) -> dict[str, Any]:
        """Run minute ``i`` on ``hosts``; ``kill``: (host, seconds) kill -9 that machine."""
        when = (T0 + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        peak, stop = [0], threading.Event()

        def sample() -> None:
            while not stop.wait(0.1):
                peak[0] = max(peak[0], self.store.connections())

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        self.launched[when] = time.time()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "CRONCTL_COORDINATION": self.store.url,
               "PYTHONPYCACHEPREFIX": str(self.work / "pycache")}  # fmt: skip

        def launch(host: str) -> subprocess.Popen[str]:
            return subprocess.Popen(
                [sys.executable, "-m", "cronctl", "run", "--now", when],
                cwd=self.work,
                env={**env, **_host_env(self.work, host)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )

        hosts = hosts or self.hosts
        killed: dict[str, Any] = {}
        if kill is None:
            procs = {host: launch(host) for host in hosts}
        else:
            # The victim first, so that it has runs to lose: the others start once its
            # first job has, and it is killed `after` s later.
            host, after = kill
            procs = {host: launch(host)}
            while procs[host].poll() is None and not any(
                m[1] == when and m[2] == host for m in self.marks()
            ):
                time.sleep(0.05)
            procs.update({other: launch(other) for other in hosts if other != host})
            time.sleep(after)
            victims = _descendants(procs[host].pid)
            leased = self.store.sql(
                f"SELECT count(*) FROM cronctl.claims WHERE host = '{host}' AND state = 'leased'"  # noqa: S608
            )[0][0]
            for pid in victims:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            killed = {"host": host, "at": time.time(), "processes": len(victims),
                      "unstarted_claims": leased}  # fmt: skip
        errors = {}
        for host, proc in procs.items():
            _, err = proc.communicate(timeout=600)
            if proc.returncode not in (0, -9) and err.strip():
                errors[host] = err.strip().splitlines()[-1]
        stop.set()
        sampler.join()
        return {"minute": when, "peak_connections": peak[0], "errors": errors, **killed}

    def marks(self) -> list[tuple[str, str, str, float]]:
        path = self.work / "marks"
        if not path.exists():
            return []
        found = []
        for line in path.read_text().splitlines():
            task, minute, host, at = line.split()
            found.append((task, minute, host, float(at)))
        return found


def _summary(fleet: Fleet, jobs: int, minutes: list[str], commits: int) -> dict[str, Any]:
    marks = [m for m in fleet.marks() if m[1] in minutes]
    pairs = Counter((task, minute) for task, minute, _, _ in marks)
    latency = sorted(at - fleet.launched[minute] for _, minute, _, at in marks)
    q = statistics.quantiles(latency, n=20) if len(latency) > 1 else latency * 19
    first = {minute: min(at for _, m, _, at in marks if m == minute) for minute in minutes}
    spread = sorted(at - first[minute] for _, minute, _, at in marks)
    qs = statistics.quantiles(spread, n=20) if len(spread) > 1 else spread * 19
    return {
        "expected": jobs * len(minutes),
        "started_once": sum(1 for n in pairs.values() if n == 1),
        "lost": jobs * len(minutes) - len(pairs),
        "doubled": sum(n - 1 for n in pairs.values() if n > 1),
        "per_host": dict(sorted(Counter(host for _, _, host, _ in marks).items())),
        "latency_p50_s": round(statistics.median(latency), 3) if latency else None,
        "latency_p95_s": round(q[18], 3) if latency else None,
        "after_first_start_p50_s": round(statistics.median(spread), 3) if spread else None,
        "after_first_start_p95_s": round(qs[18], 3) if spread else None,
        "transactions_per_minute": round(commits / len(minutes), 1),
    }


def _fleet(server: PgServer, root: Path, name: str, hosts: int) -> Fleet:
    work = root / name
    work.mkdir()
    return Fleet(work, Store(server, name), hosts)


def _load(
    server: PgServer, root: Path, name: str, args: argparse.Namespace, jobs: int,
    max_parallel: int | None, minutes: int,
) -> dict[str, Any]:  # fmt: skip
    """``jobs`` due every minute on the machines, for ``minutes`` after a warm-up."""
    fleet = _fleet(server, root, name, args.hosts)
    _schedule(fleet.work / "schedules.toml", jobs, args.sleep, "* * * * *", max_parallel)
    fleet.minute(-1)  # a warm-up: the schema made, the bytecode compiled; not counted
    time.sleep(1.5)  # the statistics of the machines' last transactions reach the view
    before = fleet.store.commits()
    ticks = [fleet.minute(i) for i in range(minutes)]
    time.sleep(1.5)
    commits = fleet.store.commits() - before
    return {**_summary(fleet, jobs, [t["minute"] for t in ticks], commits), "ticks": ticks}


def share(server: PgServer, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    return _load(server, root, "share", args, args.jobs, None, args.minutes)


def kill(server: PgServer, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    fleet = _fleet(server, root, "kill", args.hosts)
    _schedule(fleet.work / "schedules.toml", args.jobs, args.sleep, "* * * * *", None)
    first = fleet.minute(0)
    hit = fleet.minute(1, kill=(fleet.hosts[0], args.kill_at))
    survivors = fleet.hosts[1:]
    after = fleet.minute(2, hosts=survivors)
    unknown = fleet.store.sql(
        "SELECT count(*), max(extract(epoch FROM published_at)) FROM cronctl.runs "
        "WHERE host = 'h0' AND left(message, 16) = 'outcome unknown:'"
    )
    count, last = unknown[0]
    killed_started = sum(
        1 for _, minute, host, _ in fleet.marks() if minute == hit["minute"] and host == "h0"
    )
    summary = _summary(fleet, args.jobs, [first["minute"], hit["minute"], after["minute"]], 0)
    summary.pop("transactions_per_minute")
    return {
        **summary,
        "killed": {k: hit[k] for k in ("host", "processes", "unstarted_claims")},
        "killed_host_started_in_its_minute": killed_started,
        "recorded_unknown": count,
        "recorded_unknown_after_kill_s": round(float(last) - hit["at"], 1) if last else None,
    }


def big(server: PgServer, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    return _load(server, root, "big", args, args.big_jobs, args.big_parallel, args.big_minutes)


def idle(server: PgServer, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    fleet = _fleet(server, root, "idle", args.hosts)
    # Due once a year, never in the minutes run.
    _schedule(fleet.work / "schedules.toml", args.jobs, args.sleep, "0 0 1 1 *", None)
    fleet.minute(0)  # the first run creates the schema
    time.sleep(1.5)
    before = fleet.store.commits()
    for i in range(1, args.minutes + 1):
        fleet.minute(i)
    time.sleep(1.5)
    commits = fleet.store.commits() - before
    return {
        "transactions_per_minute": round(commits / args.minutes, 1),
        "per_host_per_minute": round(commits / args.minutes / args.hosts, 2),
    }


def work(server: PgServer, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """H `cronctl work` machines for --work-minutes real minutes: start latency from the
    occurrence (the minute boundary), with no process start-up in it."""
    fleet = _fleet(server, root, "work", args.hosts)
    jobs = args.work_jobs or args.jobs
    _schedule(fleet.work / "schedules.toml", jobs, args.sleep, "* * * * *", args.work_parallel)
    return _daemons(fleet, _work_commands(fleet), _work_envs(fleet), jobs, args, "cronctl")


def idle_work(server: PgServer, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """H `cronctl work` machines with nothing due: store transactions a machine a minute."""
    fleet = _fleet(server, root, "idle_work", args.hosts)
    _schedule(fleet.work / "schedules.toml", args.jobs, args.sleep, "0 0 1 1 *", None)
    found = _daemons(fleet, _work_commands(fleet), _work_envs(fleet), 0, args, "cronctl")
    minute = found["transactions_per_minute"]
    return {**found, "per_host_per_minute": round(minute / args.hosts, 2)}


def groupkill(server: PgServer, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    fleet = _fleet(server, root, "groupkill", args.hosts)
    minute = (datetime.now(UTC) + timedelta(seconds=90)).replace(second=0, microsecond=0)
    when = minute.strftime("%Y-%m-%dT%H:%M:%SZ")
    _schedule(fleet.work / "schedules.toml", args.group_jobs, 1.0, f"{minute:%M %H} * * *", 2)
    with (fleet.work / "schedules.toml").open("a") as schedule:
        schedule.write('\n[defaults]\ngroup = "g"\nmisfire_grace = "5m"\n\n[[group]]\n'
                       'name = "g"\nmax_running = 1\n')  # fmt: skip
    holder = PostgresCoordinator(fleet.store.url, host="bench", pid=os.getpid())
    slot = holder.try_group_slot("g", 1)
    envs = _work_envs(fleet)
    machines = {host: subprocess.Popen(_work_commands(fleet)[host], cwd=fleet.work,
                                       env={**os.environ, **envs[host]}, stderr=subprocess.PIPE,
                                       stdout=subprocess.DEVNULL, text=True)
                for host in fleet.hosts}  # fmt: skip
    sql = "SELECT task, host, extract(epoch FROM claimed_at) FROM cronctl.claims WHERE "
    sql += f"occurrence = '{when}'"

    def claims() -> list[tuple[str, str, float]]:
        return [(str(t), str(h), float(at)) for t, h, at in fleet.store.sql(sql)]  # type: ignore[arg-type]

    time.sleep(max(0.0, (minute + timedelta(seconds=50) - datetime.now(UTC)).total_seconds()))
    held = Counter(host for _, host, _ in claims())
    victims = [host for host, _ in held.most_common(2)]
    gone: dict[str, tuple[str, float]] = {}
    for host, how in zip(victims, ["killed", "frozen"], strict=False):
        ((at,),) = fleet.store.sql("SELECT extract(epoch FROM now())")
        pids = _descendants(machines[host].pid) if how == "killed" else [machines[host].pid]
        for pid in pids:
            os.kill(pid, signal.SIGKILL if how == "killed" else signal.SIGSTOP)
        gone[host] = (how, float(at))  # type: ignore[arg-type]
    lost = {task: host for task, host, _ in claims() if host in gone}
    taken: dict[str, tuple[str, float]] = {}
    deadline = time.monotonic() + 90
    while len(taken) < len(lost) and time.monotonic() < deadline:
        for task, host, at in claims():
            if task in lost and host != lost[task] and task not in taken:
                taken[task] = (host, at)
        time.sleep(0.2)
    for host, (how, _) in gone.items():
        if how == "frozen":
            machines[host].send_signal(signal.SIGCONT)
    slot.release()  # type: ignore[union-attr]
    holder.close()
    time.sleep(2 * args.group_jobs + 5)  # one at a time through the group's slot
    for machine in machines.values():
        machine.send_signal(signal.SIGTERM)
    said = {host: machine.communicate(timeout=120)[1] for host, machine in machines.items()}
    errors = {h: [x for x in err.splitlines() if "rror" in x][-3:] for h, err in said.items()}
    pairs = Counter(task for task, m, _, _ in fleet.marks() if m == when)
    result: dict[str, Any] = {"jobs": args.group_jobs, "claims_per_host_at_50s": dict(held),
                              "lost": args.group_jobs - len(pairs),
                              "doubled": sum(n - 1 for n in pairs.values() if n > 1),
                              "errors": {h: e for h, e in errors.items() if e}}  # fmt: skip
    for host, (how, at) in gone.items():
        mine = [task for task, h in lost.items() if h == host]
        result[how] = {"host": host, "claims": len(mine),
                       "taken_by": [taken[t][0] if t in taken else None for t in mine],
                       "taken_over_after_s": [round(taken[t][1] - at, 1) if t in taken
                                              else None for t in mine]}  # fmt: skip
    return result


def _work_commands(fleet: Fleet) -> dict[str, list[str]]:
    return {host: [sys.executable, "-m", "cronctl", "work"] for host in fleet.hosts}


def _work_envs(fleet: Fleet) -> dict[str, dict[str, str]]:
    env = {"PYTHONPATH": str(ROOT), "CRONCTL_COORDINATION": fleet.store.url}
    return {host: {**env, **_host_env(fleet.work, host)} for host in fleet.hosts}


def _host_env(work: Path, host: str) -> dict[str, str]:
    """Each host's own directories, as on its own machine: never the system's defaults."""
    dirs = {"CRONCTL_STATE_DIR": work / host, "CRONCTL_CACHE_DIR": work / f"{host}-cache"}
    return {"CRONCTL_HOST": host, **{name: str(path) for name, path in dirs.items()}}


def aps(server: PgServer, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """As work, with H APScheduler 4 processes on one SQLAlchemy (asyncpg) data store and
    event broker (bench/pg_share_aps.py): the anchor for a shared-store scheduler fleet.
    Skipped, with a note, when --apscheduler-python cannot import it."""
    python = args.apscheduler_python
    needs = "apscheduler.datastores.sqlalchemy, apscheduler.eventbrokers.asyncpg"
    probe = [python, "-c", f"import {needs}, importlib.metadata as m; "
             "print(m.version('apscheduler'))"]  # fmt: skip
    found = subprocess.run(probe, capture_output=True, text=True, check=False)
    if found.returncode != 0:
        note = f"skipped: {python} cannot import apscheduler, asyncpg and sqlalchemy"
        print(f"aps: {note} (see --apscheduler-python)", flush=True)
        return {"skipped": note}
    fleet = _fleet(server, root, "aps", args.hosts)
    jobs = args.work_jobs or args.jobs
    script = str(ROOT / "bench" / "pg_share_aps.py")
    concurrent = str(args.work_parallel or 100)  # APScheduler's own default: 100
    commands = {host: [python, script, fleet.store.url, host, str(jobs), str(args.sleep),
                       concurrent] for host in fleet.hosts}  # fmt: skip
    # Started at once, APScheduler processes race to create its tables and all but one
    # die of it (a unique violation in pg_type): the first makes them alone.
    made = "SELECT to_regclass('schedules') IS NOT NULL"
    result = _daemons(fleet, commands, {host: {} for host in fleet.hosts}, jobs, args, None,
                      lambda: bool(fleet.store.sql(made)[0][0]))  # fmt: skip
    return {"apscheduler": found.stdout.strip(), **result}


def _daemons(
    fleet: Fleet,
    commands: dict[str, list[str]],
    envs: dict[str, dict[str, str]],
    jobs: int,
    args: argparse.Namespace,
    application: str | None,
    ready: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Run each host's scheduler daemon for --work-minutes real minutes after a warm-up,
    then stop it (SIGTERM); the figures of those minutes, latency from the boundary.
    ``ready``: the first host's daemon is started alone until it says yes."""

    def launch(host: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            commands[host],
            cwd=fleet.work,
            env={**os.environ, **envs[host]},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    machines = [launch(fleet.hosts[0])]
    if ready is not None:
        while not ready() and machines[0].poll() is None:
            time.sleep(0.1)
    machines += [launch(host) for host in fleet.hosts[1:]]
    # The first boundary after a warm-up of at least 20 s starts the minutes counted.
    first = (datetime.now(UTC) + timedelta(seconds=80)).replace(second=0, microsecond=0)
    time.sleep(max(0.0, (first - datetime.now(UTC)).total_seconds() - 1))
    before = fleet.store.commits()
    peak = 0
    end = first + timedelta(minutes=args.work_minutes)
    while datetime.now(UTC) < end - timedelta(seconds=1):
        peak = max(peak, fleet.store.connections(application))
        time.sleep(0.2)
    commits = fleet.store.commits() - before
    time.sleep(1 + args.sleep)  # the last minute's jobs end
    for machine in machines:
        machine.send_signal(signal.SIGTERM)
    errors = {}
    for host, machine in zip(fleet.hosts, machines, strict=True):
        _, err = machine.communicate(timeout=120)
        if "Traceback" in err:
            said = [line for line in err.splitlines() if "Error" in line or "rror:" in line]
            errors[host] = (said or err.strip().splitlines())[-1].strip(" |")
    counted = [(first + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
               for i in range(args.work_minutes)]  # fmt: skip
    for minute in counted:
        fleet.launched[minute] = (
            datetime.strptime(minute, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
        )
    found = {"peak_connections": peak, "errors": errors}
    if not jobs:
        return {"transactions_per_minute": round(commits / len(counted), 1), **found}
    return {**_summary(fleet, jobs, counted, commits), **found}


SCENARIOS = {"share": share, "kill": kill, "big": big, "idle": idle, "work": work, "aps": aps,
             "idle_work": idle_work, "groupkill": groupkill}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--sleep", type=float, default=2.0)
    parser.add_argument("--minutes", type=int, default=3)
    parser.add_argument("--kill-at", type=float, default=1.0)
    parser.add_argument("--big-jobs", type=int, default=1000)
    parser.add_argument("--big-parallel", type=int, default=100)
    parser.add_argument("--big-minutes", type=int, default=2)
    parser.add_argument("--work-minutes", type=int, default=3)
    parser.add_argument("--work-jobs", type=int, default=0, help="default: --jobs")
    parser.add_argument("--work-parallel", type=int, default=None)
    parser.add_argument("--group-jobs", type=int, default=4)
    parser.add_argument(
        "--apscheduler-python",
        default=sys.executable,
        help="a Python that imports apscheduler 4, sqlalchemy, asyncpg",
    )
    parser.add_argument("--only", default="share,kill,big,idle")
    args = parser.parse_args()
    bindir = _bindir()
    if bindir is None:
        sys.exit("bench: PostgreSQL is not installed (initdb not found)")
    data = Path(tempfile.mkdtemp(prefix="cronctl-pgshare-"))
    if os.geteuid() == 0:
        shutil.chown(data, "postgres", "postgres")
    server = PgServer(bindir, data, durable=True)
    server.init()
    server.start()
    root = Path(tempfile.mkdtemp(prefix="cronctl-share-"))
    try:
        results = {}
        for name in args.only.split(","):
            results[name] = SCENARIOS[name](server, root, args)
            print(name, json.dumps(results[name], indent=1), flush=True)
    finally:
        server.stop("immediate")
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
