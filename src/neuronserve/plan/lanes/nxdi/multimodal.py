"""Multimodal models on vllm-neuron 0.2.2+lts: Llama 4 and Pixtral take a nested override.

For `Llama4ForConditionalGeneration` and `LlavaForConditionalGeneration` (Pixtral) the plugin builds
NeuronLlama4ForCausalLM / NeuronPixtralForCausalLM (worker/neuronx_distributed_model_loader.py:679-682),
whose loader asserts the override holds only `text_neuron_config` and `vision_neuron_config` at the
top level (:945-952) and merges each over a copy of the launch's neuron_config (:424-434). So:
- the user writes those two objects and nothing else at the top level (checked here, before any rule
  adds a key);
- the plan's own keys (KV layout, sampling completion, logical_nc_config, ...) are nested under
  `text_neuron_config` when the override is rendered (`nest`), generically: every top-level key but the
  two objects and the keys removed from the top level before that assertion runs, which must stay
  there: the LoRA keys the runner pops (worker/neuronx_distributed_model_runner.py:174-177 pop
  `target_modules` and `lora_ckpt_json` from the same dict in load_model :215-227, before
  get_neuron_model), and the quantization keys the loader pops into the base neuron_config when
  `quantized` is given (loader :888-901; the runner reads `quantized` there too, :190-191);
- the rules keep reading a flat override while the plan is built.
"""

from __future__ import annotations

import json
from typing import Any

from neuronserve.config.settings import Settings
from neuronserve.errors import ConfigError
from neuronserve.plan.facts import ModelFacts
from neuronserve.plan.lanes.nxdi.profiles import LLAMA4, QWEN2_VL, QWEN3_VL, V0_2, PluginRules
from neuronserve.plan.resolution import Resolution

NESTED_ARCHITECTURES = V0_2.nested  # 2.27's; each lane's is its PluginRules.nested (Qwen VL in 2.28)
PIXTRAL = "LlavaForConditionalGeneration"
QWEN2_VL_PIXELS = 1012  # NxD Inference 2.28 models/qwen2_vl/utils/constants.py DEFAULT_PIXELS_PER_IMAGE
NESTED_KEYS = ("text_neuron_config", "vision_neuron_config")
# Removed from the top level before the loader's assertion (see the module doc): they stay top-level.
RUNNER_POPPED = frozenset({"target_modules", "lora_ckpt_json"})
QUANTIZATION_KEYS = frozenset(
    {"quantized", "quantized_checkpoints_path", "quantization_type", "quantization_dtype"}
)
PIXTRAL_MAX_SEQS = V0_2.pixtral_max_seqs or 4  # loader :442-447 (none in 0.4.1: profiles.py)
PIXTRAL_MAX_LEN = 10240  # vllm-neuron 0.2.2+lts README, known issue 5: an estimate, not a check of the source
# Where each contiguous-only model (PluginRules.contiguous_only) refuses the block KV layout, prefix
# caching, chunked prefill and fused speculation: its InferenceConfig's __init__ in NxD Inference
# (0.7.14366 and 2.28.0 at the same lines for Llama 4 and Pixtral).
CONTIGUOUS_SOURCES = {
    LLAMA4: ("models/llama4/modeling_llama4.py", "94-97", "102-103", "raises"),
    PIXTRAL: ("models/pixtral/modeling_pixtral.py", "50-53", "58-59", "raises"),
    QWEN3_VL: ("models/qwen3_vl/modeling_qwen3_vl.py", "76-79", "84-85", "raises"),
    QWEN2_VL: ("models/qwen2_vl/modeling_qwen2_vl.py", "80-91", "80-91", "turns it off with a warning"),
}


def architecture(model: ModelFacts | None) -> str:
    """config.json architectures[0] ("" when unknown)."""
    config = model.config if model else None
    archs = (config or {}).get("architectures") or []
    return str(archs[0]) if archs and isinstance(archs, list) else ""


def nested(model: ModelFacts | None, rules: PluginRules = V0_2) -> bool:
    return architecture(model) in rules.nested


def check_user_keys(model: ModelFacts | None, res: Resolution, rules: PluginRules = V0_2) -> None:
    """A multimodal model's override: only text_neuron_config / vision_neuron_config (objects) at the
    top level (loader :945-952 asserts it), plus the LoRA keys the runner pops first (runner :174-176).
    Runs before any rule adds a key, so res.override holds only the user's keys."""
    arch = architecture(model)
    if arch not in rules.nested:
        return
    kept = _top_level(res.override)
    for key, value in res.override.items():
        origin = res.origin(key)
        if key in NESTED_KEYS:
            if not isinstance(value, dict):
                raise ConfigError(f"{origin}: {key} must be a JSON object for {arch}", (origin,))
            continue
        if key in kept:
            continue
        if key in QUANTIZATION_KEYS:  # popped from the top level only with `quantized` (loader :888-901)
            raise ConfigError(
                f"{origin} sets {key} at the top level of override_neuron_config, but for {arch} "
                f"{rules.plugin} takes the quantization keys from there only with `quantized` set (else it "
                "asserts at load that only text_neuron_config and vision_neuron_config are there): set "
                f"SM_NEURON_QUANTIZED=true with it (the checkpoint path is then staged), or unset {origin}",
                (origin, "SM_NEURON_QUANTIZED"),
            )
        shown = f'{{"text_neuron_config": {{"{key}": {_json(value)}}}}}'
        raise ConfigError(
            f"{origin} sets {key} at the top level of override_neuron_config, but for {arch} "
            f"{rules.plugin} accepts only text_neuron_config and vision_neuron_config there (it asserts so "
            f"at load): set SM_NEURON_OVERRIDE_CONFIG='{shown}' (or vision_neuron_config for the vision "
            f"encoder) instead of {origin}",
            (origin, "SM_NEURON_OVERRIDE_CONFIG"),
        )


def check_launch(
    model: ModelFacts | None,
    settings: Settings,
    res: Resolution,
    *,
    seqs: int,
    length: int,
    rules: PluginRules = V0_2,
) -> None:
    """What the nested loader cannot build, checked once the launch numbers are resolved.

    - Chunked prefill: `_validate_neuron_config` asserts `chunked_prefill_config` in the top-level
      neuron_config (loader :844-846), which only a top-level override key provides (:876-880), and
      :945-952 refuses that key for these models: no configuration passes both, so refused.
    - additional_config.max_prompt_length: the loader then writes `max_context_length` at the top level
      of the override (:926-940), which :945-952 refuses: refused.
    - Pixtral: batch above 4 raises (loader :442-447: batch_size or tkg_batch_size > 4), and it does not
      run before 0.2.2 (0.2.0 loader.py:672-674). max_model_len above 10240 (the plugin README's limit, an
      estimate rather than a check in the source) is refused like the HBM estimate, with its override
      NEURONSERVE_FIT_CHECK=warn|off.
    Lane 2.28 (vllm-neuron 0.4.1, `rules`): the same two refusals (0.4.1 loader :1180-1182 and
    :1265-1278 write and assert the same keys, :1283-1289 the same top level) also for Qwen2-VL and
    Qwen3-VL, and no Pixtral batch cap (0.4.1 loader :575-627 has no batch check).
    """
    arch = architecture(model)
    if arch not in rules.nested:
        return
    vision = res.override.get("vision_neuron_config") or {}
    for required_arch, key, value in rules.vision_required:
        if required_arch == arch and key in vision and vision[key] != value:
            origin = res.origin("vision_neuron_config", "SM_NEURON_OVERRIDE_CONFIG")
            raise ConfigError(
                f"{origin}: vision_neuron_config sets {key}={_json(vision[key])}, but {rules.plugin}'s NxD "
                f"Inference asserts {key}={_json(value)} for {arch}'s vision encoder: remove {key}",
                (origin,),
            )
    _check_vision(arch, vision, length, res, rules)
    if settings.get("enable-chunked-prefill") is True:
        var = res.origins["enable-chunked-prefill"]
        raise ConfigError(
            f"{var}=true: chunked prefill cannot load for {arch} on {rules.plugin} (it asserts "
            "chunked_prefill_config at the top level of the override, where this model accepts only "
            f"text_neuron_config and vision_neuron_config): unset {var}",
            (var,),
        )
    if arch in rules.contiguous_only:
        _check_contiguous(arch, settings, res)
    if "max_prompt_length" in settings.additional_config:
        raise ConfigError(
            f"SM_VLLM_ADDITIONAL_CONFIG max_prompt_length: for {arch} {rules.plugin} writes it as "
            "max_context_length at the top level of the override, which this model refuses at load: "
            "remove max_prompt_length",
            ("SM_VLLM_ADDITIONAL_CONFIG",),
        )
    if arch == PIXTRAL:
        _check_pixtral(seqs, length, settings, res, rules.pixtral_max_seqs)


def _check_contiguous(arch: str, settings: Settings, res: Resolution) -> None:
    """The models NxD Inference builds with a contiguous KV cache and no fused speculation.

    Their InferenceConfig raises "does not yet support block_kv_layout" / "prefix_caching" / "fused
    speculation" when the model is built (NxD Inference models/llama4/modeling_llama4.py:94-103,
    models/pixtral/modeling_pixtral.py:50-59, 2.28's models/qwen3_vl/modeling_qwen3_vl.py:76-85), after
    the download; 2.28's Qwen2-VL sets the flags false with only a warning
    (models/qwen2_vl/modeling_qwen2_vl.py:80-91) while vLLM keeps scheduling for them. The plugin passes
    them on from the launch: is_block_kv_layout and is_prefix_caching from --enable-prefix-caching
    (vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_loader.py:778-785, copied into
    text_neuron_config at :424-434) or a text_neuron_config key, and enable_fused_speculation from any
    speculative config (:787-794). So prefix caching, the block layout and speculative decoding are
    refused for them (chunked prefill already is, above)."""
    path, kv_lines, spec_lines, does = CONTIGUOUS_SOURCES.get(arch, ("its modeling file", "", "", "raises"))
    text = res.override.get("text_neuron_config")
    text = text if isinstance(text, dict) else {}
    prefix = settings.get("enable-prefix-caching") is True
    keyed = [k for k in ("is_block_kv_layout", "is_prefix_caching") if text.get(k) is True]
    if prefix or keyed:
        var = res.origins["enable-prefix-caching"] if prefix else res.origin("text_neuron_config")
        raise ConfigError(
            f"{var}: {arch} has no block KV layout in NxD Inference ({path}:{kv_lines} {does} when the "
            'model is built: "does not yet support block_kv_layout"), and prefix caching needs one: '
            + (f"unset {var}" if prefix else f"remove {', '.join(keyed)} from text_neuron_config"),
            (var,),
        )
    if res.speculation.config is not None:
        var = res.origins["speculative-config"]
        raise ConfigError(
            f"{var}: {arch} has no fused speculation in NxD Inference ({path}:{spec_lines} {does}: "
            '"does not yet support fused speculation"), which the plugin turns on for any speculative '
            f"config: unset {var}",
            (var,),
        )


def _check_vision(
    arch: str, vision: dict[str, Any], length: int, res: Resolution, rules: PluginRules
) -> None:
    """The vision encoder's chosen defaults said; for Qwen2-VL, whose vision buckets are image counts,
    the largest one's tokens (NxD Inference 2.28's 1012 pixels per image, merged 2x2) must fit the text
    model's sequence: asserted at models/qwen2_vl/modeling_qwen2_vl.py:108-109."""
    origin = res.origin("vision_neuron_config", "SM_NEURON_OVERRIDE_CONFIG")
    for default_arch, key, value in rules.vision_defaults:
        if default_arch == arch and key not in vision:
            res.warn(f"{arch}: vision_neuron_config {key}={_json(value)} (set it in {origin} to choose)")
    buckets = vision.get("buckets")
    if (
        arch == QWEN2_VL
        and isinstance(buckets, list)
        and buckets
        and buckets[-1] * QWEN2_VL_PIXELS // 4 > length
    ):
        raise ConfigError(
            f"{origin}: vision_neuron_config buckets up to {buckets[-1]} images need "
            f"{buckets[-1] * QWEN2_VL_PIXELS // 4} tokens, more than max_model_len {length}: NxD Inference "
            "asserts they fit (models/qwen2_vl/modeling_qwen2_vl.py:108-109): use fewer images per bucket",
            (origin,),
        )


def _check_pixtral(seqs: int, length: int, settings: Settings, res: Resolution, cap: int | None) -> None:
    s_var, l_var = res.origins["max-num-seqs"], res.origins["max-model-len"]
    if cap is not None and seqs > cap:
        raise ConfigError(
            f"{s_var}={seqs}: vllm-neuron 0.2.2+lts raises for Pixtral (LlavaForConditionalGeneration) above "
            f"batch {cap}: set {s_var}={cap} or fewer",
            (s_var,),
        )
    if length <= PIXTRAL_MAX_LEN or settings.fit.mode == "off":
        return
    message = (
        f"{l_var}={length}: Pixtral on Neuron is documented up to {PIXTRAL_MAX_LEN} tokens (vllm-neuron's "
        f"README; an estimate, not a check of its source): set {l_var}={PIXTRAL_MAX_LEN} or fewer, or "
        "NEURONSERVE_FIT_CHECK=warn to try it anyway"
    )
    if settings.fit.mode == "refuse":
        raise ConfigError(message, (l_var, "NEURONSERVE_FIT_CHECK"))
    res.warn(message + " (NEURONSERVE_FIT_CHECK=warn: not refused)")


def nest(model: ModelFacts | None, override: dict[str, Any], rules: PluginRules = V0_2) -> dict[str, Any]:
    """The override as a multimodal model's loader reads it: every top-level key the plan or user put
    there (but the two nested objects and the runner-popped LoRA keys) moved under text_neuron_config.
    A key given both ways keeps the user's nested value only when it agrees (checked by `conflicts`).
    The vision encoder gets what the lane's NxD Inference asserts for it (`rules.vision_required`,
    checked against the user's in `check_launch`)."""
    if not nested(model, rules):
        return override
    text = dict(override.get("text_neuron_config") or {})
    kept = _top_level(override)
    out: dict[str, Any] = {}
    for key, value in override.items():
        if key in NESTED_KEYS:
            continue
        if key in kept:
            out[key] = value
        else:
            text.setdefault(key, value)
    out["text_neuron_config"] = text
    vision = dict(override.get("vision_neuron_config") or {})
    for arch, key, value in (*rules.vision_required, *rules.vision_defaults):
        if arch == architecture(model):
            vision.setdefault(key, value)
    if vision or "vision_neuron_config" in override:
        out["vision_neuron_config"] = vision
    return out


def check_conflicts(model: ModelFacts | None, res: Resolution, rules: PluginRules = V0_2) -> None:
    """A key the plan decided (KV layout, sampling, LNC...) that the user's text_neuron_config sets to
    another value: refused, since the nested value would win over what the launch compiles for."""
    if not nested(model, rules):
        return
    text = res.override.get("text_neuron_config") or {}
    origin = res.origin("text_neuron_config", "SM_NEURON_OVERRIDE_CONFIG")
    for key, value in res.override.items():
        if key in NESTED_KEYS or key in _top_level(res.override) or key not in text or text[key] == value:
            continue
        raise ConfigError(
            f"{origin}: text_neuron_config sets {key}={_json(text[key])} but the launch needs "
            f"{key}={_json(value)}: remove {key} from text_neuron_config (the plan writes it there itself)",
            (origin,),
        )


def _top_level(override: dict[str, Any]) -> frozenset[str]:
    """Keys that stay at the top level: the LoRA keys, and the quantization keys when `quantized` is
    given (without it the loader does not pop them, loader :889)."""
    return RUNNER_POPPED | (QUANTIZATION_KEYS if "quantized" in override else frozenset())


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
