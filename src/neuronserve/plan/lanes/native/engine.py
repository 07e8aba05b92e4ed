"""Lane 2.32's engine: resolve the launch numbers, translate the user's keys (translate.py), then
render vLLM 0.24.0's argv and the environment vllm-neuron 0.24.0.1.1.0 reads (pure). `neuron_engine` is
this lane's EngineRenderer (plan/lanes/lane.py), registered in plan/lanes/registry.py.

The shape is the NxD Inference lanes' (plan/lanes/nxdi/engine.py: steps, then render) with this lane's
rules. Doc lines are page:line under aws-neuron/aws-neuron-sdk vllm-neuron/docs/ at the 2.32.0 release
(translate.py):
- No `--device`, no VLLM_NEURON_FRAMEWORK (migration:89-93, :113-114), no DISABLE_NEURON_CUSTOM_SCHEDULER
  (an NxD Inference scheduler switch), no NEURON_COMPILED_ARTIFACTS (cache.py).
- `--max-num-batched-tokens` is always rendered: the largest prefill bucket must equal it
  (reference:48), and long prompts are prefilled in segments of it (features:128-151), so leaving it to
  vLLM's default would compile a bucket set nobody chose. Chunked prefill is not a setting here:
  prefill and decode never share a batch (features:149-151); SM_VLLM_ENABLE_CHUNKED_PREFILL is dropped
  with a warning.
- Prefix caching is on by default (reference:57-63, features:170-175) and `block_size` defaults to 32
  (reference:65): both are rendered explicitly, so a 2.27 user who never set prefix caching is told it
  is now on. `--num-gpu-blocks-override` is never derived: the plugin sizes the KV cache itself
  (migration:118-119, :164-166); a user's own value is passed on with a warning, because reference:64 and
  features:177-208 keep it as the documented knob for prefix reuse.
- Sampling: the plan renders on_device_sampling_config explicitly (null = CPU sampling unless the user
  gives a config; translate.py says why). CPU sampling cannot run async scheduling, which is on by
  default (features:486-504, reference:95): `--no-async-scheduling` is rendered with it. Speculative
  decoding needs on-device sampling for its rejection step (features:596-603, reference:79) and turns
  async scheduling off itself (features:522-524): a speculative config with CPU sampling is refused.
- LoRA is not in this lane (reference-feature-model-compatibility.md lists no LoRA): refused.
"""

from __future__ import annotations

import json
from typing import Any

from neuronserve.config.settings import Settings
from neuronserve.errors import ConfigError
from neuronserve.plan import cachekey
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.lanes.lane import Lane, NeuronEngine
from neuronserve.plan.lanes.native import cache, translate
from neuronserve.plan.lanes.native.rules import V0_24, NativeRules
from neuronserve.plan.lanes.nxdi import launch
from neuronserve.plan.lanes.nxdi.launch import DEFAULT_CHUNK_TOKENS, Launch
from neuronserve.plan.lanes.sampling import sampling_config
from neuronserve.plan.resolution import Resolution, count
from neuronserve.types import Integration, RequestSupport

DEFAULT_BLOCK_SIZE = 32  # reference:65
SAMPLING_VAR = "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG"
INTEGRATION = Integration.NATIVE  # the rewritten plugin, no NxD Inference


def neuron_engine(
    settings: Settings,
    facts: HostFacts,
    model_uri: str,
    model: ModelFacts | None,
    res: Resolution,
    *,
    lane: Lane,
) -> NeuronEngine:
    """Resolve, check and render a launch of a rewritten-plugin lane (2.32, 2.33: `lane.native`, what
    differs between them, plan/lanes/native/rules.py). The launch numbers are the NxD Inference lanes'
    steps (their default plugin profile: Pixtral's batch default is the same in both)."""
    rules = lane.native or V0_24
    n = Launch(settings, facts, model_uri, model)
    _refuse_settings(settings, rules)
    cache.check_artifacts_setting(settings, rules)
    for step in (launch.tp, launch.model_len, launch.seqs, launch.dtype):
        step(n, res)
    cfg = translate.translate(
        res, dict(settings.additional_config), n.length, rules.lane, top_level=rules.top_level
    )
    n.batched = batched_tokens(n, cfg, res, rules)
    n.kv_flags, res.kv = kv_flags(settings, res, rules)
    translate.check_buckets(
        cfg, res.origins, length=n.length, seqs=n.seqs, batched=n.batched, block=res.kv["block_size"]
    )
    cpu = check_sampling(cfg, res, rules)
    n.additional = {**settings.additional_config, "neuron_config": cfg}
    env = {"NEURON_RT_VISIBLE_CORES": settings.visible_cores or (f"0-{n.tp - 1}" if n.tp > 1 else "0")}
    env.update(cache.compile_env(settings, res, rules))
    flags = ["--tensor-parallel-size", str(n.tp), "--max-model-len", str(n.length)]
    flags += ["--max-num-seqs", str(n.seqs), "--dtype", n.dtype, "--max-num-batched-tokens", str(n.batched)]
    flags += n.kv_flags
    if cpu and res.speculation.config is None:
        flags.append("--no-async-scheduling")
    flags += ["--additional-config", json.dumps(n.additional, sort_keys=True, separators=(",", ":"))]
    return NeuronEngine(
        flags,
        cfg,
        env,
        INTEGRATION,
        _graph(n, res, cfg),
        request_support(cfg),
        cache_env=cache.cache_env,
        artifacts_subdir=rules.keyed_subdir,
    )


def _refuse_settings(settings: Settings, rules: NativeRules = V0_24) -> None:
    """Settings lane 2.27 takes and this lane must not: LoRA; --quantization neuron_quant, which
    reference:117-121 says to leave unset (Neuron quantization is neuron_config `quantization`)."""
    if settings.get("quantization") == "neuron_quant":
        var = settings.origin("quantization", "SM_VLLM_QUANTIZATION")
        raise ConfigError(
            f"{var}=neuron_quant is {translate.NOT_IN_LANE} ({translate.REF}:117-121): unset it and set "
            "SM_NEURON_QUANTIZATION (mxfp4, mxfp8), or serve a checkpoint with FP8 scales",
            (var,),
        )
    if settings.get("enable-lora") is True:
        var = settings.origin("enable-lora", "SM_VLLM_ENABLE_LORA")
        raise ConfigError(
            f"{var}=true: LoRA is not in this lane ({rules.lane}) ({rules.plugin}'s feature and model "
            "compatibility lists none): unset it, or use lane 2.28 (NEURONSERVE_STACK=2.28)",
            (var, "NEURONSERVE_STACK"),
        )


def batched_tokens(n: Launch, cfg: dict[str, Any], res: Resolution, rules: NativeRules = V0_24) -> int:
    """max_num_batched_tokens: given; else the largest prefill bucket given; else
    min(max_model_len, 2048), said. vLLM refuses one below max_num_seqs."""
    var = res.origins["max-num-batched-tokens"]
    if n.chunked:
        c_var = res.origins["enable-chunked-prefill"]
        res.warn(
            f"{c_var} ignored in lane {rules.lane}: {rules.plugin} prefills long prompts in segments "
            "of max_num_batched_tokens and never mixes prefill with decode"
        )
    given = count(n.settings, "max-num-batched-tokens")
    buckets = cfg.get("num_batched_tokens_buckets")
    if given is None and buckets:
        given = int(buckets[-1])
        res.warn(f"max_num_batched_tokens set to {given}, the largest num_batched_tokens_buckets")
    if given is None:
        given = min(n.length, DEFAULT_CHUNK_TOKENS)
        res.warn(
            f"max_num_batched_tokens (the largest compiled prefill bucket; longer prompts are prefilled in "
            f"segments) set to {given}: set {var} to choose it"
        )
    if given < n.seqs:
        raise ConfigError(
            f"{var}={given} is below max_num_seqs {n.seqs}: vLLM needs at least one token per sequence; "
            f"set {var}={min(n.length, DEFAULT_CHUNK_TOKENS)}",
            (var, res.origins["max-num-seqs"]),
        )
    return given


def kv_flags(
    settings: Settings, res: Resolution, rules: NativeRules = V0_24
) -> tuple[list[str], dict[str, Any]]:
    """Prefix caching and block size, explicit; a user's num-gpu-blocks-override passed on, said."""
    p_var = res.origins["enable-prefix-caching"]
    prefix = settings.get("enable-prefix-caching")
    if prefix is None:
        res.warn(
            f"prefix caching on (lane {rules.lane}'s default, unlike 2.27): set {p_var}=false to turn it off"
        )
    on = prefix is not False
    flags = ["--enable-prefix-caching" if on else "--no-enable-prefix-caching"]
    block = count(settings, "block-size") or DEFAULT_BLOCK_SIZE
    flags += ["--block-size", str(block)]
    blocks = count(settings, "num-gpu-blocks-override")
    if blocks is not None:
        b_var = res.origins["num-gpu-blocks-override"]
        flags += ["--num-gpu-blocks-override", str(blocks)]
        res.warn(
            f"{b_var}={blocks} passed on: {rules.plugin} sizes the KV cache itself from "
            "--gpu-memory-utilization and needs no block count; a count carried over from lane 2.27 "
            "may not fit its memory budget: unset it unless tuned for this lane"
        )
    kv = {"mode": "prefix" if on else "block", "block_size": block, "num_blocks": blocks}
    return flags, kv


def check_sampling(cfg: dict[str, Any], res: Resolution, rules: NativeRules = V0_24) -> bool:
    """The sampling mode, rendered explicitly; True when it is the CPU's."""
    raw = res.user_env.get("NEURON_ON_DEVICE_SAMPLING_DISABLED")
    if raw is not None and raw.strip() not in ("", "0"):
        raise ConfigError(
            f"NEURON_ON_DEVICE_SAMPLING_DISABLED={raw} is {translate.NOT_IN_LANE}: sampling is on the CPU "
            f"unless {SAMPLING_VAR} gives a config; unset it",
            ("NEURON_ON_DEVICE_SAMPLING_DISABLED",),
        )
    value = cfg.setdefault("on_device_sampling_config", None)
    var = res.origin("on_device_sampling_config", SAMPLING_VAR)
    if value is not None:
        sampling_config(value, var, translate.SAMPLING_KEYS, _unknown_sampling_keys)
        return False
    if res.speculation.config is not None:
        s_var = res.origins["speculative-config"]
        raise ConfigError(
            f"{s_var} needs on-device sampling in lane {rules.lane} (the rejection step runs on the "
            f'device, {translate.FEAT}:596-603): set {SAMPLING_VAR}=\'{{"temperature": "0"}}\'',
            (s_var, SAMPLING_VAR),
        )
    res.warn(
        f"sampling on the CPU (lane {rules.lane}): async scheduling off (--no-async-scheduling), "
        f"structured outputs refused; set {SAMPLING_VAR} (e.g. '{{\"all_greedy\": true}}') to sample on "
        "the device"
    )
    return True


def _unknown_sampling_keys(keys: str, allowed: str) -> str:
    return (
        f"{keys} {translate.NOT_IN_LANE}: vllm-neuron 0.24's on_device_sampling_config takes {allowed} "
        f"({translate.REF}:79)"
    )


CANNOT_PROMPT_LOGPROBS = (
    "vllm-neuron 0.24 cannot: its model runner answers an empty prompt_logprobs_dict "
    "(vllm-integration-design-reference.md:702)"
)


def request_support(cfg: dict[str, Any]) -> RequestSupport:
    """What requests may ask of a lane 2.32 engine, by its sampling mode.

    - On the device: only temperature, top_k and top_p reach the sampler (features:428-435), so
      logprobs and penalties are refused; structured outputs work, the grammar mask is applied on the
      device (features:619-625, structured-outputs-and-tool-calling.md:25-35).
    - On the CPU (this lane's plan default): the runner's sampler computes logprobs when asked
      (vllm-integration-design-reference.md:692-694) and applies the logits processors (:682-683);
      the grammar mask is never applied and structured outputs raise NotImplementedError
      (structured-outputs-and-tool-calling.md:242, :313; features:704-707), so they are refused.
      That penalties (presence/frequency/repetition, min_p) are among the CPU path's processors is
      not spelt out by the docs: they are allowed on the CPU as in lane 2.27's CPU path.
    - Prompt logprobs: never returned (vllm-integration-design-reference.md:702).
    """
    on_device = cfg.get("on_device_sampling_config") is not None
    why = {"prompt_logprobs": CANNOT_PROMPT_LOGPROBS}
    if on_device:
        enable = (
            f"set {SAMPLING_VAR}=null (CPU sampling; vllm-neuron 0.24 samples on the device with "
            "temperature, top_k and top_p only)"
        )
        why["logprobs"] = why["penalties"] = enable
    else:
        why["structured_outputs"] = (
            f"set {SAMPLING_VAR} (e.g. '{{\"all_greedy\": true}}'): vllm-neuron 0.24 enforces "
            "structured outputs with on-device sampling only"
        )
    return RequestSupport(
        logprobs=not on_device,
        prompt_logprobs=False,
        penalties=not on_device,
        structured_outputs=on_device,
        why=why,
    )


def _graph(n: Launch, res: Resolution, cfg: dict[str, Any]) -> dict[str, Any]:
    """What the compiled graph depends on, for the cache key (which adds the lane itself): the plugin's
    own key covers the FX graph, shapes, compiler versions, flags and target (compilation_cache.md:
    130-141), so every input that changes them is here."""
    settings = n.settings
    return {
        "integration": INTEGRATION,
        "tp": n.tp,
        "max_model_len": n.length,
        "max_num_seqs": n.seqs,
        "dtype": n.dtype,
        "kv": res.kv,
        "max_num_batched_tokens": n.batched,
        "override": cfg,
        "additional_config": {k: v for k, v in n.additional.items() if k != "neuron_config"},
        "neuron_cc_flags": settings.passthrough_env.get("NEURON_CC_FLAGS"),
        "speculative_config": settings.get("speculative-config"),
        "draft": _draft(n, res),
        "kv_cache_dtype": settings.get("kv-cache-dtype"),
        "quantization": settings.get("quantization"),
        "logical_nc_config": settings.logical_nc_config,
        "neuron_target": cachekey.neuron_target(
            settings.fit.instance_type, n.facts, settings.logical_nc_config
        ),
    }


def _draft(n: Launch, res: Resolution) -> dict[str, Any] | None:
    """A local draft by its content, as lane 2.27 keys it (plan/lanes/nxdi/engine.py `_graph`)."""
    name = res.speculation.draft
    draft = n.facts.paths.get(name) if name else None
    return {"config_sha256": draft.config_sha256, "weights": draft.weights_digest} if draft else None
