"""The NxD Inference lanes' engine (2.27: vllm-neuron 0.2.2+lts, 2.28: 0.4.1): resolve every
compiled-graph setting explicitly, check the rules, then render.

The plugin compiles one graph for (tp, max_model_len, max_num_seqs, dtype, KV layout, override); any
of them left implicit becomes a plugin default nobody chose. So every one is decided by the steps
(steps.py), said in a warning when derived, and rendered here either for the plugin
(`--additional-config`) or for the older in-tree integration (`--device neuron --override-neuron-config`,
VLLM_NEURON_FRAMEWORK): argv, environment and override (nested under text_neuron_config for Llama 4 /
Pixtral, multimodal.nest), and what requests may ask of it (support.py).
"""

from __future__ import annotations

import json
from typing import Any

from neuronserve.config.settings import Settings
from neuronserve.counts import positive
from neuronserve.plan import cachekey
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.lanes.lane import Lane, NeuronEngine
from neuronserve.plan.lanes.nxdi import compiled, multimodal, support
from neuronserve.plan.lanes.nxdi.intree import tnx_env
from neuronserve.plan.lanes.nxdi.launch import Launch
from neuronserve.plan.lanes.nxdi.profiles import V0_2
from neuronserve.plan.lanes.nxdi.steps import STEPS
from neuronserve.plan.resolution import Resolution, count
from neuronserve.types import Integration

# vLLM's LoRA defaults (0.11.0 and 0.13.0 config/lora.py): what the engine compiles when they are unset.
VLLM_MAX_LORAS = 1
VLLM_MAX_LORA_RANK = 16


def neuron_engine(
    settings: Settings,
    facts: HostFacts,
    model_uri: str,
    model: ModelFacts | None,
    res: Resolution,
    *,
    lane: Lane | None = None,
) -> NeuronEngine:
    """The NxD Inference lanes' EngineRenderer (plan/lanes/lane.py): resolve and check the Neuron engine
    settings through STEPS (pure), then render them. The steps read the lane's plugin profile where the
    lanes differ; without a lane, the default lane's (2.27, vllm-neuron 0.2.2+lts)."""
    n = Launch(settings, facts, model_uri, model, rules=(lane.rules if lane else None) or V0_2)
    for step in STEPS:
        step(n, res)
    return render(n, res)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def render(n: Launch, res: Resolution) -> NeuronEngine:
    """The engine flags, environment and compiled-graph description of a resolved launch."""
    settings, override = n.settings, res.override
    if n.integration == Integration.PLUGIN:
        override = multimodal.nest(n.model, override, n.rules)  # Llama 4, Pixtral (Qwen VL in 2.28)
    flags = ["--tensor-parallel-size", str(n.tp), "--max-model-len", str(n.length)]
    flags += ["--max-num-seqs", str(n.seqs), "--dtype", n.dtype, *n.kv_flags]
    if n.chunked:
        flags += ["--enable-chunked-prefill", "--max-num-batched-tokens", str(n.batched)]
    env: dict[str, str] = {}
    env["NEURON_RT_VISIBLE_CORES"] = settings.visible_cores or (f"0-{n.tp - 1}" if n.tp > 1 else "0")
    if n.chunked:
        env["DISABLE_NEURON_CUSTOM_SCHEDULER"] = "1"
    if n.integration == Integration.PLUGIN:
        flags += [
            "--additional-config",
            _json({**settings.additional_config, **n.additional, "override_neuron_config": override}),
        ]
    else:
        flags = ["--device", "neuron", *flags]
        if override:
            flags += ["--override-neuron-config", _json(override)]
        env["VLLM_NEURON_FRAMEWORK"] = n.framework or "neuronx-distributed-inference"
        if n.tnx:
            env.update(tnx_env(settings, override))
    engine_support = support.request_support("neuron", n.integration, override, n.rules)
    stack = {"nxd_inference": n.registry.as_json()} if n.registry is not None else {}
    return NeuronEngine(
        flags, override, env, n.integration, _graph(n, res, override), engine_support, stack=stack
    )


def _graph(n: Launch, res: Resolution, override: dict[str, Any]) -> dict[str, Any]:
    """Everything that changes the compiled graph, for the cache key (plan/cachekey.py): besides the
    launch numbers, every --additional-config key reaches the plugin (0.2.2's max_prompt_length
    changes the graph), NEURON_CC_FLAGS reaches the compiler, the draft is identified by its
    content, the override as rendered (nested for multimodal models), and the hardware it is compiled
    for (cachekey.neuron_target: NeuronCore generation, compiler target, logical core size)."""
    settings, draft = n.settings, n.draft
    target = cachekey.neuron_target(settings.fit.instance_type, n.facts, settings.logical_nc_config)
    return {
        "integration": n.integration,
        "framework": n.framework,
        "tp": n.tp,
        "max_model_len": n.length,
        "max_num_seqs": n.seqs,
        "dtype": n.dtype,
        "kv": res.kv,
        "chunked_prefill": n.chunked,
        "max_num_batched_tokens": n.batched,
        "override": override,
        "additional_config": {**settings.additional_config, **n.additional},
        "neuron_cc_flags": settings.passthrough_env.get("NEURON_CC_FLAGS"),
        "speculative_config": settings.get("speculative-config"),
        "draft": {"config_sha256": draft.config_sha256, "weights": draft.weights_digest} if draft else None,
        "lora": n.lora,
        "quantization": settings.get("quantization"),
        "logical_nc_config": settings.logical_nc_config,
        "neuron_target": target,
        "compiled": _compiled(n, res, override, target) if n.integration == Integration.PLUGIN else None,
    }


def _compiled(n: Launch, res: Resolution, override: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    """The configuration NxD Inference will serialise for this launch (compiled.py), which the cache key
    hashes in place of the launch numbers above."""
    settings = n.settings
    pa_num_blocks, block_size = compiled.blocks(res.kv, n.length, n.seqs)
    lora = None
    if n.lora:
        lora = {
            "max_loras": count(settings, "max-loras") or VLLM_MAX_LORAS,
            "max_lora_rank": count(settings, "max-lora-rank") or VLLM_MAX_LORA_RANK,
            "max_cpu_loras": count(settings, "max-cpu-loras"),
        }
    launch = {
        "tp": n.tp,
        "seqs": n.seqs,
        "length": n.length,
        "dtype": n.dtype,
        "chunked": n.chunked,
        "max_context": n.max_context,
        "pa_num_blocks": pa_num_blocks,
        "block_size": block_size,
        "prefix": res.kv.get("mode") == "prefix",
        "speculation": res.speculation.config,
        "lora": lora,
    }
    return compiled.predict(
        launch,
        override,
        nested=multimodal.nested(n.model, n.rules),
        platform_lnc=target.get("logical_nc_config"),
        env_lnc=positive(settings.logical_nc_config) if settings.logical_nc_config else None,
    )
