"""The cache key (plan/cachekey.py) changes with every compiled-graph input and stays put for settings that
do not reach the graph; the weights digest follows the weights' bytes, not their files' dates.

It is a persistent contract: artifacts pushed by one release are found by the next only if the same inputs
give the same key. So the hashed document is pinned here field by field, and the key is checked against
the SHA-256 of that document written out by hand (canonical JSON: sorted keys, no spaces). Changing either
is a change of SCHEMA (plan/cachekey.py), on purpose. By hardware: test_cachekey_target.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path

from tests.support.builders import LLAMA, facts, llama_facts, llama_plan, plan
from tests.support.configs import VERSIONS as HOST_VERSIONS

from neuronserve.host.facts import weights_digest
from neuronserve.plan.cachekey import cache_key, key_inputs
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.types import ModelSpec

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


MODEL = ModelSpec("local", "/opt/ml/model", "/opt/ml/model", None, "SM_MODEL_DIR")
FACTS = ModelFacts(kind="dir", config_sha256="c0ffee", weights_digest="w1")
GRAPH = {"tp": 2, "max_model_len": 4096, "buckets": [1024, 4096]}
VERSIONS = {"vllm": "0.11.0", "vllm-neuron": "0.2.2+lts", "neuronx-cc": "2.22", "torch": "2.8"}

DOCUMENT = (
    '{"graph":{"buckets":[1024,4096],"max_model_len":4096,"tp":2},'
    '"model":{"config_sha256":"c0ffee","revision":null,"source":"local","uri":"/opt/ml/model","weights":"w1"},'
    '"schema":4,'
    '"versions":{"neuronx-cc":"2.22","neuronx-distributed-inference":null,"vllm":"0.11.0","vllm-neuron":"0.2.2+lts"}}'
)


def test_the_hashed_document_field_by_field() -> None:
    assert key_inputs(MODEL, FACTS, GRAPH, VERSIONS) == {
        "schema": 4,
        "model": {
            "source": "local",
            "uri": "/opt/ml/model",
            "revision": None,
            "config_sha256": "c0ffee",
            "weights": "w1",
        },
        "graph": {"tp": 2, "max_model_len": 4096, "buckets": [1024, 4096]},
        "versions": {  # torch is not a key version: only the compiler stack
            "vllm": "0.11.0",
            "vllm-neuron": "0.2.2+lts",
            "neuronx-distributed-inference": None,
            "neuronx-cc": "2.22",
        },
    }


def test_the_key_is_the_sha256_of_the_canonical_document() -> None:
    assert cache_key(MODEL, FACTS, GRAPH, VERSIONS) == hashlib.sha256(DOCUMENT.encode()).hexdigest()[:32]


def test_a_model_without_local_facts_hashes_nulls() -> None:
    hub = ModelSpec("hub", "org/m", None, "abc123", "SM_VLLM_MODEL")
    doc = key_inputs(hub, None, {}, {})
    assert doc["model"] == {
        "source": "hub",
        "uri": "org/m",
        "revision": "abc123",
        "config_sha256": None,
        "weights": None,
    }
    assert doc["graph"] == {} and set(doc["versions"].values()) == {None}


def test_cache_key_stable_and_sensitive() -> None:
    env = {"SM_VLLM_MODEL": "m/x", "SM_VLLM_MAX_MODEL_LEN": "128", "SM_VLLM_TENSOR_PARALLEL_SIZE": "2"}
    key = plan(env).cache_key
    assert key is not None and len(key) == 32
    # Things that do not change the graph do not change the key.
    assert (
        plan(
            {**env, "NEURONSERVE_WORK_DIR": "/elsewhere", "SAGEMAKER_BIND_TO_PORT": "9000"},
            facts(8, python="/other/python"),
        ).cache_key
        == key
    )
    changes = [
        {"SM_VLLM_MAX_MODEL_LEN": "256"},
        {"SM_VLLM_TENSOR_PARALLEL_SIZE": "1"},
        {"SM_VLLM_MAX_NUM_SEQS": "4"},
        {"SM_VLLM_DTYPE": "float16"},
        {"SM_NEURON_ENABLE_BUCKETING": "false"},
        {"SM_VLLM_MODEL": "m/y"},
        {"SM_VLLM_ENABLE_PREFIX_CACHING": "true"},
        {"SM_NEURON_QUANTIZED": "true", "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH": "/q"},
    ]
    keys = {plan({**env, **c}).cache_key for c in changes}
    assert key not in keys and len(keys) == len(changes)
    newer_cc = facts(32, versions={**HOST_VERSIONS, "neuronx-cc": "2.23.0"})
    assert plan(env, newer_cc).cache_key != key


def test_cache_key_uses_config_digest_for_sagemaker_dir() -> None:
    env = {"SM_VLLM_MAX_MODEL_LEN": "128"}
    llama = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "max_position_embeddings": 2048}

    def with_digest(d: str) -> HostFacts:
        return facts(
            2, sagemaker_model_dir_nonempty=True, paths={"/opt/ml/model": ModelFacts("dir", llama, d, None)}
        )

    a, b = plan(env, with_digest("aa")), plan(env, with_digest("bb"))
    assert a.model.source == "sagemaker" and a.model.local_path == "/opt/ml/model"
    assert a.cache_key != b.cache_key
