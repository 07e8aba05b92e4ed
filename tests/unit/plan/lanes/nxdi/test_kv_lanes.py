"""The KV layout's rules that each lane reads from its own vLLM and plugin (plan/lanes/nxdi/kv.py with the
lane's PluginRules): the native scheduler without chunked prefill, a block layout with neither prefix
caching nor chunked prefill, and the block sizes. Each rule both ways, on both NxD Inference lanes."""

from __future__ import annotations

import pytest
from tests.support.builders import flag, llama_facts, llama_plan, llama_refusal

from neuronserve.types import LaunchPlan

LANE_2_28 = {"vllm": "0.13.0", "vllm-neuron": "0.4.1"}
PREFIX = {"SM_VLLM_ENABLE_PREFIX_CACHING": "true", "SM_VLLM_BLOCK_SIZE": "32"}
NATIVE = {"DISABLE_NEURON_CUSTOM_SCHEDULER": "1"}
CHUNKED = {
    "SM_VLLM_ENABLE_CHUNKED_PREFILL": "true",
    "SM_NEURON_CHUNKED_PREFILL_CONFIG": '{"max_num_seqs": 4}',
}


def on_2_28(env: dict[str, str]) -> LaunchPlan:
    return llama_plan(env, llama_facts(versions=LANE_2_28))


@pytest.mark.parametrize("env", [NATIVE, {**NATIVE, **PREFIX}])
def test_the_native_scheduler_without_chunked_prefill_is_refused_on_vllm_0_11(env: dict[str, str]) -> None:
    """vLLM 0.11.0 turns chunked prefill on for every generate model (engine/arg_utils.py:1546-1548,
    over --no-enable-chunked-prefill too), the native scheduler keeps it on (vllm-neuron 0.2.2+lts
    platform.py:241-247), and the loader then asserts a chunked_prefill_config (loader :844-846).
    Before, prefix caching with DISABLE_NEURON_CUSTOM_SCHEDULER=1 planned and failed at load."""
    err = llama_refusal(env)
    assert str(err).startswith(
        "DISABLE_NEURON_CUSTOM_SCHEDULER=1 runs vLLM's native scheduler, and vLLM 0.11.0 turns chunked "
        "prefill on for every generate model"
    )
    assert "set SM_VLLM_ENABLE_CHUNKED_PREFILL=true with SM_NEURON_CHUNKED_PREFILL_CONFIG" in str(err)
    assert err.variables == ("DISABLE_NEURON_CUSTOM_SCHEDULER", "SM_VLLM_ENABLE_CHUNKED_PREFILL")
    p = llama_plan({**NATIVE, **PREFIX, **CHUNKED})  # the neighbour: chunked prefill said
    assert "--enable-chunked-prefill" in p.argv and "--no-enable-chunked-prefill" not in p.argv


def test_the_native_scheduler_with_prefix_caching_turns_chunked_prefill_off_on_vllm_0_13() -> None:
    """vLLM 0.13.0 honours --no-enable-chunked-prefill (engine/arg_utils.py:1857-1870 only warns), and
    vllm-neuron 0.4.1 leaves it off under the native scheduler (platform.py:264-270) and asserts a
    chunked_prefill_config only when it is on (loader :1180-1182): rendered, it builds."""
    p = on_2_28({**NATIVE, **PREFIX})
    assert "--no-enable-chunked-prefill" in p.argv and flag(p, "--block-size") == "32"
    assert p.env.get("DISABLE_NEURON_CUSTOM_SCHEDULER") is None  # the user's variable is inherited as is
    q = on_2_28(PREFIX)  # the custom scheduler turns it off itself: nothing rendered
    assert "--no-enable-chunked-prefill" not in q.argv
    # Chunked prefill itself cannot build on 2.28 (NxD Inference 2.28 models/model_base.py:3096-3097).
    err = llama_refusal({**NATIVE, **PREFIX, **CHUNKED}, llama_facts(versions=LANE_2_28))
    assert "chunked prefill does not build on vllm-neuron 0.4.1" in str(err)


def test_the_native_scheduler_without_a_block_layout_is_still_refused_on_vllm_0_13() -> None:
    err = llama_refusal(NATIVE, llama_facts(versions=LANE_2_28))
    assert str(err).startswith("DISABLE_NEURON_CUSTOM_SCHEDULER=1 without chunked prefill or a block KV ")


@pytest.mark.parametrize("versions", [None, LANE_2_28], ids=["2.27", "2.28"])
@pytest.mark.parametrize(
    "env",
    [
        {"SM_NEURON_IS_BLOCK_KV_LAYOUT": "true"},
        {"SM_NEURON_IS_BLOCK_KV_LAYOUT": "true", "SM_VLLM_BLOCK_SIZE": "32"},
        {"SM_NEURON_OVERRIDE_CONFIG": '{"is_block_kv_layout": true}', "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "9"},
    ],
)
def test_a_block_layout_without_prefix_caching_or_chunked_prefill_is_refused(
    env: dict[str, str], versions: dict[str, str] | None
) -> None:
    """NxD Inference's BlockKVCacheManager._init_kv_shape shapes the cache only for prefix caching or
    chunked prefill (modules/kvcache/block_kv_cache_manager.py:40-47, both lanes): with neither the
    build fails with AttributeError ('BlockKVCacheManager' object has no attribute 'k_shape', seen
    by building it with only the hardware packages stubbed). Before, the plan planned blocks of
    max_model_len and estimated their memory ("9 blocks of 4096 tokens")."""
    err = llama_refusal(env, llama_facts(versions=versions) if versions else None)
    var = next(iter(env))
    assert str(err).startswith(
        f"{var} sets is_block_kv_layout without prefix caching or chunked prefill: NxD Inference shapes the "
        "block KV cache only for those two"
    )
    assert err.variables == (var, "SM_VLLM_ENABLE_PREFIX_CACHING")
    with_prefix = {**env, **PREFIX, "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "256"}
    assert flag(llama_plan(with_prefix, llama_facts(versions=versions) if versions else None), "--block-size")


def test_block_size_256_is_a_block_size_on_vllm_0_13_only() -> None:
    """vLLM 0.13.0's BlockSize adds 256 (config/cache.py:22) to 0.11.0's (config/cache.py:24), and
    vllm-neuron 0.4.1 passes it to NxD Inference as pa_block_size; lane 2.28 used 0.11.0's list."""
    env = {**PREFIX, "SM_VLLM_BLOCK_SIZE": "256"}
    assert flag(on_2_28(env), "--block-size") == "256"
    err = llama_refusal(env)
    assert str(err) == (
        "SM_VLLM_BLOCK_SIZE=256 is not a block size of vLLM 0.11.0: use one of 1, 8, 16, 32, 64, 128 "
        "(e.g. 32)"
    )
    assert "use one of 1, 8, 16, 32, 64, 128, 256" in str(
        llama_refusal({**PREFIX, "SM_VLLM_BLOCK_SIZE": "512"}, llama_facts(versions=LANE_2_28))
    )
