"""Chain ends as files in lock_dir: written whole, read without following a link, each
field checked (any machine sharing the directory writes them)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cronctl.coord.files.adapter import FilesCoordinator
from cronctl.coord.port import ChainEnd

T0 = datetime(2026, 8, 3, 2, 0, tzinfo=UTC)


def test_an_end_no_reader_can_use_is_left_out_and_a_link_is_not_followed(
    tmp_path: Path,
) -> None:
    coord = FilesCoordinator(tmp_path / "locks", host="m1", pid=1)
    good = ChainEnd("extract", T0, "ok", "20260803T0200Z-00000000000000ab", "m1",
                    T0 + timedelta(seconds=3))  # fmt: skip
    coord.record_end(good)
    ends = tmp_path / "locks" / "ends"
    (path,) = ends.iterdir()  # no temporary file left beside it
    record = json.loads(path.read_text())
    stem = path.name.split("~")[0]  # TASK@STAMP: another host's key follows
    bad = {
        "outcome": "skipped: paused",  # not an end
        "run_id": "../../etc",
        "occurrence": "infinity",
        "host": "",
    }
    for i, (field, value) in enumerate(bad.items()):
        other = f"{stem}~{i:016x}.end"
        (ends / other).write_text(json.dumps({**record, field: value}))
    (ends / f"{stem}~{9:016x}.end").write_text("{not json")
    outside = tmp_path / "planted.json"
    outside.write_text(json.dumps(record))
    (ends / f"{stem}~{8:016x}.end").symlink_to(outside)
    assert coord.chain_ends({"extract"}, T0) == [good]
