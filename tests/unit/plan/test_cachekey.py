"""The cache key changes with every compiled-graph input and stays put for settings that
do not reach the graph; the weights digest follows the weights' bytes, not their files' dates."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from tests.support.builders import LLAMA, llama_facts, llama_plan

from neuronserve.host.facts import weights_digest
from neuronserve.plan.facts import ModelFacts

CHUNKED = {
    "SM_VLLM_ENABLE_CHUNKED_PREFILL": "true",
    "SM_NEURON_CHUNKED_PREFILL_CONFIG": '{"max_num_seqs": 4}',
    "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "512",
}
SPEC = {"SM_VLLM_SPECULATIVE_CONFIG": '{"method": "eagle", "model": "/draft", "num_speculative_tokens": 4}'}


def key(env: dict[str, str], **facts_kw: object) -> str:
    k = llama_plan(env, llama_facts(**facts_kw)).cache_key  # type: ignore[arg-type]
    assert k is not None
    return k


def draft(config_sha: str, weights: str) -> dict[str, ModelFacts]:
    return {"/draft": ModelFacts("dir", LLAMA, config_sha, True, weights_digest=weights)}


def test_key_changes_with_each_graph_input() -> None:
    assert key(CHUNKED) != key({**CHUNKED, "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "1024"})
    assert key({}) != key({"SM_VLLM_ADDITIONAL_CONFIG": '{"max_prompt_length": 1024}'})
    assert key({}) != key({"NEURON_CC_FLAGS": "--optlevel 1"})
    assert key(SPEC, paths=draft("a", "w1")) != key(SPEC, paths=draft("b", "w1"))
    assert key(SPEC, paths=draft("a", "w1")) != key(SPEC, paths=draft("a", "w2"))
    base = llama_facts()
    tuned = {**base.paths, "/m": dataclasses.replace(base.paths["/m"], weights_digest="fine-tune")}
    assert key({}) != key({}, paths=tuned)


def test_key_stays_for_settings_outside_the_graph() -> None:
    k = key({})
    assert key({"SAGEMAKER_BIND_TO_PORT": "9000", "NEURONSERVE_ENGINE_PORT": "9001"}) == k
    assert key({"SM_VLLM_SERVED_MODEL_NAME": "my-model"}) == k
    assert key({"SM_VLLM_UVICORN_LOG_LEVEL": "debug"}) == k


def _weights(path: Path, data: bytes) -> Path:
    path.mkdir(exist_ok=True)
    header = b'{"w":{"dtype":"BF16","shape":[1],"data_offsets":[0,1]}}'
    (path / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + data)
    (path / "config.json").write_text("{}")
    return path


def test_weights_digest_follows_bytes_not_dates(tmp_path: Path) -> None:
    size = 4 * 1024 * 1024
    a = weights_digest(str(_weights(tmp_path / "a", bytes(size))))
    same = _weights(tmp_path / "b", bytes(size))
    os.utime(same / "model.safetensors", (1, 1))
    assert a is not None and weights_digest(str(same)) == a
    tuned = bytes(range(256)) * (size // 256)  # a fine-tune: every tensor's bytes, same names/shapes/size
    assert weights_digest(str(_weights(tmp_path / "c", tuned))) != a
    assert weights_digest(str(tmp_path / "missing")) is None
