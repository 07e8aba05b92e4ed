"""`neuronserve stage` and `neuronserve cache push` as real subprocesses against the moto server."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.s3.stage.test_cache import compile_into, keyed_plan, tree
from tests.support.cli import neuronserve
from tests.support.server import REPO

from neuronserve.stage import stage_all

pytestmark = pytest.mark.s3


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The CLI with `env` alone (and the PATH and code to run it)."""
    return neuronserve(args, {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO / "src"), **env}, 60)


def neuron_env(s3: Any, bucket: str, s3_env: dict[str, str], work: Path, **settings: str) -> dict[str, str]:
    """A tiny Llama (config and 70 kB of weights) uploaded to s3://BUCKET/models/tiny/, and the environment
    that plans it for two Neuron cores with a keyed cache under s3://BUCKET/cache, then `settings`."""
    for rel, data in {
        "config.json": b'{"model_type": "llama", "architectures": ["LlamaForCausalLM"]}',
        "model.safetensors": b"w" * 70_000,
    }.items():
        s3.put_object(Bucket=bucket, Key=f"models/tiny/{rel}", Body=data)
    return {
        **s3_env,
        "SM_VLLM_MODEL": f"s3://{bucket}/models/tiny/",
        "NEURONSERVE_DEVICE": "neuron",
        "NEURON_RT_VISIBLE_CORES": "0-1",
        "SM_VLLM_MAX_MODEL_LEN": "128",
        "SM_VLLM_MAX_NUM_SEQS": "4",
        "NEURONSERVE_CACHE_URI": f"s3://{bucket}/cache",
        "NEURONSERVE_WORK_DIR": str(work),
        **settings,
    }


def test_stage_json_prints_the_three_fields(s3_env: dict[str, str], tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    proc = cli(
        ["stage", "--json"], {**s3_env, "SM_VLLM_MODEL": str(model), "NEURONSERVE_WORK_DIR": str(tmp_path)}
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"model_dir": str(model), "artifacts_dir": None, "cache": "off"}


def test_stage_missing_model_dir_is_a_clear_error(s3_env: dict[str, str], tmp_path: Path) -> None:
    proc = cli(["stage"], {**s3_env, "SM_VLLM_MODEL": str(tmp_path / "nope")})
    # The plan already refuses a local path that does not exist: a configuration error, exit 2.
    assert proc.returncode == 2
    assert str(tmp_path / "nope") in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cache_push_needs_the_cache_uri(s3_env: dict[str, str], tmp_path: Path) -> None:
    proc = cli(["cache", "push", str(tmp_path), "--key", "k1"], s3_env)
    assert proc.returncode == 2
    assert "NEURONSERVE_CACHE_URI" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cache_push_then_stage_is_a_hit(s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path) -> None:
    built = tmp_path / "built"
    files = compile_into(str(built), "P")
    env = {**s3_env, "NEURONSERVE_CACHE_URI": f"s3://{bucket}/cache"}
    proc = cli(["cache", "push", str(built), "--key", "k1", "--json"], env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["uri"] == f"s3://{bucket}/cache/k1/"
    assert out["files"] == len(files)
    assert "testing-secret-value" not in proc.stdout + proc.stderr
    result = stage_all(keyed_plan(tmp_path, f"s3://{bucket}/cache/k1/"), s3_env)
    assert result.cache == "hit"
    assert tree(result.artifacts_dir or "") == files


def test_plan_then_stage_from_s3_with_keyed_cache(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    """The CLI path through the real plan: an s3:// model, a Neuron keyed cache: miss, push, hit."""
    env = neuron_env(s3, bucket, s3_env, tmp_path / "work")
    plan = cli(["plan", "--json"], env)
    assert plan.returncode == 0, plan.stderr
    key = json.loads(plan.stdout)["cache_key"]
    assert key and json.loads(plan.stdout)["env"]["NEURON_COMPILED_ARTIFACTS"].endswith(key)

    first = cli(["stage", "--json"], env)
    assert first.returncode == 0, first.stderr
    staged = json.loads(first.stdout)
    assert staged["cache"] == "miss"
    assert staged["model_dir"] == str(tmp_path / "work" / "model")
    assert (Path(staged["model_dir"]) / "model.safetensors").read_bytes() == b"w" * 70_000

    built = tmp_path / "built"
    files = compile_into(str(built), "AOT")
    push = cli(["cache", "push", str(built)], env)  # key from the same plan
    assert push.returncode == 0, push.stderr

    second_env = {**env, "NEURONSERVE_WORK_DIR": str(tmp_path / "work2")}
    second = cli(["stage", "--json"], second_env)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["cache"] == "hit"
    assert tree(json.loads(second.stdout)["artifacts_dir"]) == files
