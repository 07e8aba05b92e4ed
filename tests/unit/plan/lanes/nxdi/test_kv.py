"""kv_layout (plan/lanes/nxdi/kv.py) case by case: the flags, the compiled KV numbers (worked out by hand from
the rules in kv.py's docstring: pa_num_blocks = N + 1, kv_tokens = (N + 1) x block), and every refusal and
warning word for word (added where mutation testing showed them unchecked: docs/TESTING.md). The edge
cases mutation testing found later: test_kv_edges.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import resolution

from neuronserve.config.settings import parse_settings
from neuronserve.errors import ConfigError
from neuronserve.plan.lanes.nxdi.kv import kv_layout
from neuronserve.plan.lanes.nxdi.profiles import V0_4

ORIGINS = {
    "block-size": "SM_VLLM_BLOCK_SIZE",
    "num-gpu-blocks-override": "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE",
    "enable-prefix-caching": "SM_VLLM_ENABLE_PREFIX_CACHING",
    "max-model-len": "SM_VLLM_MAX_MODEL_LEN",
    "max-num-seqs": "SM_VLLM_MAX_NUM_SEQS",
}
L, S = 2048, 4


def layout(
    env: dict[str, str], override: dict[str, Any] | None = None, **kw: Any
) -> tuple[list[str], dict[str, Any], list[str], dict[str, Any]]:
    warnings: list[str] = []
    ov = dict(override or {})
    flags, kv = kv_layout(
        parse_settings({"SM_VLLM_MODEL": "m", **env}),
        length=L,
        seqs=S,
        res=resolution(ORIGINS, warnings=warnings, override=ov),
        **kw,
    )
    return flags, kv, warnings, ov


def layout_refusal(env: dict[str, str], override: dict[str, Any] | None = None, **kw: Any) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        layout(env, override, **kw)
    return err.value


def test_contiguous() -> None:
    flags, kv, warnings, ov = layout({})
    assert (flags, kv, warnings, ov) == (
        ["--no-enable-prefix-caching"],
        {"mode": "contiguous", "kv_tokens": 8192},
        [],
        {},
    )


def test_contiguous_names_each_setting_it_ignores() -> None:
    env = {"SM_VLLM_BLOCK_SIZE": "32", "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "100"}
    _, kv, warnings, _ = layout(env, {"pa_num_blocks": 9, "pa_block_size": 16})
    assert kv == {"mode": "contiguous", "kv_tokens": 8192}
    tail = (
        " ignored: the contiguous KV cache (no prefix caching) uses one block of max_model_len per sequence"
    )
    block_only = (
        " is only read with the block KV layout (prefix caching, chunked prefill or is_block_kv_layout)"
    )
    assert warnings == [
        "SM_VLLM_BLOCK_SIZE" + tail,
        "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE" + tail,
        "SM_NEURON_PA_NUM_BLOCKS ignored: pa_num_blocks" + block_only,
        "SM_NEURON_PA_BLOCK_SIZE ignored: pa_block_size" + block_only,
    ]


def test_the_native_scheduler_without_a_block_layout_is_refused() -> None:
    """On a vLLM that can turn chunked prefill off (lane 2.28's 0.13.0); on 0.11.0 the native scheduler
    always chunks and is refused for that first (test_kv_lanes.py)."""
    err = layout_refusal({"DISABLE_NEURON_CUSTOM_SCHEDULER": " 1 "}, profile=V0_4)
    assert str(err) == (
        "DISABLE_NEURON_CUSTOM_SCHEDULER=1 without chunked prefill or a block KV layout: vLLM's native "
        "scheduler needs a block size (vllm-neuron platform.py asserts one) and the contiguous cache "
        "has none: unset DISABLE_NEURON_CUSTOM_SCHEDULER, or set SM_VLLM_ENABLE_CHUNKED_PREFILL=true "
        "(or SM_VLLM_ENABLE_PREFIX_CACHING=true)"
    )
    assert err.variables == ("DISABLE_NEURON_CUSTOM_SCHEDULER", "SM_VLLM_ENABLE_CHUNKED_PREFILL")
    assert layout({"DISABLE_NEURON_CUSTOM_SCHEDULER": "0"})[1]["mode"] == "contiguous"
    assert "chunked prefill on for every generate model" in str(
        layout_refusal({"DISABLE_NEURON_CUSTOM_SCHEDULER": "1"})
    )


def test_prefix_caching_with_its_blocks() -> None:
    env = {
        "SM_VLLM_ENABLE_PREFIX_CACHING": "true",
        "SM_VLLM_BLOCK_SIZE": "32",
        "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "300",
    }
    flags, kv, warnings, ov = layout(env)
    assert flags == ["--enable-prefix-caching", "--block-size", "32", "--num-gpu-blocks-override", "300"]
    assert kv == {
        "mode": "prefix",
        "block_size": 32,
        "num_blocks": 300,
        "pa_num_blocks": 301,
        "kv_tokens": 9632,
    }
    assert warnings == []
    assert ov == {"is_block_kv_layout": True, "is_prefix_caching": True}


def test_prefix_caching_defaults_are_named() -> None:
    flags, kv, warnings, _ = layout({"SM_VLLM_ENABLE_PREFIX_CACHING": "true"})
    assert flags == ["--enable-prefix-caching", "--block-size", "32", "--num-gpu-blocks-override", "256"]
    assert kv["pa_num_blocks"] == 257 and kv["kv_tokens"] == 257 * 32
    assert warnings == [
        "block_size defaulted to 32 for the block KV layout",
        "num_gpu_blocks_override computed as ceil(2048/32)*4 = 256",
    ]


@pytest.mark.parametrize("env", [{}, {"SM_VLLM_BLOCK_SIZE": "32", "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "100"}])
def test_a_block_layout_alone_is_refused(env: dict[str, str]) -> None:
    """is_block_kv_layout without prefix caching or chunked prefill: NxD Inference's BlockKVCacheManager
    has no cache shape for it (modules/kvcache/block_kv_cache_manager.py:40-47). It used to be planned
    as max_model_len blocks (the custom scheduler's, platform.py:275-279)."""
    err = layout_refusal(env, {"is_block_kv_layout": True})
    assert str(err) == (
        "SM_NEURON_IS_BLOCK_KV_LAYOUT sets is_block_kv_layout without prefix caching or chunked prefill: NxD "
        "Inference shapes the block KV cache only for those two and fails to build the model otherwise: set "
        "SM_VLLM_ENABLE_PREFIX_CACHING=true (or chunked prefill), or remove is_block_kv_layout"
    )
    assert err.variables == ("SM_NEURON_IS_BLOCK_KV_LAYOUT", "SM_VLLM_ENABLE_PREFIX_CACHING")


def test_in_tree_neuron_keeps_the_block_size_given() -> None:
    env = {"SM_VLLM_BLOCK_SIZE": "32", "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "256"}
    flags, kv, warnings, _ = layout(env, {"is_block_kv_layout": True}, plugin=False)
    assert flags == ["--no-enable-prefix-caching", "--block-size", "32", "--num-gpu-blocks-override", "256"]
    assert kv == {
        "mode": "block",
        "block_size": 32,
        "num_blocks": 256,
        "pa_num_blocks": 257,
        "kv_tokens": 257 * 32,
    }
    assert warnings == []


def test_is_prefix_caching_without_prefix_caching_is_refused() -> None:
    err = layout_refusal({}, {"is_prefix_caching": True})
    assert str(err) == (
        "SM_NEURON_IS_PREFIX_CACHING sets is_prefix_caching but prefix caching is off: set "
        "SM_VLLM_ENABLE_PREFIX_CACHING=true, or remove is_prefix_caching"
    )
    assert err.variables == ("SM_NEURON_IS_PREFIX_CACHING",)


@pytest.mark.parametrize("key", ["is_prefix_caching", "is_block_kv_layout"])
def test_prefix_caching_refuses_its_keys_set_false(key: str) -> None:
    err = layout_refusal({"SM_VLLM_ENABLE_PREFIX_CACHING": "true"}, {key: False})
    var = "SM_NEURON_" + key.upper()
    assert str(err) == f"{var} sets {key}=false but prefix caching needs it true: remove it"
    assert err.variables == (var,)
