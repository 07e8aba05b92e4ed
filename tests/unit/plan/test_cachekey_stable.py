"""The cache key is a persistent contract: artifacts pushed by one release are found by the next only if
the same inputs give the same key. So the hashed document is pinned here field by field, and the key is
checked against the SHA-256 of that document written out by hand (canonical JSON: sorted keys, no
spaces). Changing either is a change of SCHEMA (plan/cachekey.py), on purpose."""

from __future__ import annotations

import hashlib

from neuronserve.plan.cachekey import cache_key, key_inputs
from neuronserve.plan.facts import ModelFacts
from neuronserve.types import ModelSpec

MODEL = ModelSpec("local", "/opt/ml/model", "/opt/ml/model", None, "SM_MODEL_DIR")
FACTS = ModelFacts(kind="dir", config_sha256="c0ffee", weights_digest="w1")
GRAPH = {"tp": 2, "max_model_len": 4096, "buckets": [1024, 4096]}
VERSIONS = {"vllm": "0.11.0", "vllm-neuron": "0.2.2+lts", "neuronx-cc": "2.22", "torch": "2.8"}

DOCUMENT = (
    '{"graph":{"buckets":[1024,4096],"max_model_len":4096,"tp":2},'
    '"model":{"config_sha256":"c0ffee","revision":null,"source":"local","uri":"/opt/ml/model","weights":"w1"},'
    '"schema":3,'
    '"versions":{"neuronx-cc":"2.22","neuronx-distributed-inference":null,"vllm":"0.11.0","vllm-neuron":"0.2.2+lts"}}'
)


def test_the_hashed_document_field_by_field() -> None:
    assert key_inputs(MODEL, FACTS, GRAPH, VERSIONS) == {
        "schema": 3,
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
