"""Exports cannot be steered: no schedule value adds a line, a section or a YAML document."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from cronctl import load
from cronctl.core.export import kubernetes, systemd
from tests.helpers import Cli, write_schedule

BASE = "2026-03-20T10:00:30Z"
INJECT = "x\n\n[Service]\nExecStartPre=/bin/touch /tmp/pwned\nUser=root\n---\nkind: Pod\n"
ESC = "\x1b]0;title\x07\x1b[2J\x85\u2028"


@pytest.mark.parametrize("key", ["description", "shell", "workdir"])
def test_schema_refuses_control_characters_in_one_line_values(
    cli: Cli, tmp_path: Path, key: str
) -> None:
    value = INJECT.replace("\n", "\\n")
    path = write_schedule(
        tmp_path / "s.toml", [f'name = "a"\ncommand = "true"\nhourly = true\n{key} = "{value}"']
    )
    check = cli("check", "-f", str(path))
    assert check.returncode == 1
    assert f"s.toml:6: task a: '{key}' contains a control character (\\u000a)" in check.stdout
    export = cli("export", "--to", "systemd", "--user", "app", "-f", str(path),
                 "-o", str(tmp_path / "u"))  # fmt: skip
    assert export.returncode == 2 and not (tmp_path / "u").exists()
    assert "control character" in export.stdout + export.stderr


def _hostile(tmp_path: Path) -> Path:
    # Values the schema allows (a command is many lines; env values may hold anything but NUL).
    toml = INJECT.replace("\n", "\\n")
    command = toml + "\\\\"
    return write_schedule(
        tmp_path / "s.toml",
        [
            f'name = "a"\ncommand = "{command}"\nhourly = true\n'
            f'skip = "{command}"\nwhen = "{command}"\n'
            'description = "ends in a backslash \\\\"\nworkdir = "/tmp"\n'
            f'env = {{ HOSTILE = "{toml}\\u001b[2J\\u0007" }}',
        ],
    )


def _sections(unit: str) -> list[str]:
    return [line for line in unit.splitlines() if line.startswith("[")]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemd_export_of_hostile_values_adds_no_line(cli: Cli, tmp_path: Path) -> None:
    path = _hostile(tmp_path)
    out = tmp_path / "u"
    result = cli("export", "--to", "systemd", "--user", "app", "-f", str(path), "-o", str(out),
                 "--now", BASE)  # fmt: skip
    assert result.returncode == 0, result.stderr
    service = (out / "cronctl-a.service").read_text()
    assert _sections(service) == ["[Unit]", "[Service]"]
    # The one User= line is --user's; no value of the schedule adds another, or a directive.
    assert [x for x in service.splitlines() if x.startswith("User=")] == ["User=app"]
    assert not any(x.startswith(("ExecStartPre=", "kind:")) for x in service.splitlines())
    assert all(c == "\n" or c >= " " for c in service)
    verify = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(out / "cronctl-a.service"),
         str(out / "cronctl-a.timer")],
        capture_output=True, text=True, check=False, cwd=out,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stderr
    assert "Description=ends in a backslash \n" in service


def _task(tmp_path: Path, **changes: object) -> systemd.Task:
    path = write_schedule(
        tmp_path / "ok.toml", ['name = "a"\ncommand = "true"\nhourly = true\nworkdir = "/srv"']
    )
    return dataclasses.replace(load(path).tasks[0], **changes)  # type: ignore[arg-type]


def test_exporters_escape_values_that_never_passed_the_schema(tmp_path: Path) -> None:
    now = datetime(2026, 3, 20, tzinfo=UTC)
    task = _task(tmp_path, description=INJECT + ESC, source=tmp_path / f"s{INJECT}.toml")
    unit = systemd.export_task(task, now, "app").files["cronctl-a.service"]
    assert _sections(unit) == ["[Unit]", "[Service]"]
    assert all(c == "\n" or " " <= c < "\x7f" or c > "\x9f" for c in unit)
    assert "\u2028" not in unit
    bad = systemd.export_task(_task(tmp_path, workdir=Path("/srv\nUser=root")), now, "app")
    assert bad.skipped and "workdir /srv\\nUser=root: systemd cannot express it" in bad.lost[0]
    job = kubernetes.export_task(
        _task(tmp_path, workdir=Path(INJECT), source=tmp_path / INJECT), now, "img"
    )
    docs = list(yaml.safe_load_all(job.files["a.yaml"]))
    assert len(docs) == 1 and docs[0]["kind"] == "CronJob"
    container = docs[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["workingDir"] == INJECT


def test_kubernetes_export_of_hostile_values_is_one_document(cli: Cli, tmp_path: Path) -> None:
    path = _hostile(tmp_path)
    result = cli("export", "--to", "kubernetes", "--image", "img", "-f", str(path), "--now", BASE)
    assert result.returncode == 0, result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["kind"] for d in docs] == ["CronJob"]
    container = docs[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][2] == INJECT + "\\"
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["HOSTILE"] == INJECT + "\x1b[2J\x07"
