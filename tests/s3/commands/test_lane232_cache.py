"""Lane 2.32's compile cache through the real CLI and a real (moto) S3: the keyed cache stages into and
is pushed from `$VLLM_CACHE_ROOT/neuron/compile_cache`, the directory vllm-neuron 0.24 compiles into."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.s3.commands.test_cli import cli
from tests.s3.stage.test_cache import tree

pytestmark = pytest.mark.s3
# One compiled entry as the plugin leaves it (compilation_cache.md: a <hash>/ directory per graph).
ENTRY = {"a1b2c3/model.neff": b"n" * 40_000, "a1b2c3/.compilation_complete": b""}


def lane232_env(bucket: str, s3_env: dict[str, str], work: Path) -> dict[str, str]:
    return {
        **s3_env,
        "SM_VLLM_MODEL": f"s3://{bucket}/models/tiny/",
        "NEURONSERVE_STACK": "2.32",
        "NEURONSERVE_DEVICE": "neuron",
        "NEURONSERVE_INSTANCE_TYPE": "trn2.3xlarge",
        "NEURON_RT_VISIBLE_CORES": "0-1",
        "SM_VLLM_MAX_MODEL_LEN": "128",
        "SM_VLLM_MAX_NUM_SEQS": "4",
        "NEURONSERVE_CACHE_URI": f"s3://{bucket}/cache",
        "NEURONSERVE_WORK_DIR": str(work),
    }


def test_2_32_miss_push_of_the_compile_cache_then_hit_where_the_plugin_reads(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    s3.put_object(Bucket=bucket, Key="models/tiny/config.json", Body=b'{"model_type": "llama"}')
    env = lane232_env(bucket, s3_env, tmp_path / "work")
    plan = cli(["plan", "--json"], env)
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)
    root = doc["env"]["VLLM_CACHE_ROOT"]
    assert doc["stack"]["lane"] == "2.32" and root.endswith(doc["cache_key"])
    first = cli(["stage", "--json"], env)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["cache"] == "miss"

    # The engine compiled into $VLLM_CACHE_ROOT/neuron/compile_cache (a build machine's own root here).
    built = tmp_path / "vllm-cache"
    for rel, data in ENTRY.items():
        (built / "neuron" / "compile_cache" / rel).parent.mkdir(parents=True, exist_ok=True)
        (built / "neuron" / "compile_cache" / rel).write_bytes(data)
    root_push = cli(["cache", "push", str(built)], env)
    assert root_push.returncode == 2 and "Traceback" not in root_push.stderr
    assert f"push {built / 'neuron' / 'compile_cache'} instead" in root_push.stderr
    push = cli(["cache", "push", str(built / "neuron" / "compile_cache")], env)
    assert push.returncode == 0, push.stderr

    second = cli(["stage", "--json"], {**env, "NEURONSERVE_WORK_DIR": str(tmp_path / "work2")})
    assert second.returncode == 0, second.stderr
    staged = json.loads(second.stdout)
    assert staged["cache"] == "hit"
    assert staged["artifacts_dir"] == root.replace(str(tmp_path / "work"), str(tmp_path / "work2")) + (
        "/neuron/compile_cache"
    )
    assert tree(staged["artifacts_dir"]) == ENTRY
