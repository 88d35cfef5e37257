"""cronctl against yacron (a Python cron daemon from PyPI) on the same 1,000 jobs, same run.

Measured here, each as whole processes:

- validating and loading the config: `cronctl check -f FILE` against `yacron -v -c FILE`
  (yacron's `--validate-config`: parse + validate + build every job, then exit 0);
- start-up floors: `python -c pass`, `cronctl --version`, `yacron --version`;
- resident memory while running: `cronctl work` and `yacron -c FILE`, each started, waited for
  until loaded (cronctl: its "waiting for the next minute" line; yacron: its first "Will sleep
  for" debug line), VmRSS / VmHWM read from /proc, then stopped with SIGTERM;
- CPU time of one minute tick of each daemon (both keep running across one minute boundary).

yacron is installed with pip into its own virtualenv (`--yacron-venv`, /tmp/yacron-venv),
created from the same base interpreter when missing, so it never touches cronctl's.

    /tmp/venv/bin/python bench/peers.py [--runs 5] [--out DIR]
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import _common as c

JOBS = 1000
YACRON_ZONES = {"+05:30": "Asia/Kolkata"}  # pytz has no fixed offsets; same offset, no DST


def main() -> None:
    p = c.parser(__doc__.splitlines()[0], runs=5, warmup=1)
    p.add_argument("--yacron-venv", type=Path, default=Path("/tmp/yacron-venv"))
    p.add_argument("--no-tick", action="store_true", help="skip the one-minute tick measurement")
    args = p.parse_args()
    tool = c.Tool.find(args.cronctl)
    yacron = ensure_yacron(tool, args.yacron_venv)
    with c.Sandbox(args.keep) as box:
        results = measure(
            tool, yacron, box, args.runs, args.warmup, not args.no_hyperfine, not args.no_tick
        )
        c.write_json(args.out, "peers", results)


def ensure_yacron(tool: c.Tool, venv: Path) -> Path:
    """yacron's console script, installing it into its own venv first if needed."""
    exe = venv / "bin" / "yacron"
    if exe.exists():
        return exe
    base = subprocess.run(
        [str(tool.python), "-c", "import sys; print(sys._base_executable)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"installing yacron into {venv} (python {base}) ...")
    steps = [
        [base, "-m", "venv", str(venv)],
        [str(venv / "bin" / "pip"), "install", "-q", "yacron"],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(
                f"bench: yacron could not be installed: {' '.join(step)} exited "
                f"{done.returncode}\n{done.stdout}{done.stderr}"
            )
    return exe


def write_configs(box: c.Sandbox) -> tuple[Path, Path]:
    """The same 1,000 jobs: a cronctl TOML (friendly keys) and a yacron YAML (cron form)."""
    toml = c.write_schedule(
        box.root / "schedules.toml", [c.rare_task(i, keys=c.SELDOM) for i in range(JOBS)]
    )
    lines = ["jobs:"]
    for i in range(JOBS):
        name, cron, tz = c.mix_entry(i, keys=c.SELDOM)
        lines += [
            f"  - name: {name}",
            '    command: "true"',
            f'    schedule: "{cron}"',
            f"    timezone: {YACRON_ZONES.get(tz, tz)}",
        ]
    yaml = box.root / "yacron.yaml"
    yaml.write_text("\n".join(lines) + "\n")
    return toml, yaml


def measure(
    tool: c.Tool, yacron: Path, box: c.Sandbox, runs: int, warmup: int, hyper: bool, tick: bool
) -> dict[str, object]:
    info = c.machine(tool, box.root)
    info["yacron"] = version(yacron)
    c.print_machine(info)
    print(f"peer:    yacron {info['yacron']} ({yacron})")
    toml, yaml = write_configs(box)
    env = box.env()
    c.run_checked([str(tool.cronctl), "check", "-f", str(toml)], env)
    c.run_checked([str(yacron), "-v", "-c", str(yaml)], env)

    commands = [
        ("python -c pass (floor)", [str(tool.python), "-c", "pass"]),
        ("cronctl --version", [str(tool.cronctl), "--version"]),
        ("yacron --version", [str(yacron), "--version"]),
        (f"cronctl check ({JOBS} tasks)", [str(tool.cronctl), "check", "-f", str(toml)]),
        (f"yacron --validate-config ({JOBS} jobs)", [str(yacron), "-v", "-c", str(yaml)]),
    ]
    timings = c.time_commands(commands, env, runs, warmup, use_hyperfine=hyper)
    rss = {label: c.max_rss_kib(argv, env) for label, argv in commands}
    floor = timings[0]
    rows = [
        [
            t.label,
            c.ms(t.median),
            c.ms(t.min),
            c.ms(t.max),
            len(t.times),
            f"{t.median / floor.median:.1f}x",
            f"{rss[t.label] / 1024:.1f}",
        ]
        for t in timings
    ]
    c.table(
        ("command", "median ms", "min ms", "max ms", "runs", "vs floor", "max RSS MiB"),
        rows,
        f"Validate and load {JOBS} jobs (whole processes)",
    )

    daemons = run_daemons(tool, yacron, toml, yaml, box, env, tick)
    rows = [
        [
            d["label"],
            f"{d['loaded_s']:.2f}",
            f"{d['rss_loaded_kib'] / 1024:.1f}",
            f"{d['rss_kib'] / 1024:.1f}",
            f"{d['hwm_kib'] / 1024:.1f}",
            f"{d['load_cpu_s']:.2f}",
            f"{d['tick_cpu_s']:.3f}" if d["tick_cpu_s"] is not None else "-",
        ]
        for d in daemons
    ]
    c.table(
        (
            "daemon",
            "loaded after s",
            "VmRSS loaded MiB",
            "VmRSS after tick MiB",
            "VmHWM MiB",
            "CPU to load s",
            "CPU per minute tick s",
        ),
        rows,
        f"Running with {JOBS} jobs",
    )
    return {
        "benchmark": "peers",
        "machine": info,
        "jobs": JOBS,
        "timings": [t.summary() for t in timings],
        "max_rss_kib": rss,
        "daemons": daemons,
    }


def version(exe: Path) -> str:
    done = subprocess.run([str(exe), "--version"], capture_output=True, text=True)
    return (done.stdout or done.stderr).strip()


def run_daemons(
    tool: c.Tool,
    yacron: Path,
    toml: Path,
    yaml: Path,
    box: c.Sandbox,
    env: dict[str, str],
    tick: bool,
) -> list[dict[str, object]]:
    """Start both daemons, wait until each has loaded, read memory; optionally across a tick."""
    specs = [
        (
            "cronctl work",
            [str(tool.cronctl), "work", "-f", str(toml), "--grace", "5"],
            "waiting for the next minute",
        ),
        ("yacron", [str(yacron), "-l", "DEBUG", "-c", str(yaml)], "Will sleep for"),
    ]
    running: list[dict] = []
    ticks: dict[str, float | None] = {label: None for label, _, _ in specs}
    try:
        for label, argv, ready in specs:
            log = box.root / f"{label.split()[0]}.log"
            handle = log.open("w")
            start = time.monotonic()
            proc = subprocess.Popen(argv, env=env, stdout=handle, stderr=subprocess.STDOUT)
            d = {"label": label, "proc": proc, "log": log, "handle": handle, "ready": ready}
            running.append(d)
            # One at a time, so neither's load competes with the other's for the CPUs.
            wait_for(d, count=1)
            d["loaded_s"] = time.monotonic() - start
            d["load_cpu_s"] = cpu_seconds(proc.pid)
            d["status"] = d["loaded_status"] = c.proc_status_kib(proc.pid)
        if tick:
            boundary = (int(time.time()) // 60 + 1) * 60
            if boundary - time.time() < 2.0:
                boundary += 60
            at = time.strftime("%H:%M:%S", time.gmtime(boundary))
            print(f"\nwaiting for the minute boundary at {at} UTC to measure one tick of each ...")
            time.sleep(max(0.0, boundary - 1.0 - time.time()))
            before = {d["label"]: cpu_seconds(d["proc"].pid) for d in running}
            logged = running[1]["log"].read_text(errors="replace").count(running[1]["ready"])
            time.sleep(max(0.0, boundary - time.time()) + 0.5)
            wait_for(running[1], count=logged + 1, timeout=90)  # yacron logs again after its tick
            time.sleep(5.0)  # cronctl's tick is done long before this
            for d in running:
                ticks[d["label"]] = cpu_seconds(d["proc"].pid) - before[d["label"]]
                d["status"] = c.proc_status_kib(d["proc"].pid)
    finally:
        for d in running:
            d["proc"].send_signal(signal.SIGTERM)
        for d in running:
            try:
                d["proc"].wait(timeout=30)
            except subprocess.TimeoutExpired:
                d["proc"].kill()
            d["handle"].close()
    return [
        {
            "label": d["label"],
            "loaded_s": d["loaded_s"],
            "load_cpu_s": d["load_cpu_s"],
            "rss_loaded_kib": d["loaded_status"].get("VmRSS", 0),
            "rss_kib": d["status"].get("VmRSS", 0),
            "hwm_kib": d["status"].get("VmHWM", 0),
            "tick_cpu_s": ticks[d["label"]],
            "exit_code": d["proc"].returncode,
        }
        for d in running
    ]


def wait_for(d: dict, count: int, timeout: float = 120.0) -> None:
    """Until the daemon's log holds its ready line `count` times."""
    deadline = time.monotonic() + timeout
    while d["log"].read_text(errors="replace").count(d["ready"]) < count:
        if d["proc"].poll() is not None:
            tail = d["log"].read_text()[-2000:]
            sys.exit(f"bench: {d['label']} exited {d['proc'].returncode}:\n{tail}")
        if time.monotonic() > deadline:
            sys.exit(f"bench: {d['label']} not ready after {timeout:g} s; see {d['log']}")
        time.sleep(0.05)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process (its own)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
