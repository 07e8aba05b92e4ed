"""Issue 42 item 4: one TP rule. `plan` (and so every deploy renderer, which plans first) refuses a TP degree
that `plan --recommend` would never offer (plan/fit/instances.valid_tp_degrees), naming the valid ones for
the declared instance; typed as a user types it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from tests.support.typed import ROOT, model_dir, neuronserve

from neuronserve.plan.fit import instances

BASE = {"SM_VLLM_MODEL": model_dir("Llama-3.1-8B"), "SM_VLLM_MAX_MODEL_LEN": "4096"}


@pytest.mark.parametrize(
    ("instance", "env", "valid"),
    [
        ("inf2.24xlarge", {"SM_VLLM_TENSOR_PARALLEL_SIZE": "3"}, "1, 2, 4, 6, 12"),
        ("ml.inf2.24xlarge", {"SM_VLLM_TENSOR_PARALLEL_SIZE": "5"}, "1, 2, 4, 6, 12"),
        ("trn1.32xlarge", {"SM_VLLM_TENSOR_PARALLEL_SIZE": "7"}, "1, 2, 4, 8, 16, 32"),
        (
            "inf2.24xlarge",
            {"SM_VLLM_TENSOR_PARALLEL_SIZE": "5", "SM_VLLM_DATA_PARALLEL_SIZE": "2"},
            "1, 2, 4, 6, 12",
        ),
        ("trn2.48xlarge", {"SM_VLLM_TENSOR_PARALLEL_SIZE": "12"}, "1, 2, 4, 8, 16, 32, 64"),
        ("inf2.48xlarge", {"OPTION_TENSOR_PARALLEL_DEGREE": "3"}, "1, 2, 4, 6, 8, 12, 24"),
    ],
)
def test_a_tp_that_does_not_tile_the_instance_is_refused(
    instance: str, env: dict[str, str], valid: str
) -> None:
    proc = neuronserve(["plan", "--instance-type", instance], {**BASE, **env})
    assert proc.returncode == 2, proc.stdout
    var, tp = next((k, v) for k, v in env.items() if "TENSOR_PARALLEL" in k)
    assert proc.stderr.startswith(f"neuronserve plan: error: {var}={tp} does not tile "), proc.stderr
    assert f"set {var} to one of {valid} (the degrees `neuronserve plan --recommend` offers" in proc.stderr


@pytest.mark.parametrize(
    ("instance", "tp"),
    [("inf2.24xlarge", "4"), ("inf2.24xlarge", "6"), ("trn1.32xlarge", "16"), ("inf2.48xlarge", "8")],
)
def test_a_tp_recommend_offers_plans(instance: str, tp: str) -> None:
    proc = neuronserve(["plan", "--instance-type", instance], {**BASE, "SM_VLLM_TENSOR_PARALLEL_SIZE": tp})
    assert proc.returncode == 0, proc.stderr
    assert f"--tensor-parallel-size {tp} " in proc.stdout


def test_deploy_renders_no_tp_the_plan_refuses() -> None:
    """`deploy k8s` rendered TP 5 x DP 2 as 10 of inf2.24xlarge's 12 cores; it plans first, so it refuses."""
    given = ["SM_VLLM_MODEL=s3://models/llama-8b/", "SM_VLLM_MAX_MODEL_LEN=4096"]
    given += ["SM_VLLM_TENSOR_PARALLEL_SIZE=5", "SM_VLLM_DATA_PARALLEL_SIZE=2"]
    args = ["deploy", "k8s", "--instance-type", "inf2.24xlarge", "--image", "img:1"]
    proc = neuronserve([*args, *(a for g in given for a in ("--env", g))], {})
    assert proc.returncode == 2, proc.stdout
    assert "SM_VLLM_TENSOR_PARALLEL_SIZE=5 does not tile" in proc.stderr


@pytest.mark.parametrize("name", sorted(instances.INSTANCES))
def test_the_rule_is_the_hardware_s(name: str) -> None:
    """Each valid degree divides the cores and lies within one chip or over whole chips; 1 and all the cores
    are always valid (docs/FIT.md)."""
    facts = instances.instance_facts(name)
    per_chip = facts.cores // facts.chips
    valid = instances.valid_tp_degrees(facts)
    assert valid[0] == 1 and valid[-1] == facts.cores
    for t in range(1, facts.cores + 1):
        tiles = facts.cores % t == 0 and (per_chip % t == 0 or t % per_chip == 0)
        assert (t in valid) == tiles


def test_the_ecs_renderer_refuses_it_too() -> None:
    """ecs/render.py checks the environment with the same plan (neuronserve.deploy.validate.plan_check)."""
    given = [
        "SM_VLLM_MODEL=s3://models/llama-8b/",
        "SM_VLLM_MAX_MODEL_LEN=4096",
        "SM_VLLM_TENSOR_PARALLEL_SIZE=5",
    ]
    args = [
        sys.executable,
        str(ROOT / "ecs" / "render.py"),
        "--image",
        "img:1",
        "--instance-type",
        "inf2.24xlarge",
    ]
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT / "src"),
        "SM_MODEL_DIR": "/nonexistent",
    }
    proc = subprocess.run(
        [*args, *(a for g in given for a in ("--env", g))],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout
    assert "SM_VLLM_TENSOR_PARALLEL_SIZE=5 does not tile" in proc.stderr
