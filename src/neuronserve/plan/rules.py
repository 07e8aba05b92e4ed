"""Checks of shared/NEURON.md "Rules that fail late", each refusing with the variable and a value that works.

These rules are what a Neuron start gets wrong after a 10 GB download and a 15-minute compile. They are
pure functions of the resolved numbers, the override and the model's config.json, so each one is tested
both ways (passes and refuses) without a device.
"""

from __future__ import annotations

import json
import math
from typing import Any

from neuronserve.errors import ConfigError
from neuronserve.plan.hostfacts import ModelFacts

SUPPORTED_MODEL_TYPES = ("llama", "llama4", "mllama", "mixtral", "dbrx", "qwen2", "qwen3", "qwen3_moe")
REFUSED_MODEL_MARKERS = {"pixtral": "Pixtral", "llava": "LLaVA", "gpt_oss": "GPT-OSS", "gptoss": "GPT-OSS"}
BLOCK_SIZES = (1, 8, 16, 32, 64, 128)  # vLLM 0.11.0 --block-size choices
PREFIX_MIN_CONTEXT_BUCKET = 512
PREFIX_MIN_TOKEN_BUCKET = 256
DEFAULT_GLOBAL_TOPK = 256


def check_tp(tp: int, origin: str, visible: int | None, source: str) -> None:
    """Rule 3: TP must fit the visible NeuronCores (TP 32 on a 24-core inf2.48xlarge is the classic)."""
    if tp < 1:
        raise ConfigError(f"{origin}={tp}: tensor parallel size must be at least 1", (origin,))
    if visible is not None and tp > visible:
        raise ConfigError(
            f"{origin}={tp} exceeds the {visible} visible NeuronCores ({source}): set {origin}={visible} "
            f"or fewer, or run on an instance with more cores",
            (origin,),
        )


def check_dtype(dtype: str, origin: str) -> None:
    """`auto` becomes float32 under NxD Inference: refuse it rather than compile the wrong graph."""
    if dtype == "auto":
        raise ConfigError(
            f"{origin}=auto compiles float32 on Neuron: set {origin}=bfloat16 (or "
            "float16/float32 explicitly)",
            (origin,),
        )


def check_block_layout(length: int, seqs: int, block: int, blocks: int, origins: dict[str, str]) -> None:
    """Rule 4: a block KV layout needs a legal block size dividing max_model_len and enough blocks."""
    b_var, n_var, l_var = origins["block-size"], origins["num-gpu-blocks-override"], origins["max-model-len"]
    if block not in BLOCK_SIZES:
        raise ConfigError(
            f"{b_var}={block} is not a vLLM block size: use one of "
            f"{', '.join(map(str, BLOCK_SIZES))} (e.g. 32)",
            (b_var,),
        )
    if length % block:
        up = math.ceil(length / block) * block
        raise ConfigError(
            f"{l_var}={length} is not a multiple of the block size {block} ({b_var}): set {l_var}={up} "
            f"(the plugin's floor division fails its own check otherwise)",
            (l_var, b_var),
        )
    need = math.ceil(length / block) * seqs
    if blocks < need:
        raise ConfigError(
            f"{n_var}={blocks} KV blocks cannot hold {seqs} sequences of {length} tokens in "
            f"blocks of {block}: "
            f"set {n_var}={need} or more (ceil(max_model_len / block_size) * max_num_seqs)",
            (n_var,),
        )


def check_pa_keys(
    override: dict[str, Any], block: int | None, blocks: int | None, origins: dict[str, str]
) -> None:
    """Rule 5: pa_num_blocks / pa_block_size in the override must match the flags they derive from."""
    n_var = origins["num-gpu-blocks-override"]
    if "pa_num_blocks" in override:
        origin = origins.get("pa_num_blocks", "SM_NEURON_PA_NUM_BLOCKS")
        value = override["pa_num_blocks"]
        if blocks is None or not origins.get("num-gpu-blocks-given"):
            raise ConfigError(
                f"{origin} sets pa_num_blocks={value} without a matching "
                "--num-gpu-blocks-override (the plugin "
                f"raises): set {n_var}={value} and SM_VLLM_ENABLE_PREFIX_CACHING=true, or "
                "remove pa_num_blocks",
                (origin, n_var),
            )
        if value not in (blocks, blocks + 1):
            raise ConfigError(
                f"{origin} sets pa_num_blocks={value} but {n_var}={blocks}: set {n_var}={value} or remove "
                f"pa_num_blocks (the plugin derives it)",
                (origin, n_var),
            )
    if "pa_block_size" in override and block is not None and override["pa_block_size"] != block:
        origin = origins.get("pa_block_size", "SM_NEURON_PA_BLOCK_SIZE")
        raise ConfigError(
            f"{origin} sets pa_block_size={override['pa_block_size']} but the block size is {block}: set "
            f"{origins['block-size']}={override['pa_block_size']} or remove pa_block_size",
            (origin, origins["block-size"]),
        )


def _bucket_list(value: Any, origin: str, key: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and v > 0 for v in value):
        raise ConfigError(
            f"{origin}: {key} must be a JSON list of positive integers, e.g. [128, 512]", (origin,)
        )
    return value


def check_buckets(override: dict[str, Any], length: int, prefix: bool, origins: dict[str, str]) -> None:
    """Rule 6: buckets fit max_model_len; prefix caching needs at least 512 (prefill) / 256 (decode)."""
    for key, floor in (
        ("context_encoding_buckets", PREFIX_MIN_CONTEXT_BUCKET),
        ("token_generation_buckets", PREFIX_MIN_TOKEN_BUCKET),
    ):
        if override.get(key) is None:
            continue
        origin = origins.get(key, "SM_NEURON_" + key.upper())
        buckets = _bucket_list(override[key], origin, key)
        too_big = [b for b in buckets if b > length]
        if too_big:
            raise ConfigError(
                f"{origin}: {key} {too_big} exceed max_model_len {length}: use buckets <= {length} "
                f"(e.g. {[b for b in buckets if b <= length] or [length]}) or raise "
                f"{origins['max-model-len']}",
                (origin, origins["max-model-len"]),
            )
        if prefix and min(buckets) < floor:
            raise ConfigError(
                f"{origin}: with prefix caching the smallest {key} entry must be >= {floor}, "
                f"got {min(buckets)}: "
                f"use buckets from {floor} up (e.g. {[b for b in buckets if b >= floor] or [floor]})",
                (origin,),
            )


def check_chunked(
    chunked: bool, override: dict[str, Any], user_env: dict[str, str], origins: dict[str, str], seqs: int
) -> list[str]:
    """Rule 7: chunked prefill needs its config, block layout and the custom scheduler off."""
    warnings: list[str] = []
    c_var = origins["enable-chunked-prefill"]
    if chunked:
        if not isinstance(override.get("chunked_prefill_config"), dict):
            raise ConfigError(
                f"{c_var}=true needs a chunked_prefill_config in override_neuron_config: set "
                f"SM_NEURON_CHUNKED_PREFILL_CONFIG='{{\"max_num_seqs\": {seqs}}}'",
                (c_var, "SM_NEURON_CHUNKED_PREFILL_CONFIG"),
            )
        if user_env.get("DISABLE_NEURON_CUSTOM_SCHEDULER", "1").strip() != "1":
            raise ConfigError(
                "chunked prefill needs DISABLE_NEURON_CUSTOM_SCHEDULER=1 (the custom scheduler disables it): "
                "unset DISABLE_NEURON_CUSTOM_SCHEDULER or set it to 1",
                ("DISABLE_NEURON_CUSTOM_SCHEDULER", c_var),
            )
    else:
        if "chunked_prefill_config" in override:
            origin = origins.get("chunked_prefill_config", "SM_NEURON_CHUNKED_PREFILL_CONFIG")
            raise ConfigError(
                f"{origin} sets chunked_prefill_config but chunked prefill is off: set "
                f"SM_VLLM_ENABLE_CHUNKED_PREFILL=true, or remove chunked_prefill_config",
                (origin, "SM_VLLM_ENABLE_CHUNKED_PREFILL"),
            )
        if user_env.get("DISABLE_NEURON_CUSTOM_SCHEDULER", "").strip() == "1":
            warnings.append(
                "DISABLE_NEURON_CUSTOM_SCHEDULER=1 without chunked prefill: the plugin's scheduler "
                "is off; set SM_VLLM_ENABLE_CHUNKED_PREFILL=true if chunked prefill was meant"
            )
    return warnings


def check_sequence_parallel(override: dict[str, Any], length: int, tp: int, origins: dict[str, str]) -> None:
    """Rule 9: sequence parallelism splits seq_len over the TP ranks."""
    if override.get("sequence_parallel_enabled") is True and length % tp:
        l_var = origins["max-model-len"]
        raise ConfigError(
            f"sequence_parallel_enabled needs max_model_len divisible by tensor_parallel_size {tp}: set "
            f"{l_var}={math.ceil(length / tp) * tp}, or sequence_parallel_enabled false",
            (l_var, origins.get("sequence_parallel_enabled", "SM_NEURON_SEQUENCE_PARALLEL_ENABLED")),
        )


def check_sampling(override: dict[str, Any], user_env: dict[str, str], origins: dict[str, str]) -> None:
    """Rules 10 and 13: the broken env switch, and a top_k the device would silently clamp."""
    if "NEURON_ON_DEVICE_SAMPLING_DISABLED" in user_env:
        raise ConfigError(
            "NEURON_ON_DEVICE_SAMPLING_DISABLED is broken in vllm-neuron 0.2.x: unset it and set "
            "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG=null (CPU sampling, needed for logprobs)",
            ("NEURON_ON_DEVICE_SAMPLING_DISABLED",),
        )
    cfg = override.get("on_device_sampling_config")
    if isinstance(cfg, dict) and isinstance(cfg.get("top_k"), int):
        limit = cfg.get("global_topk", DEFAULT_GLOBAL_TOPK)
        if isinstance(limit, int) and cfg["top_k"] > limit:
            origin = origins.get("on_device_sampling_config", "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG")
            raise ConfigError(
                f"{origin}: top_k {cfg['top_k']} exceeds global_topk {limit} and would be "
                "clamped: set top_k <= "
                f"{limit} or global_topk >= {cfg['top_k']}",
                (origin,),
            )


def check_task(lora: Any, task: Any, runner: Any, origins: dict[str, str]) -> None:
    """Rule 8: LoRA and non-generate tasks raise inside the plugin."""
    if lora is True:
        var = origins["enable-lora"]
        raise ConfigError(f"{var}: LoRA is not implemented by vllm-neuron 0.2.x: unset {var}", (var,))
    for key, value in (("task", task), ("runner", runner)):
        if value not in (None, "generate", "auto"):
            var = origins[key]
            raise ConfigError(
                f"{var}={value}: vllm-neuron 0.2.x serves text generation only: set "
                f"{var}=generate or unset it",
                (var,),
            )


def check_architecture(facts: ModelFacts | None, model: str, warnings: list[str]) -> None:
    """Rules 8 and 11: refuse architectures NxD Inference 0.7 cannot run, before anything is compiled."""
    config = facts.config if facts else None
    if not config:
        warnings.append(
            f"architecture of {model} not checked before staging (no local config.json); supported "
            f"model_type: {', '.join(SUPPORTED_MODEL_TYPES)}"
        )
        return
    model_type = str(config.get("model_type", "")).lower()
    names = " ".join([model_type, *map(str, config.get("architectures") or [])]).lower()
    for marker, label in REFUSED_MODEL_MARKERS.items():
        if marker in names.replace("-", "_"):
            raise ConfigError(
                f"{model}: {label} models do not run on vllm-neuron 0.2.x; choose a supported "
                f"model ({', '.join(SUPPORTED_MODEL_TYPES)})",
                ("SM_VLLM_MODEL",),
            )
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ConfigError(
            f"{model}: model_type {model_type or '(none)'} is not supported by NxD Inference 0.7: use one of "
            f"{', '.join(SUPPORTED_MODEL_TYPES)}",
            ("SM_VLLM_MODEL",),
        )


def check_eagle(spec: Any, origin: str, draft: ModelFacts | None, warnings: list[str]) -> None:
    """Rule 12: an EAGLE draft without the target's lm_head.weight fails at load."""
    if not isinstance(spec, str):
        return
    try:
        cfg = json.loads(spec)
    except ValueError:
        raise ConfigError(f"{origin} must be a JSON object", (origin,)) from None
    if not isinstance(cfg, dict) or "eagle" not in str(cfg.get("method", "")).lower():
        return
    if draft is None or draft.has_lm_head is None:
        warnings.append(
            f"{origin}: could not check that the EAGLE draft {cfg.get('model')} carries lm_head.weight"
        )
    elif not draft.has_lm_head:
        raise ConfigError(
            f"{origin}: EAGLE draft {cfg.get('model')} has no lm_head.weight: copy the target model's "
            f"lm_head.weight into the draft checkpoint",
            (origin,),
        )
