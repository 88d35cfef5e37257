"""docs/containers.md: its Kubernetes YAML parses, its kinds are right, it runs `cronctl work`,
and the schedule it carries is one cronctl accepts (no cluster runs it); its Dockerfile's
entrypoint and health checks run as written, in a namespace like the container's."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronctl.core.assemble import build_schedule
from cronctl.core.schema import FileResult, parse_document
from cronctl.core.tomllines import index_lines
from tests.helpers import REPO_ROOT, stop_worker, wait_for

PAGE = REPO_ROOT / "docs" / "containers.md"


def _yaml_blocks() -> list[list[Any]]:
    text = PAGE.read_text(encoding="utf-8")
    blocks = re.findall(r"^```yaml\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    return [list(yaml.safe_load_all(block)) for block in blocks]


def _deployment_recipe() -> dict[str, Any]:
    [recipe] = [docs for docs in _yaml_blocks() if len(docs) > 1]
    return {doc["kind"]: doc for doc in recipe}


def test_every_yaml_block_of_the_page_parses() -> None:
    blocks = _yaml_blocks()
    assert len(blocks) >= 2
    assert all(docs and all(isinstance(doc, dict) for doc in docs) for docs in blocks)


def test_the_deployment_runs_cronctl_work_with_its_probe_and_store_secret() -> None:
    kinds = _deployment_recipe()
    assert sorted(kinds) == ["ConfigMap", "Deployment", "Secret"]
    deployment = kinds["Deployment"]
    assert deployment["apiVersion"] == "apps/v1"
    assert deployment["spec"]["replicas"] >= 1
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    command = container["command"]
    assert command[:2] == ["cronctl", "work"]
    assert command[command.index("--health") + 1].startswith("0.0.0.0:")  # the kubelet's probe
    grace = int(command[command.index("--grace") + 1])
    assert pod["terminationGracePeriodSeconds"] > grace
    probe = container["livenessProbe"]["httpGet"]
    assert probe["path"] == "/healthz"
    assert probe["port"] in [p["name"] for p in container["ports"]]
    env = {e["name"]: e for e in container["env"]}
    ref = env["CRONCTL_COORDINATION"]["valueFrom"]["secretKeyRef"]
    secret = kinds["Secret"]
    assert ref["name"] == secret["metadata"]["name"]
    assert secret["stringData"][ref["key"]].startswith("postgresql://")


def test_the_configmaps_schedule_is_valid_and_finds_its_mounted_secret() -> None:
    kinds = _deployment_recipe()
    text = kinds["ConfigMap"]["data"]["schedules.toml"]
    file = FileResult(path=Path("/etc/cronctl/schedules.toml"), display="schedules.toml")
    parse_document(tomllib.loads(text), index_lines(text), file)
    schedule = build_schedule([file])
    assert schedule.errors == []
    [task] = schedule.tasks
    assert task.on_one_server and task.memory_max
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    # The schedule's file is where --file points, and each secret file where a volume puts it.
    command = container["command"]
    schedule_mount = mounts[next(n for n, v in volumes.items() if "configMap" in v)]
    assert command[command.index("--file") + 1] == f"{schedule_mount}/schedules.toml"
    secret_volume = next(n for n, v in volumes.items() if "secret" in v)
    items = {i["path"] for i in volumes[secret_volume]["secret"]["items"]}
    for path in task.env_from_file.values():
        assert Path(path).parent == Path(mounts[secret_volume])
        assert Path(path).name in items


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """Every instruction of the page's Dockerfile blocks, continuation lines joined."""
    text = PAGE.read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"^```dockerfile\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        joined = re.sub(r"\\\n", " ", block)
        for line in joined.splitlines():
            if line.strip() and not line.startswith("#"):
                word, _, rest = line.partition(" ")
                found.append((word, rest.strip()))
    return found


def _exec_form(rest: str) -> list[str]:
    """The JSON array of an ENTRYPOINT or of a HEALTHCHECK's CMD."""
    command: list[str] = json.loads(rest[rest.index("[") :])
    return command


def _python_paths() -> list[Path]:
    """Where the tests' Python and cronctl live (the image has them outside /tmp)."""
    return [REPO_ROOT, Path(sys.prefix), Path(sys.executable).parent]


@pytest.mark.skipif(
    sys.platform != "linux"
    or os.geteuid() != 0
    or not all(shutil.which(tool) for tool in ("unshare", "nsenter", "setpriv", "ip")),
    reason="needs Linux, root, unshare, nsenter, setpriv and ip (a namespace of its own)",
)
def test_the_dockerfiles_entrypoint_and_both_health_checks_run_as_written() -> None:
    # As in the image: a non-root user, /tmp a fresh mode-1777 tmpfs, a network of its own
    # (port 8080 as written). Only the schedule and state paths move into /tmp: /app and
    # /var/lib/cronctl cannot be made on the machine running the tests.
    steps = _dockerfile_instructions()
    [useradd] = [rest for word, rest in steps if word == "RUN" and "useradd" in rest]
    uid = re.search(r"--uid (\d+)", useradd)
    assert uid is not None
    [entrypoint] = [_exec_form(rest) for word, rest in steps if word == "ENTRYPOINT"]
    checks = [_exec_form(rest) for word, rest in steps if word == "HEALTHCHECK"]
    assert len(checks) == 2 and entrypoint[:2] == ["cronctl", "work"]
    command = [sys.executable, "-m", "cronctl", *entrypoint[1:]]
    command[command.index("--file") + 1] = "/tmp/app/schedules.toml"
    become = ["setpriv", f"--reuid={uid[1]}", f"--regid={uid[1]}", "--clear-groups", "--"]
    # A checkout or virtualenv under /tmp (CI may clone there) is bound back into the fresh
    # /tmp, from the old one still reachable through the shell's working directory.
    keep = {p.relative_to("/tmp").parts[0] for p in _python_paths() if p.is_relative_to("/tmp")}
    setup = (
        "cd /tmp && mount -t tmpfs -o mode=1777 tmpfs /tmp && "
        'for d in $KEEP; do mkdir "/tmp/$d" && '
        'mount --no-canonicalize --bind "./$d" "/tmp/$d" || exit 1; done && '
        "cd / && ip link set lo up && "
        "install -d -o $APP_UID -m 0700 /tmp/app /tmp/state && "
        'printf %s "$SCHEDULE" > /tmp/app/schedules.toml && exec "$@"'
    )
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(REPO_ROOT),
        "HOME": "/tmp/app",
        "NO_COLOR": "1",
        "APP_UID": uid[1],
        "KEEP": " ".join(sorted(keep)),
        "CRONCTL_STATE_DIR": "/tmp/state",
        "SCHEDULE": '[[task]]\nname = "tick"\nevery_minute = true\ncommand = "true"\n',
    }
    namespace = ["unshare", "--mount", "--net", "--propagation", "private", "--"]
    worker = subprocess.Popen(
        [*namespace, "sh", "-c", setup, "sh", *become, *command],
        env=env,
        cwd="/",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    alive = Path(f"/proc/{worker.pid}/root/tmp/cronctl-alive")
    inside = ["nsenter", "-t", str(worker.pid), "-m", "-n", "--", *become]
    try:
        wait_for(lambda: alive.exists() or worker.poll() is not None, "the health file", 60)
        assert worker.poll() is None, worker.communicate()
        assert alive.stat().st_uid == int(uid[1])
        for check in checks:
            probe = [sys.executable if check[0] == "python" else check[0], *check[1:]]
            ran = subprocess.run([*inside, *probe], env=env, capture_output=True, timeout=30)
            assert ran.returncode == 0, (probe, ran.stderr)
    finally:
        err = stop_worker(worker)
    assert worker.returncode == 0, err
