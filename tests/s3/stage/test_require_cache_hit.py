"""NEURONSERVE_REQUIRE_CACHE_HIT=true against the moto S3 server, through the real CLI: a miss fails at once
(exit 1, no model download, no artifacts directory for a compile, a message naming the key, the URI and
`neuronserve cache push`; `stage --json` says the same), `serve` fails the same way before any engine
starts, and after `neuronserve cache push` the same start is a hit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.s3.commands.test_cli import cli, neuron_env
from tests.s3.stage.test_cache import compile_into, tree

pytestmark = pytest.mark.s3


def test_miss_fails_fast_then_push_makes_it_a_hit(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    env = neuron_env(s3, bucket, s3_env, tmp_path / "work", NEURONSERVE_REQUIRE_CACHE_HIT="true")
    key = json.loads(cli(["plan", "--json"], env).stdout)["cache_key"]
    uri = f"s3://{bucket}/cache/{key}/"

    miss = cli(["stage", "--json"], env)
    assert miss.returncode == 1
    doc = json.loads(miss.stdout)
    assert doc["cache"] == "miss" and doc["model_dir"] is None
    for text in (doc["error"], miss.stderr):
        assert key in text and uri in text and "neuronserve cache push" in text
    assert "Traceback" not in miss.stderr
    assert not (tmp_path / "work" / "model").exists()  # failed before the model download
    assert not (tmp_path / "work" / "artifacts" / key).exists()  # no directory handed to a compiler

    served = cli(["serve"], {**env, "SAGEMAKER_BIND_TO_PORT": "0"})
    assert served.returncode != 0
    assert key in served.stderr and "neuronserve cache push" in served.stderr
    assert (
        "staging failed: compile cache miss" in served.stderr
    )  # the FAILED phase's message, before an engine

    built = tmp_path / "built"
    files = compile_into(str(built), "AOT")
    assert cli(["cache", "push", str(built)], {**env, "NEURONSERVE_REQUIRE_CACHE_HIT": ""}).returncode == 0
    hit = cli(["stage", "--json"], env)
    assert hit.returncode == 0, hit.stderr
    staged = json.loads(hit.stdout)
    assert staged["cache"] == "hit" and tree(staged["artifacts_dir"]) == files
    assert (Path(staged["model_dir"]) / "model.safetensors").read_bytes() == b"w" * 70_000


def test_require_cache_hit_without_a_cache_is_refused(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps(
            {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "max_position_embeddings": 128}
        )
    )
    env = {
        "SM_VLLM_MODEL": str(model),
        "NEURONSERVE_DEVICE": "neuron",
        "NEURON_RT_VISIBLE_CORES": "0-1",
        "SM_VLLM_MAX_NUM_SEQS": "4",
        "NEURONSERVE_REQUIRE_CACHE_HIT": "true",
    }
    r = cli(["plan"], env)
    assert r.returncode == 2 and "NEURONSERVE_CACHE_URI" in r.stderr
