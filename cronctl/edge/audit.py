"""The audit record of the dashboard's actions: one JSON line per action asked for, in
``STATE_DIR/audit.jsonl`` (docs/dashboard.md, "The audit record").

Lines are appended with one ``write`` on an ``O_APPEND`` descriptor, so lines of two
writers never interleave, and synced before the action goes ahead: an action the record
cannot take is not done. The file is opened like every file cronctl keeps (no link, owned
by this user, not writable by others), and JSON's ``\\u`` escapes keep a terminal escape in
a reason inert when the file is read with `cat`."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from cronctl.edge.safefiles import AUDIT_FILE, ensure_private_dir, open_nofollow


def append_record(state_dir: Path, record: Mapping[str, object]) -> Path:
    """Append `record` as one line to the audit file of `state_dir` (made if need be, as
    the state directory is by every writing command); return the file's path."""
    path = ensure_private_dir(state_dir) / AUDIT_FILE
    line = json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n"
    fd = open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    return path
