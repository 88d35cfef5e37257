"""docs/containers.md's Kubernetes YAML: it parses, its kinds are right, it runs `cronctl work`,
and the schedule it carries is one cronctl accepts. No cluster runs it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from cronctl.core.assemble import build_schedule
from cronctl.core.lines import index_lines
from cronctl.core.schema import FileResult, parse_document
from tests.helpers import REPO_ROOT

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
