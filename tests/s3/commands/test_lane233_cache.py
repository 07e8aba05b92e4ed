"""Lane 2.33's keyed cache through the real CLI and a real (moto) S3: the entry is the whole
VLLM_CACHE_ROOT (vllm-neuron 0.29's compile cache and the native route's precompile cache), staged
into it and pushed from it; pushing its neuron/compile_cache alone is refused naming the root."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.s3.commands.test_cli import cli
from tests.s3.stage.test_cache import tree

pytestmark = pytest.mark.s3
# What a first pod's engine left under its VLLM_CACHE_ROOT: one compiled graph entry and a saved trace.
ROOT = {
    "neuron/compile_cache/a1b2c3/model.neff": b"n" * 40_000,
    "neuron/compile_cache/a1b2c3/.compilation_complete": b"",
    "precompile/trace.bin": b"t" * 5_000,
}


def lane233_env(bucket: str, s3_env: dict[str, str], work: Path) -> dict[str, str]:
    return {
        **s3_env,
        "SM_VLLM_MODEL": f"s3://{bucket}/models/tiny/",
        "NEURONSERVE_STACK": "2.33",
        "NEURONSERVE_DEVICE": "neuron",
        "NEURONSERVE_INSTANCE_TYPE": "trn2.3xlarge",
        "NEURON_RT_VISIBLE_CORES": "0-1",
        "SM_VLLM_MAX_MODEL_LEN": "128",
        "SM_VLLM_MAX_NUM_SEQS": "4",
        "NEURONSERVE_CACHE_URI": f"s3://{bucket}/cache",
        "NEURONSERVE_WORK_DIR": str(work),
    }


def test_2_33_miss_push_of_the_whole_root_then_hit_into_vllm_cache_root(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    s3.put_object(Bucket=bucket, Key="models/tiny/config.json", Body=b'{"model_type": "llama"}')
    env = lane233_env(bucket, s3_env, tmp_path / "work")
    plan = cli(["plan", "--json"], env)
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)
    root = doc["env"]["VLLM_CACHE_ROOT"]
    assert doc["stack"]["lane"] == "2.33" and root.endswith(doc["cache_key"])
    first = cli(["stage", "--json"], env)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["cache"] == "miss"

    built = tmp_path / "vllm-cache"  # a build machine's own VLLM_CACHE_ROOT
    for rel, data in ROOT.items():
        (built / rel).parent.mkdir(parents=True, exist_ok=True)
        (built / rel).write_bytes(data)
    alone = cli(["cache", "push", str(built / "neuron" / "compile_cache")], env)
    assert alone.returncode == 2 and "Traceback" not in alone.stderr
    assert f"push {built} instead" in alone.stderr
    # The same refusal with an explicit --key (no plan made): the lane comes from NEURONSERVE_STACK.
    keyed = cli(["cache", "push", str(built / "neuron" / "compile_cache"), "--key", doc["cache_key"]], env)
    assert keyed.returncode == 2 and f"push {built} instead" in keyed.stderr
    push = cli(["cache", "push", str(built)], env)
    assert push.returncode == 0, push.stderr

    second = cli(["stage", "--json"], {**env, "NEURONSERVE_WORK_DIR": str(tmp_path / "work2")})
    assert second.returncode == 0, second.stderr
    staged = json.loads(second.stdout)
    assert staged["cache"] == "hit"
    assert staged["artifacts_dir"] == root.replace(str(tmp_path / "work"), str(tmp_path / "work2"))
    assert tree(staged["artifacts_dir"]) == ROOT
