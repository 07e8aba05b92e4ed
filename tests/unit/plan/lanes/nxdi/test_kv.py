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
    err = layout_refusal({"DISABLE_NEURON_CUSTOM_SCHEDULER": " 1 "})
    assert str(err) == (
        "DISABLE_NEURON_CUSTOM_SCHEDULER=1 without chunked prefill or a block KV layout: vLLM's native "
        "scheduler needs a block size (vllm-neuron 0.2.2+lts platform.py:241-247) and the contiguous cache "
        "has none: unset DISABLE_NEURON_CUSTOM_SCHEDULER, or set SM_VLLM_ENABLE_CHUNKED_PREFILL=true "
        "(or SM_VLLM_ENABLE_PREFIX_CACHING=true)"
    )
    assert err.variables == ("DISABLE_NEURON_CUSTOM_SCHEDULER", "SM_VLLM_ENABLE_CHUNKED_PREFILL")
    assert layout({"DISABLE_NEURON_CUSTOM_SCHEDULER": "0"})[1]["mode"] == "contiguous"


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


def test_block_layout_under_the_custom_scheduler_uses_max_model_len_blocks() -> None:
    flags, kv, warnings, ov = layout({}, {"is_block_kv_layout": True})
    assert flags == ["--no-enable-prefix-caching", "--num-gpu-blocks-override", "4"]
    assert kv == {
        "mode": "block",
        "block_size": 2048,
        "num_blocks": 4,
        "pa_num_blocks": 5,
        "kv_tokens": 10240,
    }
    assert warnings == [] and ov == {"is_block_kv_layout": True}


@pytest.mark.parametrize("blocks", [None, "4"])
def test_a_block_size_the_custom_scheduler_replaces_is_named(blocks: str | None) -> None:
    env = {"SM_VLLM_BLOCK_SIZE": "32"} | ({"SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": blocks} if blocks else {})
    _, kv, warnings, _ = layout(env, {"is_block_kv_layout": True})
    assert kv["block_size"] == 2048 and kv["num_blocks"] == 4
    assert warnings == [
        "SM_VLLM_BLOCK_SIZE=32 replaced by max_model_len 2048: without prefix caching the plugin's custom "
        "scheduler uses one block of max_model_len per sequence"
    ]


def test_a_block_size_equal_to_the_length_is_no_change() -> None:
    env = {"SM_VLLM_BLOCK_SIZE": "2048", "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "6"}
    _, kv, warnings, _ = layout(env, {"is_block_kv_layout": True})
    assert kv["num_blocks"] == 6
    assert warnings == [
        "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE=6: 7 KV blocks of 2048 tokens are allocated for max_num_seqs 4"
    ]


def test_blocks_sized_for_small_blocks_are_refused_under_the_custom_scheduler() -> None:
    err = layout_refusal(
        {"SM_VLLM_BLOCK_SIZE": "32", "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "100"}, {"is_block_kv_layout": True}
    )
    assert str(err) == (
        "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE=100 looks sized for SM_VLLM_BLOCK_SIZE=32, but without prefix "
        "caching the plugin's custom scheduler makes every block max_model_len = 2048 tokens "
        "(vllm-neuron 0.2.2+lts platform.py:275-279): NxD Inference would allocate 101 blocks of 2048 tokens "
        "(64x the planned KV memory): set SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE=4 (one block per sequence), or "
        "SM_VLLM_ENABLE_PREFIX_CACHING=true to keep blocks of 32"
    )
    assert err.variables == ("SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE", "SM_VLLM_BLOCK_SIZE")


def test_too_few_max_len_blocks_are_refused() -> None:
    err = layout_refusal({"SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "2"}, {"is_block_kv_layout": True})
    assert str(err) == (
        "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE=2 blocks of max_model_len 2048 cannot hold max_num_seqs 4 sequences "
        "(vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_loader.py:848-862): "
        "set SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE=4 or more"
    )
    assert err.variables == ("SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE",)


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
