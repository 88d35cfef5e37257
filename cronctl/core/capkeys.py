"""The resource caps of a task's command (`memory_max`, `cpu_max`, `nice`, `ionice`): what
was asked; edge/process/limits.py holds them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from cronctl.core.envkeys import UNLIMITED, parse_size
from cronctl.core.values import Check

#: The smallest `memory_max`: below it not even a shell starts under an address-space cap.
MIN_MEMORY = 16 * 1024**2
#: The largest: 1024 TB; past it the kernel's limits overflow.
MAX_MEMORY = 1024**5
#: `cpu_max` is a share of one CPU, in percent: "250%" is two and a half CPUs.
MAX_CPU_PERCENT = 100_000
MAX_NICE = 19
#: `ionice`'s classes, as the kernel numbers them (linux/ioprio.h): best-effort takes a
#: level 0 (first) to 7 (last); idle has none. Realtime needs root and is not offered.
IOPRIO_CLASS_BE = 2
IOPRIO_CLASS_IDLE = 3
IOPRIO_CLASS_SHIFT = 13
_IONICE = r"(idle|best-effort)(?::([0-7]))?\Z"
_PERCENT = r"(\d{1,6})\s*%\Z"
CAP_KEYS: dict[str, Check] = {
    "memory_max": ("str", 'a size such as "512MB", or "unlimited"'),
    "cpu_max": ("str", 'a share of one CPU such as "50%" (or "200%": two), or "unlimited"'),
    "nice": ("int", "an integer 0-19"),
    "ionice": ("str", '"idle", "best-effort" or "best-effort:N" (N 0-7)'),
}


def parse_percent(text: str) -> int:
    """'50%' -> 50 (a share of one CPU); "unlimited" -> UNLIMITED; else ValueError."""
    if text.strip().lower() == "unlimited":
        return UNLIMITED
    match = re.match(_PERCENT, text.strip(), re.ASCII)
    percent = int(match.group(1)) if match else 0
    if not 1 <= percent <= MAX_CPU_PERCENT:
        raise ValueError(
            f"{text[:40]!r} is not a share of a CPU; write a percentage of one CPU from 1% "
            f'to {MAX_CPU_PERCENT}%, e.g. "50%" (half a CPU) or "200%" (two), or "unlimited"'
        )
    return percent


def parse_ionice(text: str) -> int:
    """'idle' / 'best-effort' / 'best-effort:N' -> the I/O priority ioprio_set takes (alone,
    best-effort is level 4, the kernel's default); else ValueError."""
    match = re.match(_IONICE, text.strip().lower(), re.ASCII)
    if match is None or (match.group(1) == "idle" and match.group(2) is not None):
        raise ValueError(
            f'{text[:40]!r} is not an I/O class; write "idle" (only when the disk is '
            'otherwise unused), "best-effort" or "best-effort:N" with N from 0 (first) to 7 '
            "(last); realtime is not offered"
        )
    if match.group(1) == "idle":
        return IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT
    return IOPRIO_CLASS_BE << IOPRIO_CLASS_SHIFT | int(match.group(2) or 4)


def cap_value_problem(key: str, value: Any) -> tuple[str, str] | None:
    """Value checks of a key of CAP_KEYS whose type is right: (message, code) or None."""
    try:
        if key == "memory_max":
            if parse_size(value, MIN_MEMORY, "16MB") > MAX_MEMORY:
                raise ValueError(f"size {value!r} is above the largest cap, 1024TB")
        elif key == "cpu_max":
            parse_percent(value)
        elif key == "ionice":
            parse_ionice(value)
        elif not 0 <= value <= MAX_NICE:
            raise ValueError(f"{value} is not a niceness 0 (normal) to 19 (the lowest)")
    except ValueError as exc:
        return f"{key!r}: {exc}", "bad-value"
    return None


#: The Task field of each cap from its validated value.
CAP_FIELDS: dict[str, Callable[[Any], Any]] = {
    "memory_max": lambda value: parse_size(value, MIN_MEMORY),
    "cpu_max": parse_percent,
    "nice": int,
    "ionice": parse_ionice,
}
