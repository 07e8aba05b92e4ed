"""The Neuron rules (plan/lanes/nxdi/rules.py) called directly: each refusal word for word with the
variables it names, and the values just inside each limit passing (added where mutation testing showed
messages, names and bounds unchecked: docs/TESTING.md). The edges found later: test_rules_edges.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import raised, resolution

from neuronserve.plan.lanes.nxdi import rules

ORIGINS = {
    "block-size": "SM_VLLM_BLOCK_SIZE",
    "num-gpu-blocks-override": "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE",
    "max-model-len": "SM_VLLM_MAX_MODEL_LEN",
    "enable-chunked-prefill": "SM_VLLM_ENABLE_CHUNKED_PREFILL",
    "task": "SM_VLLM_TASK",
    "runner": "SM_VLLM_RUNNER",
}


def test_tp() -> None:
    rules.check_tp(1, "SM_VLLM_TENSOR_PARALLEL_SIZE", 2, "neuron-ls")
    rules.check_tp(2, "SM_VLLM_TENSOR_PARALLEL_SIZE", 2, "neuron-ls")
    rules.check_tp(64, "SM_VLLM_TENSOR_PARALLEL_SIZE", None, "unknown")
    err = raised(rules.check_tp, 0, "SM_VLLM_TENSOR_PARALLEL_SIZE", 2, "neuron-ls")
    assert (str(err), err.variables) == (
        "SM_VLLM_TENSOR_PARALLEL_SIZE=0: tensor parallel size must be at least 1",
        ("SM_VLLM_TENSOR_PARALLEL_SIZE",),
    )
    err = raised(rules.check_tp, 3, "SM_VLLM_TENSOR_PARALLEL_SIZE", 2, "NEURON_RT_VISIBLE_CORES")
    assert (str(err), err.variables) == (
        "SM_VLLM_TENSOR_PARALLEL_SIZE=3 exceeds the 2 visible NeuronCores (NEURON_RT_VISIBLE_CORES): set "
        "SM_VLLM_TENSOR_PARALLEL_SIZE=2 or fewer, or run on an instance with more cores",
        ("SM_VLLM_TENSOR_PARALLEL_SIZE",),
    )


def test_dtype() -> None:
    rules.check_dtype("bfloat16", "SM_VLLM_DTYPE")
    err = raised(rules.check_dtype, "auto", "SM_VLLM_DTYPE")
    assert (str(err), err.variables) == (
        "SM_VLLM_DTYPE=auto compiles float32 on Neuron: set SM_VLLM_DTYPE=bfloat16 (or float16/float32 "
        "explicitly)",
        ("SM_VLLM_DTYPE",),
    )


@pytest.mark.parametrize("dtype", ["AUTO", "int8", "bf16", ""])
def test_a_dtype_vllm_does_not_know_is_refused_before_the_engine(dtype: str) -> None:
    """vLLM's argparse would refuse these at start (choices compare as written; LMI's fp16/bf16 are
    mapped in config/compat.py before this); the estimate must not count them as 2 bytes first."""
    err = raised(rules.check_dtype, dtype, "OPTION_DTYPE")
    assert (str(err), err.variables) == (
        f"OPTION_DTYPE={dtype} is not a vLLM dtype: use one of bfloat16, float, float16, float32, half "
        "(bfloat16 on Neuron)",
        ("OPTION_DTYPE",),
    )


def test_block_layout() -> None:
    rules.check_block_layout(2048, 4, 32, 256, resolution(ORIGINS))  # exactly enough
    err = raised(rules.check_block_layout, 2048, 4, 48, 999, resolution(ORIGINS))
    assert (str(err), err.variables) == (
        "SM_VLLM_BLOCK_SIZE=48 is not a block size of vLLM 0.11.0: use one of 1, 8, 16, 32, 64, 128 "
        "(e.g. 32)",
        ("SM_VLLM_BLOCK_SIZE",),
    )
    err = raised(rules.check_block_layout, 2000, 4, 32, 999, resolution(ORIGINS))
    assert (str(err), err.variables) == (
        "SM_VLLM_MAX_MODEL_LEN=2000 is not a multiple of the block size 32 (SM_VLLM_BLOCK_SIZE): set "
        "SM_VLLM_MAX_MODEL_LEN=2016 (the plugin's floor division fails its own check otherwise)",
        ("SM_VLLM_MAX_MODEL_LEN", "SM_VLLM_BLOCK_SIZE"),
    )
    err = raised(rules.check_block_layout, 2048, 4, 32, 255, resolution(ORIGINS))
    assert (str(err), err.variables) == (
        "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE=255 KV blocks cannot hold 4 sequences of 2048 tokens in blocks of "
        "32: "
        "set SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE=256 or more (ceil(max_model_len / block_size) * max_num_seqs)",
        ("SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE",),
    )


def test_pa_keys() -> None:
    given = {**ORIGINS, "num-gpu-blocks-given": "yes"}
    rules.check_pa_keys(32, 256, resolution(given, override={"pa_num_blocks": 256, "pa_block_size": 32}))
    err = raised(rules.check_pa_keys, 32, 256, resolution(ORIGINS, override={"pa_num_blocks": 256}))
    assert (str(err), err.variables) == (
        "SM_NEURON_PA_NUM_BLOCKS sets pa_num_blocks=256 without a matching --num-gpu-blocks-override (the "
        "plugin raises): set SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE=256 and SM_VLLM_ENABLE_PREFIX_CACHING=true, or "
        "remove pa_num_blocks",
        ("SM_NEURON_PA_NUM_BLOCKS", "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE"),
    )
    assert (
        raised(rules.check_pa_keys, 32, None, resolution(given, override={"pa_num_blocks": 256})).variables[0]
        == "SM_NEURON_PA_NUM_BLOCKS"
    )
    err = raised(
        rules.check_pa_keys,
        32,
        256,
        resolution({**given, "pa_num_blocks": "X"}, override={"pa_num_blocks": 257}),
    )
    assert (str(err), err.variables) == (
        "X sets pa_num_blocks=257 but SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE=256: the plugin requires them equal "
        "(it "
        "adds the null block itself): set SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE=257 or remove pa_num_blocks (the "
        "plugin derives it)",
        ("X", "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE"),
    )
    # no block size to compare with:
    rules.check_pa_keys(None, None, resolution(ORIGINS, override={"pa_block_size": 16}))
    err = raised(rules.check_pa_keys, 32, 256, resolution(ORIGINS, override={"pa_block_size": 16}))
    assert (str(err), err.variables) == (
        "SM_NEURON_PA_BLOCK_SIZE sets pa_block_size=16 but the block size is 32: set SM_VLLM_BLOCK_SIZE=16 "
        "or remove pa_block_size",
        ("SM_NEURON_PA_BLOCK_SIZE", "SM_VLLM_BLOCK_SIZE"),
    )


def buckets(override: dict[str, Any], *, prefix: bool = False, max_context: int = 2048) -> list[str]:
    warnings: list[str] = []
    rules.check_buckets(
        length=2048,
        max_context=max_context,
        prefix=prefix,
        res=resolution(ORIGINS, warnings=warnings, override=override),
    )
    return warnings


def test_buckets_within_the_limits_pass() -> None:
    assert buckets({"context_encoding_buckets": [512, 2048], "token_generation_buckets": [256, 2048]}) == []
    assert buckets({"context_encoding_buckets": None}) == []


@pytest.mark.parametrize("bad", [[0, 512], [512, "1024"], "512", [-128], [True], [512, False], []])
def test_buckets_must_be_lists_of_positive_integers(bad: Any) -> None:
    err = raised(buckets, {"token_generation_buckets": bad})
    assert (str(err), err.variables) == (
        "SM_NEURON_TOKEN_GENERATION_BUCKETS: token_generation_buckets must be a JSON list of positive "
        "integers, e.g. [128, 512]",
        ("SM_NEURON_TOKEN_GENERATION_BUCKETS",),
    )


def test_buckets_over_their_limit_are_refused() -> None:
    err = raised(buckets, {"token_generation_buckets": [1024, 4096]})
    assert (str(err), err.variables) == (
        "SM_NEURON_TOKEN_GENERATION_BUCKETS: token_generation_buckets [4096] exceed max_model_len 2048: use "
        "buckets <= 2048 (e.g. [1024]) or raise SM_VLLM_MAX_MODEL_LEN",
        ("SM_NEURON_TOKEN_GENERATION_BUCKETS", "SM_VLLM_MAX_MODEL_LEN"),
    )
    err = raised(buckets, {"context_encoding_buckets": [1024, 2048]}, max_context=512)
    assert str(err) == (
        "SM_NEURON_CONTEXT_ENCODING_BUCKETS: context_encoding_buckets [1024, 2048] exceed max_context_length "
        "(the longest prefill) 512: use buckets <= 512 (e.g. [512]) or raise SM_VLLM_MAX_NUM_BATCHED_TOKENS"
    )


def test_small_buckets_with_prefix_caching_are_warned_about() -> None:
    warnings = buckets(
        {"context_encoding_buckets": [256, 2048], "prefix_buckets": [256], "token_generation_buckets": [128]},
        prefix=True,
    )
    assert warnings == [
        "SM_NEURON_CONTEXT_ENCODING_BUCKETS: 256 is below 512, the smallest context_encoding_buckets entry "
        "NxD "
        "Inference generates itself with prefix caching (its kernel's stated minimum, not a check)",
        "SM_NEURON_TOKEN_GENERATION_BUCKETS: 128 is below 256, the smallest token_generation_buckets entry "
        "NxD "
        "Inference generates itself with prefix caching (its kernel's stated minimum, not a check)",
    ]
    assert (
        buckets(
            {"context_encoding_buckets": [512], "prefix_buckets": [512], "token_generation_buckets": [256]},
            prefix=True,
        )
        == []
    )


def test_prefix_caching_context_buckets_need_prefix_buckets() -> None:
    err = raised(buckets, {"context_encoding_buckets": [512, 2048]}, prefix=True)
    assert (str(err), err.variables) == (
        "SM_NEURON_CONTEXT_ENCODING_BUCKETS: with prefix caching, context_encoding_buckets need "
        "prefix_buckets "
        "too (NxD Inference builds a 2-D grid from both and fails with a TypeError without them): set "
        "SM_NEURON_PREFIX_BUCKETS (e.g. [512, 2048]), or remove SM_NEURON_CONTEXT_ENCODING_BUCKETS",
        ("SM_NEURON_CONTEXT_ENCODING_BUCKETS", "SM_NEURON_PREFIX_BUCKETS"),
    )
    assert buckets({"context_encoding_buckets": [512, 2048], "enable_bucketing": False}, prefix=True) == []


def test_chunked_prefill_rules() -> None:
    rules.check_chunked(
        True, 4, resolution(ORIGINS, override={"chunked_prefill_config": {"max_num_seqs": 4}})
    )
    rules.check_chunked(False, 4, resolution(ORIGINS, override={}))
    err = raised(rules.check_chunked, True, 4, resolution(ORIGINS, override={}))
    assert (str(err), err.variables) == (
        "SM_VLLM_ENABLE_CHUNKED_PREFILL=true needs a chunked_prefill_config in override_neuron_config: set "
        "SM_NEURON_CHUNKED_PREFILL_CONFIG='{\"max_num_seqs\": 4}'",
        ("SM_VLLM_ENABLE_CHUNKED_PREFILL", "SM_NEURON_CHUNKED_PREFILL_CONFIG"),
    )
    cfg = {"chunked_prefill_config": {"max_num_seqs": 4}}
    err = raised(
        rules.check_chunked,
        True,
        4,
        resolution(ORIGINS, env={"DISABLE_NEURON_CUSTOM_SCHEDULER": "0"}, override=cfg),
    )
    assert (str(err), err.variables) == (
        "chunked prefill needs DISABLE_NEURON_CUSTOM_SCHEDULER=1 (the custom scheduler disables it): unset "
        "DISABLE_NEURON_CUSTOM_SCHEDULER or set it to 1",
        ("DISABLE_NEURON_CUSTOM_SCHEDULER", "SM_VLLM_ENABLE_CHUNKED_PREFILL"),
    )
    rules.check_chunked(
        True, 4, resolution(ORIGINS, env={"DISABLE_NEURON_CUSTOM_SCHEDULER": " 1 "}, override=cfg)
    )
    err = raised(rules.check_chunked, False, 4, resolution(ORIGINS, override=cfg))
    assert (str(err), err.variables) == (
        "SM_NEURON_CHUNKED_PREFILL_CONFIG sets chunked_prefill_config but chunked prefill is off: set "
        "SM_VLLM_ENABLE_CHUNKED_PREFILL=true, or remove chunked_prefill_config",
        ("SM_NEURON_CHUNKED_PREFILL_CONFIG", "SM_VLLM_ENABLE_CHUNKED_PREFILL"),
    )


def test_sequence_parallel_needs_buckets_divisible_by_tp() -> None:
    rules.check_sequence_parallel(
        [512, 1024], 8, resolution(ORIGINS, override={"sequence_parallel_enabled": True})
    )
    rules.check_sequence_parallel(
        [500], 8, resolution(ORIGINS, override={"sequence_parallel_enabled": False})
    )
    err = raised(
        rules.check_sequence_parallel,
        [4, 500, 1024],
        8,
        resolution(ORIGINS, override={"sequence_parallel_enabled": True}),
    )
    assert (str(err), err.variables) == (
        "SM_NEURON_SEQUENCE_PARALLEL_ENABLED: sequence parallelism needs every prefill bucket divisible by "
        "tensor_parallel_size 8, but [4, 500] are not (buckets [4, 500, 1024]): set "
        "SM_NEURON_CONTEXT_ENCODING_BUCKETS=[8, 496, 1024] (and SM_VLLM_MAX_MODEL_LEN a multiple of 8), or a "
        "TP that divides them, or remove SM_NEURON_SEQUENCE_PARALLEL_ENABLED",
        ("SM_NEURON_SEQUENCE_PARALLEL_ENABLED", "SM_VLLM_MAX_MODEL_LEN"),
    )


@pytest.mark.parametrize(("task", "runner"), [(None, None), ("generate", "auto"), ("auto", "generate")])
def test_text_generation_tasks_pass(task: Any, runner: Any) -> None:
    rules.check_task(task, runner, resolution(ORIGINS))


def test_other_tasks_are_refused() -> None:
    err = raised(rules.check_task, "embed", None, resolution(ORIGINS))
    assert (str(err), err.variables) == (
        "SM_VLLM_TASK=embed: vllm-neuron 0.2.x serves text generation only: set SM_VLLM_TASK=generate or "
        "unset it",
        ("SM_VLLM_TASK",),
    )
    assert raised(rules.check_task, None, "pooling", resolution(ORIGINS)).variables == ("SM_VLLM_RUNNER",)
