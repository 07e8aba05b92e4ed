"""Feature combinations the stack runs without an error at start, but wrongly or into a failure later
(plan/lanes/nxdi/combinations.py): each refused on both NxD Inference lanes, naming both variables, and
its neighbours (each feature alone) planned. Found by reading the runner's input preparation and NxD
Inference's fused-speculation model for every pair of features; the lines are in the module's docstrings.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import LLAMA, llama_facts, llama_plan, llama_refusal

from neuronserve.errors import ConfigError
from neuronserve.plan.facts import ModelFacts
from neuronserve.types import LaunchPlan

LANES = {"2.27": None, "2.28": {"vllm": "0.13.0", "vllm-neuron": "0.4.1"}}
DRAFT = ModelFacts("dir", {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, "e" * 64, True)
ADAPTER = ModelFacts("dir", None)
EAGLE = {"SM_VLLM_SPECULATIVE_CONFIG": '{"method": "eagle", "model": "/draft", "num_speculative_tokens": 4}'}
CPU = {"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": "null"}
CHUNKED = {
    "SM_VLLM_ENABLE_CHUNKED_PREFILL": "true",
    "SM_NEURON_CHUNKED_PREFILL_CONFIG": '{"max_num_seqs": 4}',
}
LORA = {"SM_VLLM_ENABLE_LORA": "true", "SM_VLLM_LORA_MODULES": "a=/adapters/a"}
TEXT = {"num_key_value_heads": 8, "head_dim": 128}
# An installed NxD Inference that has every model type these tests use.
REGISTRY = {k: ("causal-lm",) for k in ("llama", "llama4", "mllama", "pixtral", "qwen2_vl", "qwen3_vl")}


def lane_facts(lane: str, config: dict[str, Any] | None = None) -> Any:
    kw: dict[str, Any] = {"paths": {"/draft": DRAFT, "/adapters/a": ADAPTER}, "nxdi_models": REGISTRY}
    if LANES[lane]:
        kw["versions"] = LANES[lane]
    return llama_facts(2, config or LLAMA, **kw)


def on(lane: str, env: dict[str, str], config: dict[str, Any] | None = None) -> LaunchPlan:
    return llama_plan(env, lane_facts(lane, config))


def refused(lane: str, env: dict[str, str], config: dict[str, Any] | None = None) -> ConfigError:
    return llama_refusal(env, lane_facts(lane, config))


PAIRS = [
    pytest.param(
        LORA,
        CHUNKED,
        "SM_VLLM_ENABLE_LORA=true with chunked prefill: the plugin passes no adapter ids on its "
        "chunked-prefill path",
        ("SM_VLLM_ENABLE_LORA", "SM_VLLM_ENABLE_CHUNKED_PREFILL"),
        id="lora+chunked",
    ),
    pytest.param(
        LORA,
        EAGLE,
        "SM_VLLM_ENABLE_LORA=true with speculative decoding: NxD Inference's fused speculation runs the "
        "target model without the request's adapter",
        ("SM_VLLM_ENABLE_LORA", "SM_VLLM_SPECULATIVE_CONFIG"),
        id="lora+eagle",
    ),
    pytest.param(
        EAGLE,
        CPU,
        "SM_VLLM_SPECULATIVE_CONFIG with CPU sampling: NxD Inference's fused speculation needs on-device "
        "sampling",
        ("SM_VLLM_SPECULATIVE_CONFIG", "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG"),
        id="eagle+cpu-sampling",
    ),
    pytest.param(
        CHUNKED,
        CPU,
        "SM_VLLM_ENABLE_CHUNKED_PREFILL=true with CPU sampling: the plugin returns logits only for the "
        "prefills a step finishes",
        ("SM_VLLM_ENABLE_CHUNKED_PREFILL", "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG"),
        id="chunked+cpu-sampling",
    ),
    pytest.param(
        EAGLE,
        CHUNKED,
        "SM_VLLM_SPECULATIVE_CONFIG with chunked prefill: the plugin's chunked-prefill inputs carry no draft "
        "tokens",
        ("SM_VLLM_SPECULATIVE_CONFIG", "SM_VLLM_ENABLE_CHUNKED_PREFILL"),
        id="eagle+chunked",
    ),
]


@pytest.mark.parametrize("lane", sorted(LANES))
@pytest.mark.parametrize(("first", "second", "said", "names"), PAIRS)
def test_a_pair_the_stack_runs_wrongly_is_refused_and_each_half_plans(
    lane: str, first: dict[str, str], second: dict[str, str], said: str, names: tuple[str, ...]
) -> None:
    err = refused(lane, {**first, **second})
    assert str(err).startswith(said), str(err)
    assert err.variables == names
    for half in (first, second):
        if lane == "2.28" and half is CHUNKED:
            # NxD Inference 2.28 cannot build chunked prefill at all (models/model_base.py:3096-3097).
            assert "chunked prefill does not build on vllm-neuron 0.4.1" in str(refused(lane, half))
        else:
            on(lane, half)


MULTIMODAL = [
    pytest.param("2.27", "Llama4ForConditionalGeneration", id="llama4-2.27"),
    pytest.param("2.27", "LlavaForConditionalGeneration", id="pixtral-2.27"),
    pytest.param("2.28", "Llama4ForConditionalGeneration", id="llama4-2.28"),
    pytest.param("2.28", "Qwen2VLForConditionalGeneration", id="qwen2vl-2.28"),
    pytest.param("2.28", "Qwen3VLForConditionalGeneration", id="qwen3vl-2.28"),
]


@pytest.mark.parametrize(("lane", "arch"), MULTIMODAL)
def test_lora_on_a_multimodal_model_is_refused(lane: str, arch: str) -> None:
    """The multimodal execute_model and forward never pass the request's adapter ids (vllm-neuron
    0.2.2+lts loader :461-475, 500-508; 0.4.1 :633-650, 672-681): every request would run the base model."""
    config = {"architectures": [arch], "text_config": TEXT}
    err = refused(lane, LORA, config)
    assert str(err).startswith(
        f"SM_VLLM_ENABLE_LORA=true: the plugin never passes a request's adapter to {arch}"
    )
    assert err.variables == ("SM_VLLM_ENABLE_LORA",)
    on(lane, {}, config)
    on(lane, LORA)  # the text model


@pytest.mark.parametrize("lane", sorted(LANES))
def test_mllama_is_refused_since_every_request_fails(lane: str) -> None:
    """The plugin builds MllamaForConditionalGeneration as a text NeuronCausalLM (0.2.2+lts loader
    :675-680) but routes its requests to model.execute_model (runner :406-409, :666), which that class
    lacks: every request fails. The plugin's README lists no Mllama (0.4.1's: legacy fork only)."""
    err = refused(lane, {}, {"architectures": ["MllamaForConditionalGeneration"], "text_config": TEXT})
    assert str(err).startswith(
        "/m: MllamaForConditionalGeneration starts but every request fails on vllm-neuron"
    )
    assert err.variables == ("SM_VLLM_MODEL",)
