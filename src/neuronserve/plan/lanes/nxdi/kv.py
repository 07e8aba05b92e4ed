"""The KV-cache layout, planned the way vllm-neuron 0.2.2+lts (and 0.4.1) will really run it.

Layouts that reach NxD Inference (vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_loader.py:778-785,
platform.py:214-282):
- contiguous: no prefix caching, no chunked prefill, no is_block_kv_layout: one max_model_len slot per
  sequence; --block-size/--num-gpu-blocks-override mean nothing to it.
- prefix: --enable-prefix-caching with --block-size B and --num-gpu-blocks-override N.
- chunked prefill: vLLM's native scheduler (DISABLE_NEURON_CUSTOM_SCHEDULER=1), which keeps --block-size
  (and asserts one is set, platform.py:241-247).
A block layout with neither (is_block_kv_layout alone) does not build: NxD Inference's
BlockKVCacheManager shapes its cache only for prefix caching or chunked prefill
(modules/kvcache/block_kv_cache_manager.py:40-47), so it is refused.
Whatever the flag says, the plugin adds one null block (platform.py:220-230) and NxD Inference
allocates pa_num_blocks = N + 1 blocks of pa_block_size tokens
(worker/neuronx_distributed_model_loader.py:744-748, 809-818). The plan records those compiled numbers
in kv (block_size, num_blocks = the flag, pa_num_blocks = what is allocated, kv_tokens = the KV cache's
token capacity) for the cache key and the memory estimate. What differs by lane (the vLLM's block
sizes, whether its native scheduler can run without chunked prefill) is read from the lane's
PluginRules (profiles.py).
"""

from __future__ import annotations

import math
from typing import Any

from neuronserve.config.settings import Settings
from neuronserve.errors import ConfigError
from neuronserve.plan.lanes.nxdi import rules
from neuronserve.plan.lanes.nxdi.profiles import V0_2, PluginRules
from neuronserve.plan.resolution import Resolution, count

DEFAULT_BLOCK_SIZE = 32


def native_scheduler(settings: Settings) -> bool:
    """platform.py:214-215: DISABLE_NEURON_CUSTOM_SCHEDULER (the plan sets it for chunked prefill)."""
    chunked = settings.get("enable-chunked-prefill") is True
    return chunked or settings.passthrough_env.get("DISABLE_NEURON_CUSTOM_SCHEDULER", "").strip() == "1"


def kv_layout(
    settings: Settings,
    *,
    length: int,
    seqs: int,
    res: Resolution,
    plugin: bool = True,
    profile: PluginRules = V0_2,
) -> tuple[list[str], dict[str, Any]]:
    """Flags and the compiled KV numbers; refuses what the plugin would refuse.

    `plugin` False (vLLM's older in-tree Neuron support) has neither the custom scheduler nor
    DISABLE_NEURON_CUSTOM_SCHEDULER: the block size given is the one used there. `profile`: the lane's
    (its vLLM's block sizes and chunked-prefill default, `_check_native`).
    """
    override = res.override
    prefix = settings.get("enable-prefix-caching") is True
    chunked = settings.get("enable-chunked-prefill") is True
    origins = res.origins
    _check_prefix_keys(override, prefix, origins)
    block_layout = prefix or chunked or override.get("is_block_kv_layout") is True
    block = count(settings, "block-size", least=1)  # 0 divided max_model_len below
    blocks = count(settings, "num-gpu-blocks-override")
    native = native_scheduler(settings) and plugin
    if native and not chunked:
        _check_native(profile, res)
    if not block_layout:
        return _contiguous(override, length, seqs, (block, blocks), native=native, res=res)
    if plugin and not prefix and not chunked:
        _refuse_block_layout_alone(res)
    if block is None:
        block = DEFAULT_BLOCK_SIZE
        res.warn(f"block_size defaulted to {block} for the block KV layout")
    if blocks is None:
        blocks = math.ceil(length / block) * seqs
        if "pa_num_blocks" not in override:
            res.warn(f"num_gpu_blocks_override computed as ceil({length}/{block})*{seqs} = {blocks}")
    rules.check_block_layout(length, seqs, block, blocks, res, sizes=(profile.block_sizes, profile.vllm))
    rules.check_pa_keys(block, blocks, res)
    override["is_block_kv_layout"] = True
    if prefix:
        override["is_prefix_caching"] = True
    flags = ["--enable-prefix-caching" if prefix else "--no-enable-prefix-caching"]
    flags += ["--block-size", str(block), "--num-gpu-blocks-override", str(blocks)]
    if native and not chunked:  # a lane whose vLLM can turn it off (_check_native refused the others)
        flags += ["--no-enable-chunked-prefill"]
    kv = {
        "mode": "prefix" if prefix else "block",
        "block_size": block,
        "num_blocks": blocks,
        "pa_num_blocks": blocks + 1,
        "kv_tokens": (blocks + 1) * block,
    }
    return flags, kv


def _check_native(profile: PluginRules, res: Resolution) -> None:
    """DISABLE_NEURON_CUSTOM_SCHEDULER=1 without chunked prefill, on a vLLM that cannot turn it off.

    vLLM 0.11.0 sets enable_chunked_prefill True for every generate model after reading the flags
    (engine/arg_utils.py:1546-1548: --no-enable-chunked-prefill is overwritten), vllm-neuron 0.2.2+lts
    leaves it on under the native scheduler (platform.py:241-247), and its loader then asserts a
    chunked_prefill_config (worker/neuronx_distributed_model_loader.py:844-846): the engine fails at
    load. So on such a lane the native scheduler means chunked prefill, said and refused. vLLM 0.13.0
    honours the flag (engine/arg_utils.py:1857-1870 only warns), so lane 2.28 renders
    --no-enable-chunked-prefill instead (kv_layout)."""
    if not profile.chunked_prefill_forced:
        return
    c_var = res.origins.get("enable-chunked-prefill", "SM_VLLM_ENABLE_CHUNKED_PREFILL")
    raise ConfigError(
        f"DISABLE_NEURON_CUSTOM_SCHEDULER=1 runs vLLM's native scheduler, and {profile.vllm} turns chunked "
        "prefill on for every generate model (--no-enable-chunked-prefill is overwritten), which "
        f"{profile.plugin} then asserts a chunked_prefill_config for at load: set {c_var}=true with "
        "SM_NEURON_CHUNKED_PREFILL_CONFIG (e.g. '{\"max_num_seqs\": 4}'), or unset "
        "DISABLE_NEURON_CUSTOM_SCHEDULER (the custom scheduler)",
        ("DISABLE_NEURON_CUSTOM_SCHEDULER", c_var),
    )


def _refuse_block_layout_alone(res: Resolution) -> None:
    """is_block_kv_layout with neither prefix caching nor chunked prefill: NxD Inference's
    BlockKVCacheManager._init_kv_shape sets the cache's shape only for those two
    (modules/kvcache/block_kv_cache_manager.py:40-47, 0.7.14366 and 2.28.0), so building the model
    fails with an AttributeError (no k_shape) after the download; before, the plan planned blocks of
    max_model_len (the custom scheduler's, platform.py:275-279) and estimated their memory."""
    var = res.origin("is_block_kv_layout")
    raise ConfigError(
        f"{var} sets is_block_kv_layout without prefix caching or chunked prefill: NxD Inference shapes the "
        "block KV cache only for those two and fails to build the model otherwise: set "
        "SM_VLLM_ENABLE_PREFIX_CACHING=true (or chunked prefill), or remove is_block_kv_layout",
        (var, "SM_VLLM_ENABLE_PREFIX_CACHING"),
    )


def _check_prefix_keys(override: dict[str, Any], prefix: bool, origins: dict[str, str]) -> None:
    """worker/neuronx_distributed_model_loader.py:840-842 asserts both keys true with prefix caching;
    is_prefix_caching alone is refused."""
    if override.get("is_prefix_caching") is True and not prefix:
        var = origins.get("is_prefix_caching", "SM_NEURON_IS_PREFIX_CACHING")
        raise ConfigError(
            f"{var} sets is_prefix_caching but prefix caching is off: set "
            f"SM_VLLM_ENABLE_PREFIX_CACHING=true, or remove is_prefix_caching",
            (var,),
        )
    for key in ("is_prefix_caching", "is_block_kv_layout"):
        if prefix and override.get(key) is False:
            var = origins.get(key, "SM_NEURON_" + key.upper())
            raise ConfigError(f"{var} sets {key}=false but prefix caching needs it true: remove it", (var,))


def _contiguous(
    override: dict[str, Any],
    length: int,
    seqs: int,
    given: tuple[int | None, int | None],
    *,
    native: bool,
    res: Resolution,
) -> tuple[list[str], dict[str, Any]]:
    """Contiguous cache. With the native scheduler the plugin asserts a block size (platform.py:241-247;
    0.4.1 :264-270) that a contiguous cache cannot have (max_model_len is not a --block-size choice):
    refused (a lane whose vLLM forces chunked prefill refused it before, `_check_native`). The
    block-count keys are not read without the block layout
    (worker/neuronx_distributed_model_loader.py:707-709): warned, not refused."""
    if native:
        raise ConfigError(
            "DISABLE_NEURON_CUSTOM_SCHEDULER=1 without chunked prefill or a block KV layout: vLLM's native "
            "scheduler needs a block size (vllm-neuron platform.py asserts one) and the contiguous "
            "cache has none: unset DISABLE_NEURON_CUSTOM_SCHEDULER, or set "
            "SM_VLLM_ENABLE_CHUNKED_PREFILL=true (or SM_VLLM_ENABLE_PREFIX_CACHING=true)",
            ("DISABLE_NEURON_CUSTOM_SCHEDULER", "SM_VLLM_ENABLE_CHUNKED_PREFILL"),
        )
    for key, value in zip(("block-size", "num-gpu-blocks-override"), given, strict=True):
        if value is not None:
            res.warn(
                f"{res.origins[key]} ignored: the contiguous KV cache (no prefix caching) uses one "
                f"block of max_model_len per sequence"
            )
    for key in ("pa_num_blocks", "pa_block_size"):
        if key in override:
            res.warn(
                f"{res.origin(key)} ignored: {key} is only read with the block "
                "KV layout (prefix caching, chunked prefill or is_block_kv_layout)"
            )
    return ["--no-enable-prefix-caching"], {"mode": "contiguous", "kv_tokens": seqs * length}
