"""The KV-cache layout, planned the way vllm-neuron 0.2.2+lts will really run it.

Three layouts reach NxD Inference (vllm-neuron 0.2.2+lts
worker/neuronx_distributed_model_loader.py:778-785, platform.py:214-282):
- contiguous: no prefix caching, no chunked prefill, no is_block_kv_layout: one max_model_len slot per
  sequence; --block-size/--num-gpu-blocks-override mean nothing to it.
- prefix: --enable-prefix-caching with --block-size B and --num-gpu-blocks-override N.
- block without prefix caching (is_block_kv_layout in the override, or chunked prefill). Under the
  plugin's custom scheduler (the default) platform.py:275-279 sets block_size = max_model_len whenever
  prefix caching is off, so the blocks are max_model_len long and a --block-size never reaches the
  graph. Chunked prefill runs vLLM's native scheduler (DISABLE_NEURON_CUSTOM_SCHEDULER=1), which keeps
  --block-size (and asserts one is set, platform.py:241-247).
Whatever the flag says, the plugin adds one null block (platform.py:220-230) and NxD Inference
allocates pa_num_blocks = N + 1 blocks of pa_block_size tokens
(worker/neuronx_distributed_model_loader.py:744-748, 809-818). The plan records those compiled numbers
in kv (block_size, num_blocks = the flag, pa_num_blocks = what is allocated, kv_tokens = the KV cache's
token capacity) for the cache key and the memory estimate.
"""

from __future__ import annotations

import math
from typing import Any

from neuronserve.config.settings import Settings
from neuronserve.errors import ConfigError
from neuronserve.plan.lanes.nxdi import rules
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
) -> tuple[list[str], dict[str, Any]]:
    """Flags and the compiled KV numbers; refuses what the plugin would refuse.

    `plugin` False (vLLM's older in-tree Neuron support) has neither the custom scheduler nor
    DISABLE_NEURON_CUSTOM_SCHEDULER: the block size given is the one used there.
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
    if not block_layout:
        return _contiguous(override, length, seqs, (block, blocks), native=native, res=res)
    if plugin and not prefix and not native:
        block, blocks = _max_len_blocks(length, seqs, (block, blocks), res)
    else:
        if block is None:
            block = DEFAULT_BLOCK_SIZE
            res.warn(f"block_size defaulted to {block} for the block KV layout")
        if blocks is None:
            blocks = math.ceil(length / block) * seqs
            if "pa_num_blocks" not in override:
                res.warn(f"num_gpu_blocks_override computed as ceil({length}/{block})*{seqs} = {blocks}")
        rules.check_block_layout(length, seqs, block, blocks, res)
    rules.check_pa_keys(block, blocks, res)
    override["is_block_kv_layout"] = True
    if prefix:
        override["is_prefix_caching"] = True
    flags = ["--enable-prefix-caching" if prefix else "--no-enable-prefix-caching"]
    if prefix or native or not plugin:
        flags += ["--block-size", str(block)]
    flags += ["--num-gpu-blocks-override", str(blocks)]
    kv = {
        "mode": "prefix" if prefix else "block",
        "block_size": block,
        "num_blocks": blocks,
        "pa_num_blocks": blocks + 1,
        "kv_tokens": (blocks + 1) * block,
    }
    return flags, kv


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
    """Contiguous cache. With the native scheduler the plugin asserts a block size (platform.py:241-247)
    that a contiguous cache cannot have (max_model_len is not a --block-size choice): refused. The
    block-count keys are not read without the block layout
    (worker/neuronx_distributed_model_loader.py:707-709): warned, not refused."""
    if native:
        raise ConfigError(
            "DISABLE_NEURON_CUSTOM_SCHEDULER=1 without chunked prefill or a block KV layout: vLLM's native "
            "scheduler needs a block size (vllm-neuron 0.2.2+lts platform.py:241-247) and the contiguous "
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


def _max_len_blocks(
    length: int,
    seqs: int,
    given: tuple[int | None, int | None],
    res: Resolution,
) -> tuple[int, int]:
    """Block layout without prefix caching under the custom scheduler: blocks are max_model_len long."""
    b_var, n_var = res.origins["block-size"], res.origins["num-gpu-blocks-override"]
    block, blocks = given
    if block is not None and block != length:
        if blocks is not None and blocks > seqs:
            raise ConfigError(
                f"{n_var}={blocks} looks sized for {b_var}={block}, but without prefix caching the plugin's "
                f"custom scheduler makes every block max_model_len = {length} tokens (vllm-neuron 0.2.2+lts "
                f"platform.py:275-279): NxD Inference would allocate {blocks + 1} blocks of {length} tokens "
                f"({length // block}x the planned KV memory): set "
                f"{n_var}={seqs} (one block per sequence), or SM_VLLM_ENABLE_PREFIX_CACHING=true to keep "
                f"blocks of {block}",
                (n_var, b_var),
            )
        res.warn(
            f"{b_var}={block} replaced by max_model_len {length}: without prefix caching the plugin's custom "
            "scheduler uses one block of max_model_len per sequence"
        )
    if blocks is None:
        blocks = seqs
    if blocks < seqs:
        raise ConfigError(
            f"{n_var}={blocks} blocks of max_model_len {length} cannot hold max_num_seqs {seqs} sequences "
            f"(vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_loader.py:848-862): "
            f"set {n_var}={seqs} or more",
            (n_var,),
        )
    if blocks > seqs:
        res.warn(
            f"{n_var}={blocks}: {blocks + 1} KV blocks of {length} tokens are allocated "
            f"for max_num_seqs {seqs}"
        )
    return length, blocks
