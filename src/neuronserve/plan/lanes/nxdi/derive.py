"""What vllm-neuron 0.2.2+lts and NxD Inference 0.7 will really do with a configuration, as pure functions.

The rules in rules.py, overrides.py and kv.py check the plan against these derivations, so each one
is written down once, with the source line it mirrors. Sources read for them (git tags):
- vllm-neuron 0.2.2+lts, the image's (the public fork whn09/vllm-neuron, commit ad82965376f1, tree
  7b76c544): vllm_neuron/platform.py, platform_overrides.py, worker/neuronx_distributed_model_loader.py
  and worker/neuronx_distributed_model_runner.py, cited by those paths. What only 0.2.0 did (tag
  0.2.0, a967125) is cited as "0.2.0 loader.py" / "0.2.0 runner.py".
- neuronx-distributed-inference v0.7.14366: src/neuronx_distributed_inference/models/config.py
  ("nxdi config.py"), modules/autobucketing.py ("autobucketing.py"), models/model_base.py,
  utils/constants.py.
When the next plugin release changes one of these, the function here is where to change it.
"""

from __future__ import annotations

import math
import re
from typing import Any

from neuronserve.plan.facts import json_int
from neuronserve.plan.lanes.nxdi.profiles import V0_2, PluginRules

# NxD Inference 0.7 utils/constants.py:41-51 MODEL_TYPES: model key -> task -> class.
NXDI_MODEL_TYPES = V0_2.model_types
# 0.2.0 loader.py:672-674 raises for this architecture before any lookup (0.2.2+lts builds it:
# worker/neuronx_distributed_model_loader.py:679-680; rules.check_architecture).
PLUGIN_REFUSED_ARCHITECTURES = {"LlavaForConditionalGeneration": "Pixtral/LLaVA is not yet supported"}
# constants.py:4-7 of the plugin: these read text_config for heads/head_dim
# (worker/neuronx_distributed_model_loader.py:627-628).
MULTI_MODAL_ARCHITECTURES = V0_2.multimodal
# worker/neuronx_distributed_model_runner.py:76-77 (_MAX_NEURON_SAMPLING_TOP_K) and :1245-1251: the
# device never samples above 256.
MAX_DEVICE_TOPK = 256
# nxdi config.py:931-941 OnDeviceSamplingConfig pops exactly these; anything else is silently dropped.
SAMPLING_KEYS = frozenset(
    {
        "do_sample",
        "top_k",
        "top_p",
        "temperature",
        "dynamic",
        "deterministic",
        "global_topk",
        "on_device_sampling_config",
        "top_k_kernel_enabled",
    }
)
# worker/neuronx_distributed_model_loader.py:734-735: the plugin's own default, replaced WHOLE by an
# override (:880 dict.update).
PLUGIN_SAMPLING_DEFAULT = {"dynamic": True, "deterministic": False}
# nxdi config.py:944-959 ChunkedPrefillConfig pops exactly these; max_num_seqs defaults to 0.
CHUNKED_KEYS = frozenset({"max_num_seqs", "tkg_model_enabled", "kernel_q_tile_size", "kernel_kv_tile_size"})
# platform.py:259-260: the custom scheduler overwrites max_num_batched_tokens with this.
CUSTOM_SCHEDULER_TOKENS = 131072


def plugin_model_key(architecture: str, rules: PluginRules = V0_2) -> tuple[str, str] | None:
    """(model key, task) the plugin looks up in MODEL_TYPES for `architectures[0]`.

    vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_loader.py:646-666 (_get_neuron_model_cls):
    split at the first "For", lower-case the model part (only qwen3moe is mapped, to qwen3_moe; Llava
    to pixtral), kebab-case the task part with ConditionalGeneration read as CausalLM. So
    GptOssForCausalLM looks up "gptoss", which NxD Inference names "gpt_oss" (constants.py:42): GPT-OSS
    cannot load through 0.2.2+lts.
    None when the name has no "For" (the plugin raises then too).
    """
    if "For" not in architecture:
        return None
    model, task = architecture.split("For", 1)
    if task == "ConditionalGeneration":
        task = "CausalLM"
    model = model.lower()
    model = dict(rules.model_renames).get(model, model)  # 0.2.2+lts: qwen3moe only (profiles.py)
    if architecture == "LlavaForConditionalGeneration":
        model = "pixtral"
    kebab = re.sub("([a-z0-9])([A-Z])", r"\1-\2", re.sub("(.)([A-Z][a-z]+)", r"\1-\2", task)).lower()
    return model, kebab


def heads_known(config: dict[str, Any], architecture: str, rules: PluginRules = V0_2) -> bool:
    """worker/neuronx_distributed_model_loader.py:619-638: num_key_value_heads and a head_dim (or heads
    + hidden size) must be present (in text_config for the lane's multimodal architectures)."""
    cfg = (config.get("text_config") or {}) if architecture in rules.multimodal else config
    head_dim = cfg.get("head_dim") or (cfg.get("hidden_size") and cfg.get("num_attention_heads"))
    return bool(cfg.get("num_key_value_heads")) and bool(head_dim)


def generate_buckets(low: int, high: int) -> list[int]:
    """NxD Inference autobucketing.py:8-19: powers of two from `low`, then `high` itself."""
    if low == high:
        return [high]
    return [2**i for i in range(int(math.log2(low)), round(math.log2(high)))] + [high]


def context_buckets(override: dict[str, Any], max_context: int, prefix: bool, chunked: bool) -> list[int]:
    """The prefill (context-encoding) sequence lengths NxD Inference traces.

    autobucketing.py:149-200 (generate_buckets_for_cte): the user's context_encoding_buckets when
    bucketing is on (the plugin turns it on,
    worker/neuronx_distributed_model_loader.py:765-766), else 128..max_context_length
    (512.. with prefix caching), or only max_context_length when enable_bucketing is false.
    Chunked prefill uses chunk-size buckets (autobucketing.py:101-146): only max_context_length is
    returned for it here, the one length every chunk configuration traces.
    """
    if chunked:
        return [max_context]
    if override.get("enable_bucketing", True) is False:
        return [max_context]
    given = override.get("context_encoding_buckets")
    if isinstance(given, list) and given:
        return sorted(int(b) for b in given)
    return generate_buckets(512 if prefix else 128, max_context) if max_context >= 128 else [max_context]


def max_context_length(
    override: dict[str, Any], length: int, chunked: bool, batched: int | None, prompt: int | None = None
) -> int:
    """neuron_config max_context_length: worker/neuronx_distributed_model_loader.py:737-742
    (max_num_batched_tokens under chunked prefill, else max_model_len), replaced by an override key of
    that name (:880), which additional_config max_prompt_length (`prompt`) replaces first (:926-940)."""
    if prompt is not None:
        return prompt
    value = override.get("max_context_length")
    if json_int(value):
        return value
    return int(batched or length) if chunked else length
