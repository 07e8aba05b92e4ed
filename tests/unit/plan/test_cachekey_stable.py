"""The graph part of the cache key is NxD Inference's serialised configuration as the plan predicts it
(plan/lanes/nxdi/compiled.py), with only what lies outside it beside it (plan/cachekey.py OUTSIDE_CONFIG);
and a key is the same on every run and machine: two interpreters with different hash seeds agree, and a
recorded key stays what it was (a changed one strands every cached artifact: change SCHEMA on purpose).
tests/contract proves the prediction against the real NxD Inference code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.builders import LLAMA_ENV, llama_plan

from neuronserve.plan.cachekey import OUTSIDE_CONFIG, key_inputs
from neuronserve.types import ModelSpec

ROOT = Path(__file__).resolve().parents[3]
# Prefix caching, on-device sampling completed by the plan, EAGLE with a draft, quantization, LoRA numbers.
FIXED = {
    "SM_VLLM_ENABLE_PREFIX_CACHING": "true",
    "SM_VLLM_BLOCK_SIZE": "32",
    "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"top_k": 4, "dynamic": true}',
    "SM_VLLM_SPECULATIVE_CONFIG": '{"method": "eagle", "model": "s3://b/d/", "num_speculative_tokens": 4}',
    "SM_NEURON_QUANTIZED": "true",
    "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH": "s3://b/int8/",
    "SM_NEURON_QUANTIZATION_TYPE": "per_channel_symmetric",
}
# Recorded from the plan of FIXED on llama_facts(): the value every release must keep for it.
RECORDED = "76090f7b43c7e5eacc4e8ab1c5191228"
CHILD = """
import json, sys
sys.path[:0] = ["src", "."]
from tests.support.builders import llama_plan
print(llama_plan(json.loads(sys.argv[1])).cache_key)
"""


def test_the_graph_part_is_the_predicted_configuration_and_what_lies_outside_it() -> None:
    graph = {"compiled": {"neuron_config": {"tp_degree": 2}}, "tp": 2, "neuron_target": {"target": "inf2"}}
    doc = key_inputs(ModelSpec("hub", "org/m", None, None, "SM_VLLM_MODEL"), None, graph, {})
    assert set(doc["graph"]) == {"compiled", *OUTSIDE_CONFIG}
    assert doc["graph"]["compiled"] == {"neuron_config": {"tp_degree": 2}}
    assert "tp" not in doc["graph"]  # held by the prediction (tp_degree), not hashed twice
    no_prediction = key_inputs(ModelSpec("hub", "org/m", None, None, "SM_VLLM_MODEL"), None, {"tp": 2}, {})
    assert no_prediction["graph"] == {"tp": 2}  # lane 2.32 and the in-tree integration keep their records


def test_lora_numbers_change_the_key() -> None:
    """max_loras and max_lora_rank shape the compiled LoRA weights (NxD Inference
    modules/lora_serving/lora_layer.py:33, lora_module.py:28): a cache hit must not serve other shapes."""
    lora = {
        "SM_VLLM_ENABLE_LORA": "true",
        "SM_VLLM_LORA_MODULES": "a=s3://b/a/",
        "SM_VLLM_MAX_LORAS": "2",
        "SM_VLLM_MAX_LORA_RANK": "16",
    }
    keys = {
        llama_plan({**lora, **change}).cache_key
        for change in (
            {},
            {"SM_VLLM_MAX_LORAS": "4"},
            {"SM_VLLM_MAX_LORA_RANK": "32"},
            {"SM_VLLM_MAX_CPU_LORAS": "8"},
        )
    }
    assert len(keys) == 4


def test_the_same_plan_in_two_interpreters_has_one_key() -> None:
    env = {**LLAMA_ENV, **FIXED}
    here = llama_plan(FIXED).cache_key
    keys = set()
    for seed in ("1", "2"):
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(FIXED)],
            cwd=ROOT,
            env={
                **{k: v for k, v in os.environ.items() if not k.startswith(("SM_", "NEURON"))},
                "PYTHONHASHSEED": seed,
            },
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        keys.add(proc.stdout.strip())
    assert keys == {here}, (keys, here, env)


def test_a_recorded_key_stays_the_same() -> None:
    assert llama_plan(FIXED).cache_key == RECORDED
