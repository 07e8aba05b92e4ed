"""The ECS task definition: devices per chip, IPC_LOCK, placement, health check; the sample is current."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from neuronserve.deploy.ecs import task_definition
from neuronserve.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("instance", "chips"), [("inf2.xlarge", 1), ("inf2.48xlarge", 12), ("trn1.32xlarge", 16)]
)
def test_maps_one_device_per_chip(instance: str, chips: int) -> None:
    doc = task_definition("img", instance, {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2"})
    container = doc["containerDefinitions"][0]
    devices = container["linuxParameters"]["devices"]
    assert [d["hostPath"] for d in devices] == [f"/dev/neuron{i}" for i in range(chips)]
    assert all(d["hostPath"] == d["containerPath"] for d in devices)
    assert container["linuxParameters"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert doc["placementConstraints"] == [
        {"type": "memberOf", "expression": f"attribute:ecs.instance-type == {instance}"}
    ]
    assert "/ping" in " ".join(container["healthCheck"]["command"])
    env = {e["name"]: e["value"] for e in container["environment"]}
    assert env == {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2", "NEURONSERVE_DEVICE": "neuron"}
    assert container["portMappings"][0]["containerPort"] == 8080


def test_unknown_instance_type() -> None:
    with pytest.raises(ConfigError, match=r"inf2\.xlarge"):
        task_definition("img", "g5.xlarge", {})


def test_checked_in_sample_is_what_render_prints() -> None:
    out = subprocess.run(
        [
            sys.executable, str(ROOT / "ecs" / "render.py"),
            "--image", "IMAGE_URI", "--instance-type", "inf2.xlarge",
            "--env-file", str(ROOT / "sagemaker" / "envs" / "inf2-xlarge-tinyllama.env"),
        ],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    sample = ROOT / "ecs" / "task-definition.inf2-xlarge.json"
    assert json.loads(out.stdout) == json.loads(sample.read_text()), "re-run ecs/render.py (docs/DEPLOY.md)"
