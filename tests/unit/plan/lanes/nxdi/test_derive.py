"""What the plugin and NxD Inference derive (plan/derive.py), table by table, each expected value worked
out by hand from the cited source lines (added where mutation testing showed them unchecked)."""

from __future__ import annotations

from typing import Any

import pytest

from neuronserve.plan.lanes.nxdi import derive


@pytest.mark.parametrize(
    ("arch", "key"),
    [
        ("LlamaForCausalLM", ("llama", "causal-lm")),
        ("Qwen3MoeForCausalLM", ("qwen3_moe", "causal-lm")),
        ("MllamaForConditionalGeneration", ("mllama", "causal-lm")),
        ("LlavaForConditionalGeneration", ("pixtral", "causal-lm")),
        ("GptOssForCausalLM", ("gptoss", "causal-lm")),
        ("LlamaForSequenceClassification", ("llama", "sequence-classification")),
        ("ForecastForCausalLMForX", ("", "ecast-for-causal-lm-for-x")),  # split at the FIRST "For"
        ("LlamaModel", None),
    ],
)
def test_plugin_model_key(arch: str, key: tuple[str, str] | None) -> None:
    assert derive.plugin_model_key(arch) == key


@pytest.mark.parametrize(
    ("config", "arch", "known"),
    [
        ({"num_key_value_heads": 8, "head_dim": 64}, "LlamaForCausalLM", True),
        (
            {"num_key_value_heads": 8, "hidden_size": 4096, "num_attention_heads": 32},
            "LlamaForCausalLM",
            True,
        ),
        ({"num_key_value_heads": 8, "hidden_size": 4096}, "LlamaForCausalLM", False),
        ({"num_key_value_heads": 8, "num_attention_heads": 32}, "LlamaForCausalLM", False),
        ({"head_dim": 64}, "LlamaForCausalLM", False),
        ({"num_key_value_heads": 0, "head_dim": 64}, "LlamaForCausalLM", False),
        ({"num_key_value_heads": 8, "head_dim": 64}, "MllamaForConditionalGeneration", False),  # text_config
        (
            {"text_config": {"num_key_value_heads": 8, "head_dim": 128}},
            "MllamaForConditionalGeneration",
            True,
        ),
        ({"text_config": {"num_key_value_heads": 8, "head_dim": 128}}, "LlamaForCausalLM", False),
    ],
)
def test_heads_known(config: dict[str, Any], arch: str, known: bool) -> None:
    assert derive.heads_known(config, arch) is known


@pytest.mark.parametrize(
    ("override", "max_context", "prefix", "chunked", "buckets"),
    [
        ({}, 2048, False, False, [128, 256, 512, 1024, 2048]),
        ({}, 2048, True, False, [512, 1024, 2048]),
        ({}, 2000, False, False, [128, 256, 512, 1024, 2000]),
        ({}, 64, False, False, [64]),
        ({}, 128, False, False, [128]),
        ({"enable_bucketing": False}, 2048, False, False, [2048]),
        (
            {"enable_bucketing": None, "context_encoding_buckets": [1024, 512]},
            2048,
            False,
            False,
            [512, 1024],
        ),
        ({"context_encoding_buckets": []}, 512, False, False, [128, 256, 512]),
        ({"context_encoding_buckets": [512]}, 2048, False, True, [2048]),
    ],
)
def test_context_buckets(
    override: dict[str, Any], max_context: int, prefix: bool, chunked: bool, buckets: list[int]
) -> None:
    assert derive.context_buckets(override, max_context, prefix, chunked) == buckets


@pytest.mark.parametrize(
    ("override", "chunked", "batched", "want"),
    [
        ({}, False, 8192, 4096),
        ({}, True, 8192, 8192),
        ({}, True, None, 4096),
        ({"max_context_length": 1024}, True, 8192, 1024),
        ({"max_context_length": True}, False, None, 4096),
        ({"max_context_length": "1024"}, False, None, 4096),
    ],
)
def test_max_context_length(override: dict[str, Any], chunked: bool, batched: int | None, want: int) -> None:
    assert derive.max_context_length(override, 4096, chunked, batched) == want


def test_max_prompt_length_replaces_max_context_length() -> None:
    """vllm-neuron 0.2.2+lts writes additional_config max_prompt_length over the override's key."""
    assert derive.max_context_length({"max_context_length": 2048}, 4096, False, None, 1024) == 1024
    assert derive.max_context_length({}, 4096, True, 512, 512) == 512
