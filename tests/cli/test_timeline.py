"""`cronctl timeline`: the heat map and task rows as text, and an SVG a real browser draws."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import pytest

from tests.helpers import Cli, write_schedule

NOW = "2026-08-03T09:30:00Z"  # a Monday
SVG_NS = "{http://www.w3.org/2000/svg}"
TASKS = [
    'name = "heartbeat"\ncommand = "true"\nevery_minute = true',
    'name = "refresh"\ncommand = "true"\ncron = "*/5 8-17 * * MON-FRI"',
    'name = "backup"\ncommand = "true"\ndaily_at = "03:00"',
    'name = "digest"\ncommand = "true"\ndaily_at = "09:00"\ntimezone = "Europe/Berlin"',
    'name = "old-job"\ncommand = "true"\nhourly = true\npaused = true',
]


@pytest.fixture
def schedule(tmp_path: Path) -> Path:
    return write_schedule(tmp_path / "schedules.toml", TASKS)


def test_piped_timeline_is_plain_characters_with_a_row_per_day_and_task(
    cli: Cli, schedule: Path
) -> None:
    result = cli("timeline", "-f", str(schedule), "--now", NOW, "--days", "3")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # Two zones: drawn in UTC; heartbeat (every minute) is left out of the heat map.
    assert lines[0].startswith("Runs per hour (UTC), 2026-08-03 to 2026-08-05: 4 tasks")
    assert "\x1b[" not in result.stdout
    days = [line for line in lines if line[:3] in ("Mon", "Tue", "Wed")]
    assert len(days) == 3
    # 24 hours, two characters each: refresh's 12 runs at 08:00, nothing at 00:00.
    cells = days[0][11:]
    assert len(cells) == 48 and cells[16:18] == "**" and cells[0:2] == ".."
    rows = {line.split()[0]: line for line in lines if line.split()[:1]}
    assert rows["backup"].split()[-1] == "3"  # three 03:00 runs in three days
    assert rows["digest"][23 + 14] == "-"  # 09:00 Berlin is 07:00 UTC in August: 1 run
    assert "paused" in rows["old-job"]
    assert max(len(line) for line in lines) <= 80


def _svg(cli: Cli, schedule: Path, target: Path) -> ET.Element:
    result = cli("timeline", "-f", str(schedule), "--now", NOW, "--svg", str(target))
    assert result.returncode == 0, result.stderr
    return ET.parse(target).getroot()  # noqa: S314 (our own output, written by this test)


def test_svg_is_well_formed_with_a_cell_per_hour_and_a_lane_per_task(
    cli: Cli, schedule: Path, tmp_path: Path
) -> None:
    root = _svg(cli, schedule, tmp_path / "t.svg")
    assert root.tag == f"{SVG_NS}svg"
    hours = [r for r in root.iter(f"{SVG_NS}rect") if r.get("class") == "hour"]
    assert len(hours) == 7 * 24
    runs = [int(r.get("data-runs", "0")) for r in hours]
    # heartbeat's 60 runs an hour are not in the heat map; a weekday 08:00 has 12 refreshes.
    assert min(runs) == 0 and runs[8] == 12 and runs[5 * 24 + 8] == 0
    texts = [t.text for t in root.iter(f"{SVG_NS}text")]
    for name in ("heartbeat", "refresh", "backup", "digest", "old-job"):
        assert name in texts
    assert "paused" in texts


def _png_pixels(path: Path, rows: int) -> tuple[int, int, list[bytes]]:
    """Width, height and the first `rows` unfiltered scanlines of an 8-bit RGB(A) PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6)
    bpp = 4 if colour == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * bpp
    out: list[bytes] = []
    prev = bytearray(stride)
    for y in range(rows):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        out.append(bytes(line[j] for j in range(len(line)) if bpp == 3 or j % 4 != 3))
        prev = line
    return width, height, out


@pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="Debian's `chromium` is not installed (apt-get install chromium); "
    "test_svg_is_well_formed_... still checks the SVG's structure",
)
def test_chromium_draws_the_svg_with_the_busiest_hour_darkest(
    cli: Cli, schedule: Path, tmp_path: Path
) -> None:
    _svg(cli, schedule, tmp_path / "t.svg")
    png = tmp_path / "t.png"
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={profile}", f"--screenshot={png}",
         "--window-size=1000,560", (tmp_path / "t.svg").as_uri()],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    width, height, rows = _png_pixels(png, 80)
    assert (width, height) == (1000, 560)

    def pixel(x: int, y: int) -> tuple[int, ...]:
        return tuple(rows[y][x * 3 : x * 3 + 3])

    assert pixel(5, 5) == (255, 255, 255)
    # Monday's row (y 64-84): 08:00 is the busiest hour (darkest green), 00:00 the quietest.
    busy, quiet = pixel(190 + 8 * 30 + 4, 74), pixel(190 + 4, 74)
    assert busy[1] > busy[0] and busy[1] > busy[2]  # green
    assert sum(busy) < sum(quiet) < 3 * 255


LEGEND = "runs in an hour: . 0  - 1  + 2-3  = 4-7  * 8-15  # 16-31  @ 32+"


def _rows(text: str) -> dict[str, str]:
    return {line.split()[0]: line for line in text.splitlines() if line.split()[:1]}


def _day_cells(text: str, day: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(day))[11:]


def test_the_scale_is_fixed_so_72_and_73_runs_an_hour_look_alike(cli: Cli, tmp_path: Path) -> None:
    # Six 5-minute tasks make 72 runs from 08:00 to 09:59; a 09:00 task makes 09:00 73.
    busy = [f'name = "poll{i}"\ncommand = "true"\ncron = "*/5 8-9 * * *"' for i in range(6)]
    path = write_schedule(
        tmp_path / "busy.toml", [*busy, 'name = "nine"\ncommand = "true"\ndaily_at = "09:00"']
    )
    out = cli("timeline", "-f", str(path), "--now", NOW, "--days", "1").stdout
    cells = _day_cells(out, "Mon 08-03")
    assert cells[16:20] == "@@@@"  # 72 and 73: one level, the top one (32 or more)
    assert LEGEND in out.splitlines()
    # The same count is the same mark in any picture: one daily run is '-', not the darkest.
    lone = write_schedule(
        tmp_path / "lone.toml", ['name = "a"\ncommand = "true"\ndaily_at = "03:00"']
    )
    out = cli("timeline", "-f", str(lone), "--now", NOW, "--days", "1").stdout
    assert _day_cells(out, "Mon 08-03")[6:8] == "--" and LEGEND in out.splitlines()
    assert _rows(out)["a"][23 + 6 : 23 + 8] == "--"


def test_every_minute_tasks_stay_out_of_the_heat_map_unless_asked_for(
    cli: Cli, schedule: Path
) -> None:
    out = cli("timeline", "-f", str(schedule), "--now", NOW, "--days", "1").stdout
    assert _day_cells(out, "Mon 08-03")[0:2] == ".."  # only heartbeat runs at 00:00
    assert (
        "not in the heat map: heartbeat (every minute, 1,440 runs; --include-every-minute "
        "counts them)" in out.replace("\n  ", " ")
    )
    assert max(len(line) for line in out.splitlines()) <= 80
    assert _rows(out)["heartbeat"][23:71] == "@" * 48  # its own row still shows it
    both = cli("timeline", "-f", str(schedule), "--now", NOW, "--days", "1",
               "--include-every-minute").stdout  # fmt: skip
    assert _day_cells(both, "Mon 08-03")[0:2] == "@@" and "not in the heat map" not in both
    assert both.splitlines()[0].endswith("5 tasks, 1,562 runs")
    data = json.loads(cli("timeline", "-f", str(schedule), "--now", NOW, "--json").stdout)
    assert {t["name"]: t["in_heat"] for t in data["tasks"]}["heartbeat"] is False
    assert data["heat"][0][0] == 0 and data["timezone"] == "UTC"


def test_timeline_draws_in_the_zone_the_tasks_share_or_in_tz(cli: Cli, tmp_path: Path) -> None:
    path = write_schedule(
        tmp_path / "s.toml",
        ['name = "digest"\ncommand = "true"\ndaily_at = "09:00"\ntimezone = "Europe/Berlin"',
         'name = "hourly"\ncommand = "true"\nhourly = true\ntimezone = "Europe/Berlin"'],
    )  # fmt: skip
    # 23:30 UTC is 01:30 on the 4th in Berlin: the picture starts on Berlin's today.
    out = cli("timeline", "-f", str(path), "--now", "2026-08-03T23:30:00Z", "--days", "1").stdout
    assert out.splitlines()[0].startswith("Runs per hour (Europe/Berlin), 2026-08-04 to 2026-08-04")
    assert "WHEN IT RUNS (hour of day, Europe/Berlin)" in out
    assert _rows(out)["digest"][23 + 18 : 23 + 20] == "--"  # 09:00 in the 10th pair
    utc = cli("timeline", "-f", str(path), "--now", NOW, "--days", "1", "--tz", "UTC").stdout
    assert _rows(utc)["digest"][23 + 14 : 23 + 16] == "--"  # 07:00 UTC
    # Berlin falls back on 2026-10-25: 02:00-02:59 happens twice, so the hourly task runs
    # twice then; on 2026-03-29 02:00-02:59 never happens.
    fall = cli("timeline", "-f", str(path), "--now", "2026-10-25T00:00:00Z", "--days", "1",
               "--task", "hourly").stdout  # fmt: skip
    assert _day_cells(fall, "Sun 10-25")[:8] == "--" + "--" + "++" + "--"
    spring = cli("timeline", "-f", str(path), "--now", "2026-03-29T00:00:00Z", "--days", "1",
                 "--task", "hourly").stdout  # fmt: skip
    assert _day_cells(spring, "Sun 03-29")[:8] == "--" + "--" + ".." + "--"
    bad = cli("timeline", "-f", str(path), "--tz", "Mars/Base")
    assert bad.returncode == 2 and "--tz 'Mars/Base': unknown time zone" in bad.stderr


def test_task_filter_draws_only_the_named_tasks(cli: Cli, schedule: Path) -> None:
    out = cli("timeline", "-f", str(schedule), "--now", NOW, "--days", "1",
              "--task", "digest", "--task", "backup").stdout  # fmt: skip
    assert out.splitlines()[0].endswith(": 2 tasks, 2 runs")
    assert [r for r in _rows(out) if r in ("heartbeat", "refresh", "backup", "digest")] == [
        "backup", "digest"
    ]  # fmt: skip
    # Named, an every-minute task is counted: it was asked for.
    beat = cli("timeline", "-f", str(schedule), "--now", NOW, "--days", "1",
               "--task", "heartbeat").stdout  # fmt: skip
    assert _day_cells(beat, "Mon 08-03") == "@" * 48 and "not in the heat map" not in beat
    unknown = cli("timeline", "-f", str(schedule), "--task", "nope")
    assert unknown.returncode == 2 and not unknown.stdout
    assert "--task 'nope': no task of that name" in unknown.stderr
