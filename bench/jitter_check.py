"""`cronctl check` on jittered tasks: 2,000 jittered tasks alone, and 10,000 tasks of which
2,000 carry `jitter` (11 s and 56 s before; the search for each task's shortest
period called next_run ~1.7 million times), beside the same 10,000 without jitter: the
target is that the jittered file costs about what the plain one does.

The tasks are scale.py's mix (ten schedule keys, six zones); every fifth carries
`jitter = "10m"`, shorter than every period of the mix, so no search can stop early.
Then 2,000 daily tasks at 2,000 distinct (time, zone) pairs in four zones with daylight
saving, jittered and not: no two share a walk, and each walked its year (8 s against 0.9 s).

    /tmp/venv/bin/python bench/jitter_check.py [--runs 3] [--out DIR]
"""

from __future__ import annotations

import _common as c

NOW = "2026-08-03T12:34:00Z"


def jittered(i: int) -> str:
    """The i-th task of the mix, with a jitter on every fifth."""
    task = c.rare_task(i)
    return task + 'jitter = "10m"\n' if i % 5 == 0 else task


DST_ZONES = ("Europe/Berlin", "America/New_York", "Australia/Sydney", "America/Santiago")


def daily(i: int, jitter: bool) -> str:
    """The i-th of 2,000 daily tasks, each at its own time of day and zone."""
    minute = i % 1440
    return (
        f'[[task]]\nname = "daily-{i:04d}"\ncommand = "true"\n'
        f'daily_at = "{minute // 60:02d}:{minute % 60:02d}"\ntimezone = "{DST_ZONES[i % 4]}"\n'
        + ('jitter = "10m"\n' if jitter else "")
    )


def main() -> None:
    args = c.parser(__doc__.splitlines()[0], runs=3, warmup=0).parse_args()
    tool = c.Tool.find(args.cronctl)
    with c.Sandbox(args.keep) as box:
        info = c.machine(tool, box.root)
        c.print_machine(info)
        alone = c.write_schedule(
            box.root / "jittered-2000.toml", [jittered(i) for i in range(0, 10_000, 5)]
        )
        mixed = c.write_schedule(
            box.root / "mixed-10000.toml", [jittered(i) for i in range(10_000)]
        )
        plain = c.write_schedule(
            box.root / "plain-10000.toml", [c.rare_task(i) for i in range(10_000)]
        )
        days = {
            jitter: c.write_schedule(
                box.root / f"daily-{jitter}.toml", [daily(i, jitter) for i in range(2_000)]
            )
            for jitter in (True, False)
        }
        commands = [
            (label, [str(tool.cronctl), "check", "-f", str(path), "--now", NOW])
            for label, path in (
                ("check 2,000 jittered", alone),
                ("check 10,000 (2,000 jittered)", mixed),
                ("check 10,000 (no jitter)", plain),
                ("check 2,000 daily, distinct, DST zones, jittered", days[True]),
                ("check 2,000 daily, distinct, DST zones (no jitter)", days[False]),
            )
        ]
        timings = c.time_commands(
            commands, box.env(), args.runs, args.warmup, use_hyperfine=not args.no_hyperfine
        )
        c.table(
            ("command", "median ms", "min ms", "max ms", "runs"),
            [[t.label, c.ms(t.median), c.ms(t.min), c.ms(t.max), len(t.times)] for t in timings],
            "check on jittered tasks",
        )
        c.write_json(
            args.out, "jitter_check", {"machine": info, "timings": [t.summary() for t in timings]}
        )


if __name__ == "__main__":
    main()
