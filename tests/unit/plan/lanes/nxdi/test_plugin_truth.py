"""Each configuration vllm-neuron 0.2.2+lts / NxD Inference 0.7 would reject (or run
differently than planned) is refused or rewritten the way the plugin runs it, and its accepted neighbour
passes. The source lines each rule mirrors are in the docstrings of plan/lanes/nxdi/kv.py, overrides.py,
rules.py."""

from __future__ import annotations

import dataclasses
import json

import pytest
from tests.support.builders import LLAMA, additional, flag, llama_facts, llama_plan, llama_refused

PREFIX = {"SM_VLLM_ENABLE_PREFIX_CACHING": "true", "SM_VLLM_BLOCK_SIZE": "32"}
CHUNKED = {
    "SM_VLLM_ENABLE_CHUNKED_PREFILL": "true",
    "SM_NEURON_CHUNKED_PREFILL_CONFIG": '{"max_num_seqs": 4}',
}


def override(env: dict[str, str]) -> dict[str, object]:
    doc = additional(llama_plan(env))["override_neuron_config"]
    assert isinstance(doc, dict)
    return doc


# 1. Override keys that duplicate a launch setting must agree with it.
@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"SM_NEURON_TP_DEGREE": "4"}, ("SM_NEURON_TP_DEGREE", "SM_VLLM_TENSOR_PARALLEL_SIZE")),
        ({"SM_NEURON_BATCH_SIZE": "8"}, ("SM_NEURON_BATCH_SIZE", "SM_VLLM_MAX_NUM_SEQS")),
        ({"SM_NEURON_SEQ_LEN": "4096"}, ("SM_NEURON_SEQ_LEN", "SM_VLLM_MAX_MODEL_LEN")),
        ({"SM_NEURON_TORCH_DTYPE": "float32"}, ("SM_NEURON_TORCH_DTYPE", "SM_VLLM_DTYPE")),
        ({"SM_NEURON_ENABLE_FUSED_SPECULATION": "true"}, ("SM_NEURON_ENABLE_FUSED_SPECULATION",)),
        (
            {**CHUNKED, "SM_NEURON_BATCH_SIZE": "4"},
            ("SM_NEURON_BATCH_SIZE", "SM_VLLM_ENABLE_CHUNKED_PREFILL"),
        ),
    ],
)
def test_1_disagreeing_launch_key_refused(env: dict[str, str], names: tuple[str, ...]) -> None:
    msg = llama_refused(env)
    assert all(n in msg for n in names)


@pytest.mark.parametrize(
    "env",
    [
        {"SM_NEURON_TP_DEGREE": "2", "SM_NEURON_BATCH_SIZE": "4", "SM_NEURON_SEQ_LEN": "2048"},
        {"SM_NEURON_TORCH_DTYPE": "bfloat16"},
        {**CHUNKED, "SM_NEURON_BATCH_SIZE": "1"},
    ],
)
def test_1_agreeing_launch_key_passes(env: dict[str, str]) -> None:
    llama_plan(env)


# 2. Block layout without prefix caching or chunked prefill: NxD Inference has no cache shape for it.
def test_2_block_layout_without_prefix_or_chunked_prefill_is_refused() -> None:
    assert "sets is_block_kv_layout without prefix caching or chunked prefill" in llama_refused(
        {"SM_NEURON_IS_BLOCK_KV_LAYOUT": "true"}
    )
    p = llama_plan({**PREFIX, "SM_NEURON_IS_BLOCK_KV_LAYOUT": "true"})
    assert p.neuron_override == {"is_block_kv_layout": True, "is_prefix_caching": True}


def test_2_prefix_and_chunked_keep_their_block_size() -> None:
    assert flag(llama_plan(PREFIX), "--block-size") == "32"
    assert flag(llama_plan(CHUNKED), "--block-size") == "32"
    # vLLM's older in-tree Neuron support has no custom scheduler: the block size given is used.
    in_tree = {"NEURONSERVE_INTEGRATION": "in-tree", "SM_NEURON_IS_BLOCK_KV_LAYOUT": "true"}
    vllm_10 = llama_facts(versions={"vllm": "0.10.2"})  # in-tree needs vLLM's Neuron device
    assert flag(llama_plan({**in_tree, "SM_VLLM_BLOCK_SIZE": "32"}, vllm_10), "--block-size") == "32"
    llama_plan({"NEURONSERVE_INTEGRATION": "in-tree", "DISABLE_NEURON_CUSTOM_SCHEDULER": "1"}, vllm_10)


# 3. pa_num_blocks equals --num-gpu-blocks-override exactly; ignored (not refused) when contiguous.
def test_3_pa_num_blocks_exact() -> None:
    ok = {**PREFIX, "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "300", "SM_NEURON_PA_NUM_BLOCKS": "300"}
    assert flag(llama_plan(ok), "--num-gpu-blocks-override") == "300"
    assert "SM_NEURON_PA_NUM_BLOCKS" in llama_refused({**ok, "SM_NEURON_PA_NUM_BLOCKS": "301"})


def test_3_pa_num_blocks_in_contiguous_mode_is_ignored() -> None:
    p = llama_plan({"SM_NEURON_PA_NUM_BLOCKS": "300"})
    assert "--num-gpu-blocks-override" not in p.argv
    assert any("SM_NEURON_PA_NUM_BLOCKS ignored" in w for w in p.warnings)


# 4. Buckets: context buckets within max_context_length; prefix buckets with prefix caching; floors warn.
@pytest.mark.parametrize(
    ("env", "needle"),
    [
        (
            {"SM_NEURON_MAX_CONTEXT_LENGTH": "1024", "SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[512, 2048]"},
            "1024",
        ),
        (
            {
                **CHUNKED,
                "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "512",
                "SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[1024, 2048]",
            },
            "max_context_length",
        ),
        ({**PREFIX, "SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[512, 1024]"}, "SM_NEURON_PREFIX_BUCKETS"),
    ],
)
def test_4_buckets_refused(env: dict[str, str], needle: str) -> None:
    assert needle in llama_refused(env)


def test_4_buckets_accepted_neighbours() -> None:
    llama_plan({"SM_NEURON_MAX_CONTEXT_LENGTH": "1024", "SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[512, 1024]"})
    llama_plan(
        {
            **CHUNKED,
            "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "512",
            "SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[256, 512]",
        }
    )
    llama_plan(
        {**PREFIX, "SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[512, 1024]", "SM_NEURON_PREFIX_BUCKETS": "[512]"}
    )
    small = llama_plan({**PREFIX, "SM_NEURON_TOKEN_GENERATION_BUCKETS": "[128]"})
    assert any("not a check" in w for w in small.warnings)


# 5. Chunked prefill: native scheduler needs a block size; config keys checked; batched tokens compiled.
def test_5_native_scheduler_without_chunked_prefill_refused() -> None:
    """DISABLE_NEURON_CUSTOM_SCHEDULER=1 is chunked prefill under vLLM 0.11.0 (engine/arg_utils.py:1546-1548
    turns it on for every generate model): without SM_VLLM_ENABLE_CHUNKED_PREFILL=true and its config
    the loader asserts (loader :844-846). This test used to plan prefix caching with the native
    scheduler and assert its block size: that plan failed at load (lane 2.28 renders
    --no-enable-chunked-prefill instead, test_kv_lanes.py)."""
    assert "SM_VLLM_ENABLE_CHUNKED_PREFILL=true" in llama_refused({"DISABLE_NEURON_CUSTOM_SCHEDULER": "1"})
    msg = llama_refused({**PREFIX, "DISABLE_NEURON_CUSTOM_SCHEDULER": "1"})
    assert "vLLM 0.11.0 turns chunked prefill on" in msg
    p = llama_plan({**PREFIX, **CHUNKED, "DISABLE_NEURON_CUSTOM_SCHEDULER": "1"})
    assert flag(p, "--block-size") == "32"


def test_5_chunked_config_keys() -> None:
    bad = {**CHUNKED, "SM_NEURON_CHUNKED_PREFILL_CONFIG": '{"max_num_seq": 4}'}
    assert "max_num_seq" in llama_refused(bad)
    filled = override({**CHUNKED, "SM_NEURON_CHUNKED_PREFILL_CONFIG": '{"kernel_q_tile_size": 128}'})
    assert filled["chunked_prefill_config"] == {"kernel_q_tile_size": 128, "max_num_seqs": 4}


def test_5_max_num_batched_tokens_is_explicit_with_chunked_prefill() -> None:
    assert flag(llama_plan(CHUNKED), "--max-num-batched-tokens") == "2048"
    assert (
        flag(llama_plan({**CHUNKED, "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "512"}), "--max-num-batched-tokens")
        == "512"
    )
    assert "SM_VLLM_MAX_NUM_BATCHED_TOKENS" in llama_refused(
        {**CHUNKED, "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "4096"}
    )
    p = llama_plan({"SM_VLLM_MAX_NUM_BATCHED_TOKENS": "512"})
    assert "--max-num-batched-tokens" not in p.argv and any("131072" in w for w in p.warnings)


# 6. Architectures come from architectures[0], as the plugin maps them.
@pytest.mark.parametrize(
    ("arch", "needle"),
    [("LlamaForSequenceClassification", "sequence-classification"), ("GptOssForCausalLM", "'gptoss'")],
)
def test_6_architecture_refused(arch: str, needle: str) -> None:
    msg = llama_refused({}, llama_facts(2, {**LLAMA, "architectures": [arch]}))
    assert needle in msg and "LlamaForCausalLM" in msg


@pytest.mark.parametrize(
    "arch", ["LlamaForCausalLM", "Llama4ForConditionalGeneration", "Qwen3MoeForCausalLM"]
)
def test_6_architecture_accepted(arch: str) -> None:
    """(Mllama loads but every request fails on the plugin: refused, test_combinations.py.)"""
    llama_plan({}, llama_facts(2, {**LLAMA, "architectures": [arch]}))


# 7. Sequence parallel: every context bucket, automatic ones included, divisible by TP.
def test_7_sequence_parallel_checks_automatic_buckets() -> None:
    env = {"SM_NEURON_SEQUENCE_PARALLEL_ENABLED": "true", "SM_VLLM_TENSOR_PARALLEL_SIZE": "24"}
    msg = llama_refused({**env, "SM_VLLM_MAX_MODEL_LEN": "2064"}, llama_facts(24))
    assert "128" in msg and "SM_NEURON_CONTEXT_ENCODING_BUCKETS" in msg
    llama_plan(
        {**env, "SM_VLLM_MAX_MODEL_LEN": "2064", "SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[1032, 2064]"},
        llama_facts(24),
    )


# 8. Sampling: global_topk range, partial configs completed, the env switch at 0 harmless.
def test_8_partial_sampling_config_keeps_dynamic() -> None:
    cfg = override({"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"global_topk": 64}'})[
        "on_device_sampling_config"
    ]
    assert cfg == {"global_topk": 64, "dynamic": True, "deterministic": False}
    full = '{"global_topk": 64, "dynamic": true, "deterministic": false}'
    assert override({"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": full})["on_device_sampling_config"] == json.loads(
        full
    )


def test_8_sampling_refusals_and_neighbours() -> None:
    assert "global_topk=0" in llama_refused({"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"global_topk": 0}'})
    assert "topk" in llama_refused({"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"topk": 5}'})
    llama_plan({"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"global_topk": 256}'})
    llama_plan({"NEURON_ON_DEVICE_SAMPLING_DISABLED": "0"})
    assert "NEURON_ON_DEVICE_SAMPLING_DISABLED" in llama_refused({"NEURON_ON_DEVICE_SAMPLING_DISABLED": "1"})


# 9. LoRA: 0.2.2+lts with the adapters named (SM_VLLM_LORA_MODULES, or a user's own adapters JSON)
# passes; 0.2.0 and LoRA with no adapters are refused (tests/unit/plan/test_lora.py has the rest).
def test_9_lora() -> None:
    lora = {"SM_VLLM_ENABLE_LORA": "true", "SM_NEURON_LORA_CKPT_JSON": "/m/lora.json"}
    assert override(lora)["lora_ckpt_json"] == "/m/lora.json"
    named = {"SM_VLLM_ENABLE_LORA": "true", "SM_VLLM_LORA_MODULES": "a=s3://b/a/"}
    assert override(named)["lora_ckpt_json"] == "/tmp/neuronserve/assets/lora-ckpt.json"
    assert "SM_VLLM_LORA_MODULES" in llama_refused({"SM_VLLM_ENABLE_LORA": "true"})
    base = llama_facts()
    old = dataclasses.replace(base, versions={**base.versions, "vllm-neuron": "0.2.0"})
    assert "0.2.0" in llama_refused(lora, old)
    assert "SM_VLLM_ENABLE_LORA=true" in llama_refused({"SM_NEURON_LORA_CKPT_JSON": "/m/lora.json"})


# 11. Hub revision: the plugin compiles the default branch of a hub id it downloads itself
# (loader.py:391-393), so on Neuron the plan stages the hub model at its revision and passes the directory.
def test_11_hub_revision() -> None:
    env = {"SM_VLLM_MODEL": "org/model", "SM_VLLM_REVISION": "abc123"}
    p = llama_plan(env)
    assert flag(p, "--model") == "/tmp/neuronserve/model" and "--revision" not in p.argv
    assert (p.assets[0].source, p.assets[0].fetch, p.assets[0].revision) == ("org/model", "hub", "abc123")
    llama_plan({"SM_VLLM_MODEL": "org/model"})
    p = llama_plan({"SM_VLLM_REVISION": "abc123"})  # a local dir: the revision is ignored with a warning
    assert any("SM_VLLM_REVISION ignored" in w for w in p.warnings)
