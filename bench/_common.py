"""Shared helpers for the benchmark scripts: the machine, timing whole processes, tables, JSON.

Every script runs cronctl with its state and locks in a temporary directory (never
/var/lib/cronctl, even as root), with bytecode caching on (in a private PYTHONPYCACHEPREFIX, so
nothing is written next to the sources): an installed cronctl has compiled bytecode, and a
benchmark that recompiles cronctl's sources on every start would measure the compiler.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_CRONCTL = Path("/tmp/venv/bin/cronctl")
#: Where the scripts write their results unless --out names another directory: outside git
#: (bench-results/ is in .gitignore), so a benchmark never leaves a file to commit.
RESULTS_DIR = Path(__file__).resolve().parent.parent / "bench-results"
# Inherited variables that would change what cronctl reads or where it writes.
_SCRUB = ("CRONCTL_FILE", "CRONCTL_ENV", "CRONCTL_DEBUG", "PYTHONDONTWRITEBYTECODE", "NO_COLOR")


# --- command line --------------------------------------------------------------------------


def parser(description: str, runs: int | None = 20, warmup: int = 3) -> argparse.ArgumentParser:
    """The options every script shares (`runs=None`: a script that times no commands)."""
    p = argparse.ArgumentParser(description=description)
    add_out(p)
    if runs is not None:
        p.add_argument("--runs", type=int, default=runs, help=f"timed runs per command ({runs})")
        p.add_argument("--warmup", type=int, default=warmup, help=f"warm-up runs ({warmup})")
        p.add_argument(
            "--no-hyperfine", action="store_true", help="time with a perf_counter loop instead"
        )
    p.add_argument(
        "--cronctl",
        type=Path,
        default=Path(os.environ.get("CRONCTL_BENCH_BIN", DEFAULT_CRONCTL)),
        help=f"the cronctl console script to measure ({DEFAULT_CRONCTL})",
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    return p


@dataclass
class Tool:
    """The cronctl under test and the interpreter it runs on."""

    cronctl: Path
    python: Path

    @classmethod
    def find(cls, cronctl: Path) -> Tool:
        """The console script and its interpreter (from its #! line)."""
        if not cronctl.exists():
            sys.exit(f"bench: {cronctl} does not exist; pass --cronctl PATH")
        first = cronctl.read_text(errors="replace").splitlines()[0]
        python = Path(first[2:].strip().split()[0]) if first.startswith("#!") else None
        if python is None or not python.exists():
            python = cronctl.parent / "python"
        return cls(cronctl, python)


class Sandbox:
    """A temporary directory holding schedules, state, locks and the bytecode cache."""

    def __init__(self, keep: bool = False, prefix: str = "cronctl-bench-") -> None:
        self.root = Path(tempfile.mkdtemp(prefix=prefix))
        self.keep = keep
        self.pycache = self.root / "pycache"

    def env(
        self, state: Path | None = None, locks: Path | None = None, **extra: str
    ) -> dict[str, str]:
        """The environment for cronctl: data dirs in the sandbox, bytecode cached privately."""
        env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
        env["PYTHONPYCACHEPREFIX"] = str(self.pycache)
        env["CRONCTL_STATE_DIR"] = str(state or self.root / "state")
        env["CRONCTL_LOCK_DIR"] = str(locks or self.root / "locks")
        # `run`'s schedule cache (root's default is /var/cache/cronctl): in the sandbox, warm
        # after the first run of a schedule, as on a machine where it runs every minute.
        env["CRONCTL_CACHE_DIR"] = str(self.root / "cache")
        env.update(extra)
        return env

    def close(self) -> None:
        """Remove the directory unless --keep."""
        if self.keep:
            print(f"\nkept {self.root}")
        else:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- schedules -----------------------------------------------------------------------------

# A mix of schedule keys (docs/schedule-file.md#schedule-keys) for tasks that are not due in
# the benchmarks' minute.
RARE_SCHEDULES = (
    'daily_at = "03:{m:02d}"',
    'cron = "{m} 4 * * MON-FRI"',
    "hourly_at = {m}",
    'weekly_on = [2, "05:{m:02d}"]',
    'monthly_on = [15, "06:{m:02d}"]',
    "twice_daily = [1, 13]",
    "yearly = true",
    'cron = "*/15 9-17 * * 1-5"',
    "every_minutes = 30",
    'daily_at = "22:{m:02d}"\nweekdays = true',
)
# The same schedules in cron form, for peers that only speak cron (yacron).
RARE_CRON = (
    "{m} 3 * * *",
    "{m} 4 * * MON-FRI",
    "{m} * * * *",
    "{m} 5 * * 2",
    "{m} 6 15 * *",
    "0 1,13 * * *",
    "0 0 1 1 *",
    "*/15 9-17 * * 1-5",
    "*/30 * * * *",
    "{m} 22 * * 1-5",
)
# The keys of RARE_SCHEDULES that fire at most once a day per task, at a minute of its own.
SELDOM = (0, 1, 3, 4, 6, 9)
ZONES = ("UTC", "Europe/Berlin", "America/New_York", "+05:30", "Asia/Tokyo", "Australia/Sydney")


def rare_task(
    i: int, command: str = "true", zone: str | None = None, keys: Sequence[int] | None = None
) -> str:
    """One [[task]] table with the i-th schedule key (of `keys`) and time zone of the mix."""
    choice = keys[i % len(keys)] if keys else i % len(RARE_SCHEDULES)
    schedule = RARE_SCHEDULES[choice].format(m=i % 60)
    tz = zone or ZONES[(i // len(RARE_SCHEDULES)) % len(ZONES)]
    return (
        f'[[task]]\nname = "task-{i:05d}"\ncommand = "{command}"\n{schedule}\ntimezone = "{tz}"\n'
    )


def mix_entry(i: int, keys: Sequence[int] | None = None) -> tuple[str, str, str]:
    """(name, cron form, time zone) of the i-th task of the mix, as rare_task writes it."""
    choice = keys[i % len(keys)] if keys else i % len(RARE_SCHEDULES)
    tz = ZONES[(i // len(RARE_SCHEDULES)) % len(ZONES)]
    return f"task-{i:05d}", RARE_CRON[choice].format(m=i % 60), tz


def write_schedule(path: Path, tasks: Sequence[str], header: str = "") -> Path:
    """Write a schedule file from task tables."""
    path.write_text(header + "\n".join(tasks))
    return path


# --- timing --------------------------------------------------------------------------------


@dataclass
class Timing:
    """Wall times of one command, in seconds."""

    label: str
    command: str
    times: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        """Median wall time."""
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        """Fastest run."""
        return min(self.times)

    @property
    def max(self) -> float:
        """Slowest run."""
        return max(self.times)

    def summary(self) -> dict[str, Any]:
        """For JSON."""
        return {
            "label": self.label,
            "command": self.command,
            "runs": len(self.times),
            "median_s": self.median,
            "min_s": self.min,
            "max_s": self.max,
            "mean_s": statistics.fmean(self.times),
            "times_s": self.times,
        }


def hyperfine_version() -> str | None:
    """`hyperfine 1.15.0`, or None when it is not installed."""
    exe = shutil.which("hyperfine")
    if exe is None:
        return None
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip() or None


def time_commands(
    commands: Sequence[tuple[str, Sequence[str]]],
    env: Mapping[str, str],
    runs: int,
    warmup: int,
    prepare: Sequence[str] | None = None,
    use_hyperfine: bool = True,
    cwd: Path | None = None,
) -> list[Timing]:
    """Time each (label, argv) as a whole process: hyperfine -N, or a perf_counter loop.

    The runs are split into rounds (hyperfine is called once per round, with every command), so
    a burst of load from something else on the machine hits all commands alike, not just the
    one that happened to be timed then: the ratios are what the targets are about.
    `prepare` runs before every timed run (untimed). Output goes to /dev/null; a non-zero exit
    stops the benchmark, so a broken command is never timed as a fast one.
    """
    rounds = max(1, min(ROUNDS, runs // 3))
    timings = [Timing(label, shlex.join(command)) for label, command in commands]
    for i in range(rounds):
        share = runs // rounds + (1 if i < runs % rounds else 0)
        if use_hyperfine and shutil.which("hyperfine"):
            got = _hyperfine(commands, env, share, warmup, prepare, cwd)
        else:
            got = _loop(commands, env, share, warmup, prepare, cwd)
        for timing, more in zip(timings, got, strict=True):
            timing.times.extend(more.times)
    return timings


ROUNDS = 3


def _hyperfine(
    commands: Sequence[tuple[str, Sequence[str]]],
    env: Mapping[str, str],
    runs: int,
    warmup: int,
    prepare: Sequence[str] | None,
    cwd: Path | None,
) -> list[Timing]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        argv = ["hyperfine", "-N", "--style", "none", "--export-json", out.name]
        argv += ["--runs", str(runs), "--warmup", str(warmup)]
        if prepare is not None:
            argv += ["--prepare", shlex.join(prepare)]
        for label, command in commands:
            argv += ["--command-name", label, shlex.join(command)]
        done = subprocess.run(argv, env=dict(env), cwd=cwd, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"bench: hyperfine failed:\n{done.stdout}\n{done.stderr}")
        data = json.loads(Path(out.name).read_text())
    return [
        Timing(label, shlex.join(command), list(result["times"]))
        for (label, command), result in zip(commands, data["results"], strict=True)
    ]


def _loop(
    commands: Sequence[tuple[str, Sequence[str]]],
    env: Mapping[str, str],
    runs: int,
    warmup: int,
    prepare: Sequence[str] | None,
    cwd: Path | None,
) -> list[Timing]:
    timings = []
    for label, command in commands:
        timing = Timing(label, shlex.join(command))
        for i in range(warmup + runs):
            if prepare is not None:
                subprocess.run(prepare, env=dict(env), cwd=cwd, check=True)
            start = time.perf_counter()
            done = subprocess.run(
                command, env=dict(env), cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            elapsed = time.perf_counter() - start
            if done.returncode != 0:
                sys.exit(f"bench: {timing.command} exited {done.returncode}: {done.stderr!r}")
            if i >= warmup:
                timing.times.append(elapsed)
        timings.append(timing)
    return timings


def max_rss_kib(command: Sequence[str], env: Mapping[str, str], cwd: Path | None = None) -> int:
    """Peak resident memory of a process that runs to completion (what `time -v` reports)."""
    proc = subprocess.Popen(
        command, env=dict(env), cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"bench: {shlex.join(command)} exited {proc.returncode}")
    return int(usage.ru_maxrss)


def proc_status_kib(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM (peak RSS) ... of a live process, in KiB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key.startswith("Vm") and rest.strip().endswith("kB"):
            values[key] = int(rest.split()[0])
    return values


# --- -X importtime -------------------------------------------------------------------------


@dataclass
class ImportLine:
    """One line of `python -X importtime`: a module, its own time and its subtree's, in us."""

    name: str
    depth: int
    self_us: int
    cumulative_us: int
    children: list[ImportLine] = field(default_factory=list)


def importtime(
    python: Path,
    args: Sequence[str],
    env: Mapping[str, str],
    prepare: Sequence[str] | None = None,
    runs: int = 5,
) -> list[ImportLine]:
    """`python -X importtime ARGS`, `runs` times (warm); per module the median of each number."""
    samples: dict[str, list[tuple[int, int]]] = {}
    order: list[tuple[str, int]] = []
    for i in range(runs + 1):
        if prepare is not None:
            subprocess.run(prepare, check=True)
        done = subprocess.run(
            [str(python), "-X", "importtime", *args],
            env=dict(env),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines = _parse_importtime(done.stderr)
        if i == 0:  # the first run fills the bytecode cache
            continue
        if not order:
            order = [(line.name, line.depth) for line in lines]
        for line in lines:
            samples.setdefault(line.name, []).append((line.self_us, line.cumulative_us))
    result = []
    for name, depth in order:
        values = samples[name]
        self_us = int(statistics.median(v[0] for v in values))
        cum_us = int(statistics.median(v[1] for v in values))
        result.append(ImportLine(name, depth, self_us, cum_us))
    _link(result)
    return result


_IMPORT_RE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def _parse_importtime(text: str) -> list[ImportLine]:
    lines = []
    for raw in text.splitlines():
        m = _IMPORT_RE.match(raw)
        if m:
            depth = (len(m.group(3)) - 1) // 2
            lines.append(ImportLine(m.group(4), depth, int(m.group(1)), int(m.group(2))))
    return lines


def _link(lines: list[ImportLine]) -> None:
    """importtime prints children before their parent; attach each line to its parent."""
    pending: dict[int, list[ImportLine]] = {}
    for line in lines:
        line.children = pending.pop(line.depth + 1, [])
        pending.setdefault(line.depth, []).append(line)


def top_cumulative(lines: Sequence[ImportLine], count: int) -> list[ImportLine]:
    """The modules with the largest cumulative import time."""
    return sorted(lines, key=lambda line: line.cumulative_us, reverse=True)[:count]


def self_by_package(lines: Sequence[ImportLine]) -> list[tuple[str, int, int]]:
    """(top-level package, modules, summed self time in us), largest first."""
    totals: dict[str, list[int]] = {}
    for line in lines:
        top = line.name.split(".")[0]
        slot = totals.setdefault(top, [0, 0])
        slot[0] += 1
        slot[1] += line.self_us
    return sorted(((k, v[0], v[1]) for k, v in totals.items()), key=lambda r: -r[2])


def foreign_children(
    lines: Sequence[ImportLine], prefix: str, floor_us: int
) -> list[tuple[str, str, int]]:
    """(importer, module, cumulative us): what modules under `prefix` import from outside it."""
    found = []
    for line in lines:
        if line.name.split(".")[0] != prefix:
            continue
        for child in line.children:
            if child.name.split(".")[0] != prefix and child.cumulative_us >= floor_us:
                found.append((line.name, child.name, child.cumulative_us))
    return sorted(found, key=lambda r: -r[2])


# --- the machine ---------------------------------------------------------------------------


def machine(tool: Tool, workdir: Path) -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu = "unknown"
    with_model = [
        line.split(":", 1)[1].strip()
        for line in Path("/proc/cpuinfo").read_text().splitlines()
        if line.startswith("model name")
    ]
    if with_model:
        cpu = with_model[0]
    mem = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        ),
        "unknown",
    )
    probe = (
        "import sys, importlib.metadata as m, importlib.util as u\n"
        "print(sys.version.split()[0])\n"
        "spec = u.find_spec('cronctl')\n"
        "print('editable', spec is None or 'site-packages' not in (spec.origin or ''))\n"
        "for d in ('cronctl', 'croniter', 'typer', 'rich', 'filelock'):\n"
        "    try: print(d, m.version(d))\n"
        "    except m.PackageNotFoundError: print(d, 'not installed')\n"
    )
    out = subprocess.run(  # in workdir: `-c` puts the current directory on sys.path
        [str(tool.python), "-c", probe], capture_output=True, text=True, check=True, cwd=workdir
    ).stdout.splitlines()
    versions = dict(line.split(" ", 1) for line in out[1:])
    editable = versions.pop("editable") == "True"
    return {
        "cpu": cpu,
        "nproc": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "memory": mem,
        "kernel": platform.release(),
        "os": _os_name(),
        "python": out[0],
        "python_path": str(tool.python),
        "versions": versions,
        "editable_install": editable,
        "hyperfine": hyperfine_version() or "not installed (perf_counter loop)",
        "tmp_filesystem": filesystem_of(workdir),
        "cronctl_source": source_revision(),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def source_revision() -> str:
    """The checkout's commit, and whether cronctl/ has uncommitted changes."""
    repo = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--", "cronctl"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"{head}{' + uncommitted changes in cronctl/' if dirty else ''}"


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.system()


def filesystem_of(path: Path) -> str:
    """The file system type of the mount holding `path` (from /proc/self/mountinfo)."""
    best, kind = "", "unknown"
    target = str(path.resolve())
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        mount = left.split()[4]
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, kind = mount, right.split()[0]
    return kind


def print_machine(info: Mapping[str, Any]) -> None:
    """The machine, as a short block."""
    versions = ", ".join(f"{k} {v}" for k, v in info["versions"].items())
    print(f"machine: {info['cpu']}, {info['nproc']} CPUs, {info['memory']} RAM")
    print(f"         {info['os']}, Linux {info['kernel']}, temp dir on {info['tmp_filesystem']}")
    print(f"python:  {info['python']} ({info['python_path']}); {versions}")
    print(f"timing:  {info['hyperfine']}; cronctl source: {info['cronctl_source']}")
    print(f"load:    {info['loadavg_at_start']} (1, 5, 15 min) when the benchmark started")
    if info.get("editable_install"):
        print(
            "warning: cronctl is an editable install here: its finder runs in every Python"
            " start, `python -c pass` included (~15 ms here), which flatters every ratio to"
            " the floor; measure a `pip install .` (non-editable) copy"
        )
    if info["loadavg_at_start"][0] > 0.5 * (info["usable_cpus"] or 1):
        print("warning: the machine is busy; timings will be noisy (ratios less so)")


# --- output --------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    """Seconds as milliseconds, one decimal."""
    return f"{seconds * 1000:.1f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str = "") -> None:
    """A plain aligned table (also valid Markdown)."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    if title:
        print(f"\n{title}\n")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")


def timing_rows(timings: Sequence[Timing], floor: Timing | None = None) -> list[list[str]]:
    """Rows: label, median, min, max (ms), runs, and the ratio to the floor."""
    rows = []
    for t in timings:
        ratio = f"{t.median / floor.median:.2f}x" if floor else ""
        rows.append([t.label, ms(t.median), ms(t.min), ms(t.max), str(len(t.times)), ratio])
    return rows


TIMING_HEADERS = ("command", "median ms", "min ms", "max ms", "runs", "ratio")


def verdict(ok: bool) -> str:
    """Met / not met."""
    return "met" if ok else "NOT MET"


def add_out(p: argparse.ArgumentParser) -> None:
    """--out DIR: where the results go (every script has it, with the same default)."""
    p.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        default=RESULTS_DIR,
        help=f"write the results as JSON into DIR (default: {RESULTS_DIR})",
    )


def write_json(out: Path, name: str, data: Mapping[str, Any]) -> Path:
    """Write the results as OUT/NAME-YYYYMMDDTHHMMSSZ.json (a new file each run); say where."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    path.write_text(json.dumps(data, indent=2, default=_default) + "\n")
    print(f"\nwrote {path}")
    return path


def _default(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)  # type: ignore[call-overload]
    raise TypeError(f"cannot encode {type(value).__name__}")


def run_checked(
    command: Sequence[str],
    env: Mapping[str, str],
    cwd: Path | None = None,
    ok: Callable[[int], bool] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run once; stop the benchmark with cronctl's own words if it did not succeed."""
    done = subprocess.run(command, env=dict(env), cwd=cwd, capture_output=True, text=True)
    good = ok(done.returncode) if ok else done.returncode == 0
    if not good:
        sys.exit(
            f"bench: {shlex.join(command)} exited {done.returncode}\n{done.stdout}{done.stderr}"
        )
    return done
