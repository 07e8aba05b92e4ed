"""Lane 2.28's Qwen2-VL: what its NxD Inference asserts of the vision encoder is rendered (profiles.py
`vision_required`, multimodal.py `nest`), and a user's contrary value is refused.

NxD Inference 2.28 Qwen2VLInferenceConfig asserts `vision_config.neuron_config.fused_qkv is True`
(models/qwen2_vl/modeling_qwen2_vl.py:109); NeuronConfig defaults it to False, so without the plan's
key every Qwen2-VL configuration raised when tests/contract built it.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.builders import LLAMA_ENV, additional, llama_facts, plan, refusal
from tests.support.configs import VERSIONS

TEXT = {"num_key_value_heads": 4, "head_dim": 128}
QWEN2_VL = {
    "model_type": "qwen2_vl",
    "architectures": ["Qwen2VLForConditionalGeneration"],
    "text_config": TEXT,
}
LLAMA4 = {"model_type": "llama4", "architectures": ["Llama4ForConditionalGeneration"], "text_config": TEXT}
LANE_2_28 = {**VERSIONS, "vllm": "0.13.0", "vllm-neuron": "0.4.1"}


def _override(config: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    p = plan({**LLAMA_ENV, **env}, llama_facts(2, config, versions=LANE_2_28))
    doc = additional(p)["override_neuron_config"]
    assert isinstance(doc, dict)
    return doc


def test_qwen2_vl_gets_the_fused_qkv_its_vision_encoder_asserts() -> None:
    assert _override(QWEN2_VL, {})["vision_neuron_config"] == {"fused_qkv": True, "buckets": [1]}
    given = {"SM_NEURON_OVERRIDE_CONFIG": json.dumps({"vision_neuron_config": {"buckets": [1, 2]}})}
    assert _override(QWEN2_VL, given)["vision_neuron_config"] == {"buckets": [1, 2], "fused_qkv": True}
    # the neighbour: Llama 4's vision encoder asserts no such thing
    assert "vision_neuron_config" not in _override(LLAMA4, {})


def test_a_contrary_fused_qkv_is_refused_naming_the_setting() -> None:
    env = {"SM_NEURON_OVERRIDE_CONFIG": json.dumps({"vision_neuron_config": {"fused_qkv": False}})}
    err = refusal({**LLAMA_ENV, **env}, llama_facts(2, QWEN2_VL, versions=LANE_2_28))
    assert err.variables == ("SM_NEURON_OVERRIDE_CONFIG",)
    assert "vision_neuron_config sets fused_qkv=false" in str(err)
    assert "Qwen2VLForConditionalGeneration" in str(err)


def test_qwen2_vl_vision_buckets_must_fit_the_text_sequence() -> None:
    """Its vision buckets are image counts; NxD Inference asserts the largest one's tokens (1012 pixels
    per image merged 2x2: 253) fit the text model (modeling_qwen2_vl.py:108-109). NeuronConfig's default
    buckets ([seq_len]) never do, hence the plan's [1]."""
    fits = {"SM_NEURON_OVERRIDE_CONFIG": json.dumps({"vision_neuron_config": {"buckets": [8]}})}
    assert _override(QWEN2_VL, fits)["vision_neuron_config"]["buckets"] == [8]  # 8 x 253 = 2024 <= 2048
    too_many = {"SM_NEURON_OVERRIDE_CONFIG": json.dumps({"vision_neuron_config": {"buckets": [9]}})}
    err = refusal({**LLAMA_ENV, **too_many}, llama_facts(2, QWEN2_VL, versions=LANE_2_28))
    assert "buckets up to 9 images need 2277 tokens, more than max_model_len 2048" in str(err)
