"""The Neuron plan through build_plan: override keys that shadow the launch, max_context_length and
max_num_batched_tokens, refusals and warnings word for word (added where mutation testing showed them
unchecked: docs/TESTING.md)."""

from __future__ import annotations

import pytest
from tests.support.builders import plan, refusal

BASE = {
    "SM_VLLM_MODEL": "org/m",
    "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
    "SM_VLLM_MAX_MODEL_LEN": "2048",
    "SM_VLLM_MAX_NUM_SEQS": "4",
    "SM_VLLM_DTYPE": "bfloat16",
}


@pytest.mark.parametrize(
    ("var", "value", "setting"),
    [
        ("SM_NEURON_TP_DEGREE", "4", "SM_VLLM_TENSOR_PARALLEL_SIZE"),
        ("SM_NEURON_BATCH_SIZE", "8", "SM_VLLM_MAX_NUM_SEQS"),
        ("SM_NEURON_IS_CONTINUOUS_BATCHING", "false", "SM_VLLM_MAX_NUM_SEQS"),
        ("SM_NEURON_SEQ_LEN", "4096", "SM_VLLM_MAX_MODEL_LEN"),
        ("SM_NEURON_TORCH_DTYPE", "float16", "SM_VLLM_DTYPE"),
        ("SM_NEURON_ENABLE_FUSED_SPECULATION", "true", "SM_VLLM_SPECULATIVE_CONFIG"),
        ("SM_NEURON_SPECULATION_LENGTH", "4", "SM_VLLM_SPECULATIVE_CONFIG"),
        ("SM_NEURON_ENABLE_EAGLE_SPECULATION", "true", "SM_VLLM_SPECULATIVE_CONFIG"),
    ],
)
def test_an_override_key_that_disagrees_with_the_launch_names_both(
    var: str, value: str, setting: str
) -> None:
    err = refusal({**BASE, var: value})
    assert err.variables == (var, setting)


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("SM_NEURON_TP_DEGREE", "2"),
        ("SM_NEURON_BATCH_SIZE", "4"),
        ("SM_NEURON_IS_CONTINUOUS_BATCHING", "true"),
        ("SM_NEURON_SEQ_LEN", "2048"),
        ("SM_NEURON_TORCH_DTYPE", "bf16"),
        ("SM_NEURON_ENABLE_FUSED_SPECULATION", "false"),
        ("SM_NEURON_SPECULATION_LENGTH", "0"),
        ("SM_NEURON_ENABLE_EAGLE_SPECULATION", "false"),
    ],
)
def test_an_override_key_that_agrees_with_the_launch_passes(var: str, value: str) -> None:
    assert plan({**BASE, var: value}).neuron_override is not None


def test_a_shorter_max_context_length_is_said_to_limit_prompts() -> None:
    p = plan({**BASE, "SM_NEURON_MAX_CONTEXT_LENGTH": "1024"})
    assert (
        "SM_NEURON_MAX_CONTEXT_LENGTH=1024: prompts longer than 1024 tokens cannot be prefilled" in p.warnings
    )
    assert not [
        w for w in plan({**BASE, "SM_NEURON_MAX_CONTEXT_LENGTH": "2048"}).warnings if "prefilled" in w
    ]


@pytest.mark.parametrize("value", ["4096", "0", '"1024"'])
def test_a_max_context_length_outside_the_model_length_is_refused(value: str) -> None:
    err = refusal({**BASE, "SM_NEURON_MAX_CONTEXT_LENGTH": value})
    shown = value.strip('"')
    assert (
        str(err) == f"SM_NEURON_MAX_CONTEXT_LENGTH={shown} must be a positive integer <= max_model_len 2048"
    )
    assert err.variables == ("SM_NEURON_MAX_CONTEXT_LENGTH", "SM_VLLM_MAX_MODEL_LEN")


def test_batched_tokens_without_chunked_prefill_are_dropped_with_a_warning() -> None:
    p = plan({**BASE, "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "512"})
    assert (
        "SM_VLLM_MAX_NUM_BATCHED_TOKENS ignored: without chunked prefill the plugin's scheduler sets "
        "max_num_batched_tokens to 131072" in p.warnings
    )
    assert "--max-num-batched-tokens" not in p.argv
