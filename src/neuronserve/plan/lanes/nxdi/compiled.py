"""What NxD Inference will compile for a launch: its serialised configuration, predicted, for the cache key.

The plugin itself names a compiled graph by its configuration: it hashes NxD Inference's own serialisation
(`config.to_json_string()`, vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_loader.py:180-183), which
NxD Inference also writes next to the graph (models/application_base.py compile, `config.save`). So the
graph part of neuronserve's cache key is that document (plan/cachekey.py), predicted here from the launch,
rather than a hand-kept list of settings: `neuron_config` holds every NeuronConfig field the launch decides,
under NxD Inference's own names and serialised values (models/config.py `to_dict`), and local paths are
left out (they differ between hosts, and the files behind them are keyed by their content).

How each field comes about (0.2.2+lts loader; 0.4.1's is the same at its own lines):
- the plugin's defaults from vLLM's settings (`_get_default_neuron_config`, :728-796): TP, batch (1 with
  chunked prefill), prefill length, seq_len, dtype, on-device sampling, LoRA, blocks, KV layout, speculation;
- merged with override_neuron_config, every key as given (`_get_neuron_config_after_override`, :873-903:
  the quantization keys take the loader's own defaults, :888-901);
- then NeuronConfig's derivations (models/config.py `NeuronConfig.__init__`): the batch sizes of each
  sub-model, n_positions / max_length / buckets from seq_len, max_new_tokens, world size, chunked prefill,
  KV-cache tiling for fused speculation, the logical core size (NEURON_LOGICAL_NC_CONFIG > override >
  the platform: 2 on Trn2) and the lm_head padding it implies.
Multimodal models get one such document for the text model and one for the vision encoder (the loader
copies the defaults into both and merges text_neuron_config / vision_neuron_config, :414-425); an EAGLE
draft gets the target's with its own speculation fields (`_init_fused_spec_config`, :276-290).

tests/contract runs the real code on every tested configuration and checks that this prediction equals
NxD Inference's serialisation, field by field, and that every field that differs between two tested
configurations is predicted.
"""

from __future__ import annotations

import copy
import math
from typing import Any

# models/config.py OnDeviceSamplingConfig's defaults, and the plugin's own (loader :734-735).
SAMPLING_DEFAULTS = {
    "do_sample": False,
    "top_k": 1,
    "top_p": 1.0,
    "temperature": 1.0,
    "dynamic": False,
    "deterministic": False,
    "global_topk": 256,
    "on_device_sampling_config": True,
    "top_k_kernel_enabled": False,
}
PLUGIN_SAMPLING = {"dynamic": True, "deterministic": False}
# models/config.py ChunkedPrefillConfig's defaults.
CHUNKED_DEFAULTS = {
    "max_num_seqs": 0,
    "tkg_model_enabled": True,
    "kernel_q_tile_size": 128,
    "kernel_kv_tile_size": 1024,
}
# The loader's quantization defaults when the override names `quantized` (:888-901); NeuronConfig's otherwise.
QUANTIZATION_DEFAULTS = {
    "quantized": False,
    "quantization_type": "per_tensor_symmetric",
    "quantization_dtype": "int8",
}
# vLLM's dtype names as the plugin maps them (worker/constants.py TORCH_DTYPE_TO_NEURON_AMP).
NEURON_DTYPES = {
    "half": "float16",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float": "float32",
    "float32": "float32",
}
NESTED = ("text_neuron_config", "vision_neuron_config")
PATH_KEYS = frozenset(
    {"quantized_checkpoints_path", "lora_ckpt_json", "lora_ckpt_paths", "lora_ckpt_paths_cpu"}
)
# Override keys the model runner pops before the loader sees them (runner :174-175): they reach the
# LoRA serving config, not neuron_config.
RUNNER_KEYS = frozenset({"target_modules", "lora_ckpt_json"})


def predict(
    launch: dict[str, Any],
    override: dict[str, Any],
    *,
    nested: bool,
    platform_lnc: int | None,
    env_lnc: int | None,
) -> dict[str, Any]:
    """The serialised configuration NxD Inference builds: {"neuron_config": ...} for a text model,
    {"text_neuron_config", "vision_neuron_config"} for a multimodal one, plus "draft_neuron_config" for an
    EAGLE draft. `launch` holds the numbers the plugin reads from vLLM (see `plugin_defaults`), `override`
    the override_neuron_config as rendered, `platform_lnc` the instance's logical core size (None when the
    plan does not know the hardware: the field is then left out), `env_lnc` NEURON_LOGICAL_NC_CONFIG."""
    defaults = plugin_defaults(launch)
    if not nested:
        target = derive(merge(defaults, override), platform_lnc, env_lnc)
        out = {"neuron_config": target}
    else:
        # The loader merges the top-level keys (the quantization keys: the only others a multimodal
        # override may hold, :888-901) into the defaults both models start from, so a quantized model's
        # vision encoder is quantized too (:414-425).
        top = {k: v for k, v in override.items() if k not in NESTED}
        text = {**top, **(override.get("text_neuron_config") or {})}
        vision_keys = {**top, **(override.get("vision_neuron_config") or {})}
        target = derive(merge(defaults, text), platform_lnc, env_lnc)
        vision = derive(merge(defaults, vision_keys), platform_lnc, env_lnc)
        out = {"text_neuron_config": target, "vision_neuron_config": vision}
    if target.get("enable_fused_speculation"):
        out["draft_neuron_config"] = draft(target)
    return out


def plugin_defaults(launch: dict[str, Any]) -> dict[str, Any]:
    """loader :728-796: what the plugin derives from vLLM's configuration. `launch`: tp, seqs, length,
    dtype, chunked, batched (the chunk), max_context (the prefill NxD Inference compiles: the plan's own,
    max_prompt_length included), block_size / pa_num_blocks (as vLLM passes them: plan/lanes/nxdi/kv.py),
    block_layout, prefix, speculation (num_speculative_tokens, method) and lora (vLLM's LoRA numbers)."""
    chunked = bool(launch["chunked"])
    batch = 1 if chunked else int(launch["seqs"])
    out: dict[str, Any] = {
        "tp_degree": launch["tp"],
        "ctx_batch_size": 1,
        "batch_size": batch,
        "max_context_length": launch["max_context"],
        "seq_len": launch["length"],
        "enable_bucketing": True,
        "is_continuous_batching": batch > 1,
        "torch_dtype": NEURON_DTYPES.get(str(launch["dtype"]), str(launch["dtype"])),
        "padding_side": "right",
        "on_device_sampling_config": dict(SAMPLING_DEFAULTS, **PLUGIN_SAMPLING),
        "lora_config": lora_config(launch.get("lora"), int(launch["seqs"])),
        "pa_num_blocks": launch["pa_num_blocks"],
        "pa_block_size": launch["block_size"],
        "is_block_kv_layout": bool(chunked or launch["prefix"]),
        "is_prefix_caching": bool(launch["prefix"]),
        **QUANTIZATION_DEFAULTS,
    }
    spec = launch.get("speculation")
    if spec:
        out["enable_fused_speculation"] = True
        out["speculation_length"] = int(spec.get("num_speculative_tokens") or 0)
        if spec.get("method") == "eagle":
            out["enable_eagle_speculation"] = True
    return out


def lora_config(lora: dict[str, Any] | None, seqs: int) -> dict[str, Any] | None:
    """The runner's LoraServingConfig (runner :155-192) as NxD Inference serialises it: vLLM's
    max_loras, max_lora_rank and max_cpu_loras (vLLM's default for the last: max_loras), the batch, and
    dynamic multi-LoRA whenever host slots exist (max_cpu_loras > 0, :179-180; vLLM sets max_cpu_loras
    to at least max_loras >= 1, so always). Adapter paths and target modules come from the adapters'
    files: keyed by their content (plan/assets), not predicted here."""
    if not lora:
        return None
    cpu = lora.get("max_cpu_loras") or lora["max_loras"]
    return {
        "max_loras": lora["max_loras"],
        "max_lora_rank": lora["max_lora_rank"],
        "max_cpu_loras": cpu,
        "batch_size": seqs,
        "dynamic_multi_lora": cpu > 0,
        "base_model_quantized": bool(lora.get("base_model_quantized")),
    }


def with_lora(predicted: dict[str, Any], max_loras: int | None, max_cpu_loras: int | None) -> dict[str, Any]:
    """The prediction with the LoRA numbers staging renders (plan/assets/lora.py passes `--max-loras` /
    `--max-cpu-loras` for the adapters it stages), in every configuration that has a LoRA config."""
    if max_loras is None and max_cpu_loras is None:
        return predicted
    out = copy.deepcopy(predicted)
    for section in out.values():
        lora = section.get("lora_config")
        if not lora:
            continue
        if max_loras is not None:
            lora["max_loras"] = max_loras
        cpu = max_cpu_loras if max_cpu_loras is not None else lora["max_loras"]
        lora["max_cpu_loras"] = cpu
        lora["dynamic_multi_lora"] = lora["dynamic_multi_lora"] or cpu > 0
    return out


def merge(defaults: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """loader :873-903: the override's keys over the defaults (chunked_prefill_config completed by its
    class, the quantization keys with the loader's defaults), the runner's keys and the nesting keys out."""
    out = copy.deepcopy(defaults)
    for key, value in override.items():
        if key in RUNNER_KEYS or key in NESTED:
            continue
        out[key] = copy.deepcopy(value)
    sampling = override.get("on_device_sampling_config", out["on_device_sampling_config"])
    out["on_device_sampling_config"] = None if sampling is None else dict(SAMPLING_DEFAULTS, **sampling)
    chunk = out.get("chunked_prefill_config")
    out["chunked_prefill_config"] = dict(CHUNKED_DEFAULTS, **chunk) if isinstance(chunk, dict) else None
    if out["lora_config"] is not None:
        out["lora_config"]["base_model_quantized"] = bool(override.get("quantized", False))
    return out


def derive(config: dict[str, Any], platform_lnc: int | None, env_lnc: int | None) -> dict[str, Any]:
    """models/config.py NeuronConfig.__init__: the fields it derives from the ones given."""
    out = dict(config)
    seq_len = int(out["seq_len"])
    batch = int(out["batch_size"])
    for key in ("tkg_batch_size", "max_batch_size", "kv_cache_batch_size", "spec_batch_size"):
        out.setdefault(key, batch)
    for key in ("n_positions", "n_active_tokens", "max_length"):
        out.setdefault(key, seq_len)
    out.setdefault("buckets", [seq_len])
    new_tokens = out.setdefault("max_new_tokens", seq_len - int(out["max_context_length"]))
    out["max_new_tokens"] = new_tokens or None
    if out.get("enable_eagle_speculation"):
        out["enable_fused_speculation"] = True
    out.setdefault("enable_fused_speculation", False)
    out.setdefault("enable_eagle_speculation", False)
    out.setdefault("speculation_length", 0)
    out["is_chunked_prefill"] = out.get("chunked_prefill_config") is not None
    tp = int(out["tp_degree"])
    out.setdefault("world_size", tp)
    out.setdefault("local_ranks_size", out["world_size"])
    length = int(out["max_length"])
    tiling = out["enable_fused_speculation"] and length > 128 and length % 128 == 0
    out["kv_cache_tiling"] = bool(tiling and not out.get("disable_kv_cache_tiling"))
    lnc = env_lnc or out.pop("logical_nc_config", None) or platform_lnc
    if lnc is not None:
        out["logical_nc_config"] = int(lnc)
        out.setdefault("lm_head_pad", int(lnc) > 1)
    lora = out.get("lora_config")
    out["weights_to_skip_layout_optimization"] = [r".*lora.*"] if lora and lora["dynamic_multi_lora"] else []
    if out.get("context_encoding_buckets"):
        out["context_encoding_buckets"] = sorted(out["context_encoding_buckets"])
    if out.get("token_generation_buckets"):
        out["token_generation_buckets"] = sorted(out["token_generation_buckets"])
    return {k: v for k, v in out.items() if k not in PATH_KEYS}


def draft(target: dict[str, Any]) -> dict[str, Any]:
    """loader :276-290: the draft's configuration is the target's, without fused speculation, with its
    speculation length zeroed unless EAGLE, and marked as the EAGLE draft."""
    out = copy.deepcopy(target)
    eagle = bool(target.get("enable_eagle_speculation"))
    if not eagle:
        out["speculation_length"] = 0
    out["enable_fused_speculation"] = False
    if target.get("draft_model_modules_to_not_convert"):
        out["modules_to_not_convert"] = target["draft_model_modules_to_not_convert"]
    if eagle:
        out["is_eagle_draft"] = True
    return out


def blocks(kv: dict[str, Any], length: int, seqs: int) -> tuple[int, int]:
    """(pa_num_blocks, pa_block_size) as the plugin computes them (loader :744-748, :780-781): the block
    layout's from the flags the plan renders (the null block included, platform.py:220-230); the
    contiguous cache's blocks are max_model_len long (platform.py:275-279), one per sequence."""
    if kv.get("mode") in ("prefix", "block"):
        return int(kv["pa_num_blocks"]), int(kv["block_size"])
    return math.floor(length // length) * seqs, length
