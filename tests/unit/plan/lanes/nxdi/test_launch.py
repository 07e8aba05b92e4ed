"""The launch numbers of an NxD Inference lane (plan/lanes/nxdi/launch.py) through build_plan: override keys
that shadow the launch, max_context_length and max_num_batched_tokens, refusals and warnings word for
word (added where mutation testing showed them unchecked: docs/TESTING.md). max_model_len and TP:
test_launch_tp_and_length.py.
"""

from __future__ import annotations

import json

import pytest
from tests.support.builders import additional, plan, refusal

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


def test_a_shorter_max_context_length_gets_max_prompt_length_so_long_prompts_get_a_400() -> None:
    """vllm-neuron 0.2.2+lts stops the engine on a prompt longer than max_context_length unless
    additional_config max_prompt_length makes vLLM refuse it first: the plan adds it, and says so."""
    p = plan({**BASE, "SM_NEURON_MAX_CONTEXT_LENGTH": "1024"})
    assert (
        "SM_NEURON_MAX_CONTEXT_LENGTH=1024: prompts longer than 1024 tokens cannot be prefilled; "
        "max_prompt_length 1024 added to --additional-config so they get a 400 instead of stopping the engine"
    ) in p.warnings
    assert additional(p)["max_prompt_length"] == 1024
    full = plan({**BASE, "SM_NEURON_MAX_CONTEXT_LENGTH": "2048"})
    assert "max_prompt_length" not in additional(full) and not [w for w in full.warnings if "prefilled" in w]
    assert "max_prompt_length" not in additional(plan({**BASE, **CHUNKED}))  # the chunk is no prompt limit


CHUNKED = {
    "SM_VLLM_ENABLE_CHUNKED_PREFILL": "true",
    "SM_NEURON_CHUNKED_PREFILL_CONFIG": '{"max_num_seqs": 4}',
    "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "512",
}
PROMPT = "SM_VLLM_ADDITIONAL_CONFIG"


def prompt_env(value: str, **more: str) -> dict[str, str]:
    return {**BASE, PROMPT: f'{{"max_prompt_length": {value}}}', **more}


@pytest.mark.parametrize(
    ("env", "message", "variables"),
    [
        *[
            (
                prompt_env(value),
                f"{PROMPT} max_prompt_length={shown} must be a positive integer <= max_model_len 2048",
                (PROMPT, "SM_VLLM_MAX_MODEL_LEN"),
            )
            for value, shown in (("4096", "4096"), ("0", "0"), ('"1024"', "1024"), ("true", "True"))
        ],
        (
            prompt_env("1024", SM_NEURON_MAX_CONTEXT_LENGTH="512"),
            f"{PROMPT} max_prompt_length=1024 and SM_NEURON_MAX_CONTEXT_LENGTH=512 disagree: vllm-neuron "
            "0.2.2+lts raises at load when they differ (worker/neuronx_distributed_model_loader.py:929-938): "
            "remove SM_NEURON_MAX_CONTEXT_LENGTH, or give both one value",
            (PROMPT, "SM_NEURON_MAX_CONTEXT_LENGTH"),
        ),
        (
            prompt_env("1024", **CHUNKED),
            f"{PROMPT} max_prompt_length=1024: with chunked prefill vllm-neuron 0.2.2+lts compiles it as the "
            "chunk, but vLLM schedules chunks of SM_VLLM_MAX_NUM_BATCHED_TOKENS=512: remove "
            "max_prompt_length, or set SM_VLLM_MAX_NUM_BATCHED_TOKENS=1024",
            (PROMPT, "SM_VLLM_MAX_NUM_BATCHED_TOKENS"),
        ),
        (
            prompt_env("1024", SM_NEURON_CONTEXT_ENCODING_BUCKETS="[512, 2048]"),
            "SM_NEURON_CONTEXT_ENCODING_BUCKETS: context_encoding_buckets [2048] exceed max_context_length "
            f"(the longest prefill) 1024: use buckets <= 1024 (e.g. [512]) or raise {PROMPT}",
            ("SM_NEURON_CONTEXT_ENCODING_BUCKETS", "SM_VLLM_MAX_MODEL_LEN"),
        ),
    ],
)
def test_a_max_prompt_length_the_plugin_would_refuse_or_compile_differently_is_refused(
    env: dict[str, str], message: str, variables: tuple[str, ...]
) -> None:
    err = refusal(env)
    assert str(err) == message
    assert err.variables == variables


@pytest.mark.parametrize(
    "env",
    [
        prompt_env("1024"),
        prompt_env("2048"),
        prompt_env("1024", SM_NEURON_MAX_CONTEXT_LENGTH="1024"),
        prompt_env("512", **CHUNKED),
        prompt_env("1024", SM_NEURON_CONTEXT_ENCODING_BUCKETS="[512, 1024]"),
    ],
)
def test_a_max_prompt_length_the_plugin_accepts_is_kept_as_given(env: dict[str, str]) -> None:
    p = plan(env)
    prompt = json.loads(env[PROMPT])["max_prompt_length"]
    assert additional(p)["max_prompt_length"] == prompt
    limited = prompt < 2048 and "SM_VLLM_ENABLE_CHUNKED_PREFILL" not in env
    said = f"{PROMPT} max_prompt_length={prompt}: prompts longer than {prompt} tokens get a 400"
    assert (said in p.warnings) is limited


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
