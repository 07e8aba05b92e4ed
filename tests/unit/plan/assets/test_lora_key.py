"""The LoRA shapes in the cache key (plan/assets/lora.py `lora_graph`, hashed by plan/cachekey.py).

NxD Inference compiles one LoRA weight tensor of max_loras adapters of max_lora_rank per target module
(modules/lora_serving/lora_layer.py:33, lora_module.py:28) and, with dynamic multi-LoRA, pre-shards
max_cpu_loras adapters into the artifacts (lora_checkpoint.py:283, application_base.py:256-260); the
plugin loads whatever the artifact directory holds, unchecked (vllm-neuron 0.2.2+lts
worker/neuronx_distributed_model_loader.py:198-199, 214-226). The key recorded LoRA as on/off only, so
plans differing in those numbers shared a key and a hit served a graph compiled for other shapes."""

from __future__ import annotations

import pytest
from tests.support.builders import LORA_ENV, asset_plan

ONE = {"SM_VLLM_ENABLE_LORA": "true", "SM_VLLM_LORA_MODULES": "b=/adapters/b"}


@pytest.mark.parametrize(
    "change",
    [
        {"SM_VLLM_MAX_LORAS": "2"},
        {"SM_VLLM_MAX_LORA_RANK": "32"},
        {"SM_VLLM_MAX_CPU_LORAS": "4"},
    ],
)
def test_each_lora_shape_changes_the_key(change: dict[str, str]) -> None:
    assert asset_plan({**ONE, **change}).cache_key != asset_plan(ONE).cache_key


def test_the_shapes_as_vllm_defaults_them_keep_the_key() -> None:
    """Unset, vLLM compiles max_loras 1, max_lora_rank 16 and max_cpu_loras = max_loras (vLLM 0.11.0
    config/lora.py:33-44, 124-125): the same graph as those values given, so the same key; with two
    adapters named the plan passes --max-loras 2 itself, which is what the key records."""
    same = {"SM_VLLM_MAX_LORAS": "1", "SM_VLLM_MAX_LORA_RANK": "16", "SM_VLLM_MAX_CPU_LORAS": "1"}
    assert asset_plan({**ONE, **same}).cache_key == asset_plan(ONE).cache_key
    two = asset_plan(LORA_ENV)
    assert two.argv[two.argv.index("--max-loras") + 1] == "2"
    assert two.cache_key == asset_plan({**LORA_ENV, "SM_VLLM_MAX_LORAS": "2"}).cache_key


def test_no_lora_keeps_the_key_it_always_had() -> None:
    """Without LoRA the graph's "lora" entry stays false: keys of every other launch are unchanged."""
    p = asset_plan({})
    q = asset_plan({"SM_VLLM_MAX_LORA_RANK": "32"})  # read only with LoRA on
    assert p.cache_key == q.cache_key
