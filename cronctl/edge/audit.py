"""The audit record of the dashboard's actions in ``STATE_DIR/audit.jsonl`` (docs/dashboard.md).

One ``write`` on an ``O_APPEND`` descriptor (two writers' lines never interleave), synced
before the action goes ahead (one the record cannot take is not done); ``\\u`` escapes keep
a terminal escape in a reason inert under `cat`."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from cronctl.edge.safefiles import AUDIT_FILE, ensure_private_dir, open_nofollow


def append_record(state_dir: Path, record: Mapping[str, object]) -> Path:
    path = ensure_private_dir(state_dir) / AUDIT_FILE
    line = json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n"
    fd = open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    return path
