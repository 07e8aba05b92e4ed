"""The deploy lines users copy from README.md and docs/DEPLOY.md, run as written (variables filled in):
every `python ecs/render.py` line renders a request its API's model accepts (RegisterTaskDefinition,
CreateService, elbv2 CreateTargetGroup; for a task the renderer runs the container's launch plan on
its environment first), and every
`docker run` line for the Neuron image has the device, IPC_LOCK and memlock flags, and its env file
with the mounted model plans on the Neuron device without error.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from service_model import check

from neuronserve.deploy.envfile import load_env
from neuronserve.launchplan import resolve_plan

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "docs" / "DEPLOY.md"]
VARIABLES = {
    "$IMAGE": "IMAGE_URI",
    "$ECR": "123456789012.dkr.ecr.us-east-1.amazonaws.com",
    "$PWD": "/work",
    "$TARGET_GROUP_ARN": "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/neuronserve/0123",
    "$BUCKET": "acme-ml-artifacts",
}
# What each `--what` renders, and the API operation that takes it.
OPERATIONS = {
    "task": ("ecs", "RegisterTaskDefinition"),
    "service": ("ecs", "CreateService"),
    "target-group": ("elbv2", "CreateTargetGroup"),
}
# TinyLlama-1.1B's config.json values (the model the samples name), for the mounted /opt/ml/model.
TINYLLAMA = json.loads((ROOT / "tests/data/models/TinyLlama-1.1B-Chat-v1.0/config.json").read_text())


def command_lines(prefix: str) -> list[tuple[str, list[str]]]:
    """Every shell command in the docs' bash blocks starting with `prefix`, continuations joined,
    variables filled in, redirections and comments dropped."""
    found = []
    for doc in DOCS:
        for block in re.findall(r"```bash\n(.*?)```", doc.read_text(), re.S):
            for raw in block.replace("\\\n", " ").splitlines():
                command = raw.split(" # ")[0].split(" > ")[0].strip()
                command = command.removeprefix("scripts/")  # the checkout's wrapper: the same command
                if command.startswith(prefix):
                    for name, value in VARIABLES.items():
                        command = command.replace(name, value)
                    found.append((f"{doc.name}: {command[:60]}", shlex.split(command)))
    return found


RENDER = command_lines("python ecs/render.py")
K8S = command_lines("neuronserve deploy k8s")
DOCKER = [c for c in command_lines("docker run") if "--device=/dev/neuron0" in c[1]]


def test_the_docs_have_the_lines() -> None:
    assert len(RENDER) >= 2 and len(DOCKER) >= 2 and K8S, (RENDER, DOCKER, K8S)
    # The README's Deploy section shows every target its first screen names, EKS's render line included.
    assert any(name.startswith("README.md") for name, _ in K8S), K8S


@pytest.mark.parametrize("argv", [a for _, a in K8S], ids=[i for i, _ in K8S])
def test_deploy_k8s_line_renders(argv: list[str], tmp_path: Path) -> None:
    """The EKS walk-through's render line, as written (its --output into a fresh directory): it renders
    the compile part and the server with the autoscaler it names."""
    out = tmp_path / "out"
    argv = [*argv[:-1], str(out)] if argv[-2] == "--output" else argv
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    result = subprocess.run(
        [sys.executable, "-m", *argv], capture_output=True, text=True, cwd=ROOT, timeout=120, env=env
    )
    assert result.returncode == 0, result.stderr
    assert (out / "compile" / "job.yaml").is_file() and (out / "kustomization.yaml").is_file()
    autoscaler = argv[argv.index("--autoscaler") + 1] if "--autoscaler" in argv else "none"
    assert (out / "scaledobject.yaml").is_file() is (autoscaler == "keda")


@pytest.mark.parametrize("argv", [a for _, a in RENDER], ids=[i for i, _ in RENDER])
def test_render_line_gives_a_valid_request(argv: list[str]) -> None:
    # The user's region, as the AWS CLI would find it (the docs' lines name none: the renderer takes it
    # from AWS_REGION, AWS_DEFAULT_REGION or the profile).
    env = {**os.environ, "AWS_REGION": "us-east-1"}
    result = subprocess.run(
        [sys.executable, *argv[1:]], capture_output=True, text=True, cwd=ROOT, timeout=60, env=env
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    what = argv[argv.index("--what") + 1] if "--what" in argv else "task"
    check(*OPERATIONS[what], doc)
    if what != "task":
        return
    env = {e["name"]: e["value"] for e in doc["containerDefinitions"][0]["environment"]}
    assert env.get("HF_MODEL_ID") or env.get("SM_VLLM_MODEL"), "the task would start with no model"


@pytest.mark.parametrize("argv", [a for _, a in DOCKER], ids=[i for i, _ in DOCKER])
def test_docker_line_has_the_neuron_flags_and_plans(argv: list[str], tmp_path: Path) -> None:
    def values(flag: str) -> list[str]:
        return [argv[i + 1] for i, a in enumerate(argv) if a == flag] + [
            a.split("=", 1)[1] for a in argv if a.startswith(flag + "=")
        ]

    devices = values("--device")
    assert devices and all(re.fullmatch(r"/dev/neuron\d+", d) for d in devices)
    assert "IPC_LOCK" in values("--cap-add")
    assert "memlock=-1" in values("--ulimit"), "the Neuron runtime pins memory: --ulimit memlock=-1"
    mounts = [v for v in values("-v") if ":/opt/ml/model" in v]
    assert mounts, "the model comes from the mounted /opt/ml/model"
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(TINYLLAMA))
    env = load_env(str(ROOT / values("--env-file")[0]), [e for e in values("-e") if "=" in e])
    env.update(
        {
            "SM_MODEL_DIR": str(model),
            "NEURON_RT_VISIBLE_CORES": f"0-{2 * len(devices) - 1}",  # 2 NeuronCores per inf2 chip
            "NEURONSERVE_WORK_DIR": str(tmp_path / "work"),
        }
    )
    plan = resolve_plan(env, device="neuron")
    assert plan.model.local_path == str(model)
