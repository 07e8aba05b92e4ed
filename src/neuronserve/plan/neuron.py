"""The Neuron half of the plan: resolve every compiled-graph setting explicitly, then check the rules.

The plugin compiles one graph for (tp, max_model_len, max_num_seqs, dtype, KV layout, override); any
of them left implicit becomes a plugin default nobody chose. So every one is decided here, said in a
warning when derived, and rendered either for vllm-neuron 0.2.2+lts (`--additional-config`) or for the
older in-tree integration (`--device neuron --override-neuron-config`, VLLM_NEURON_FRAMEWORK).

The shape is resolve -> checks -> render: STEPS is the ordered table of steps, each resolving one
value (plan/launch.py) or checking one rule (plan/rules.py, plan/overrides.py, plan/kv.py,
plan/guards.py, plan/multimodal.py) against what is resolved so far; `render` then writes argv,
environment and override (nested under text_neuron_config for Llama 4 / Pixtral, multimodal.nest).
The order is the contract: when several settings are wrong, the first step that refuses names the one
to fix.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from neuronserve.config.settings import Settings
from neuronserve.plan import cachekey, guards, launch, multimodal, native, nxdi, overrides, pluginrules, rules
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.intree import choose_integration, tnx_env, tnx_kv
from neuronserve.plan.kv import kv_layout
from neuronserve.plan.lanes import DEFAULT as DEFAULT_LANE
from neuronserve.plan.lanes import Lane
from neuronserve.plan.launch import DEFAULT_DTYPE, DEFAULT_MAX_NUM_SEQS, Launch
from neuronserve.plan.resolution import Resolution
from neuronserve.types import RequestSupport

# The defaults are read from here by the settings table's documentation test.
__all__ = [
    "CONSUMED",
    "DEFAULT_DTYPE",
    "DEFAULT_MAX_NUM_SEQS",
    "STEPS",
    "NeuronEngine",
    "neuron_engine",
    "render",
]

# Engine settings this module renders itself (not passed through generically).
CONSUMED = frozenset(
    {
        "tensor-parallel-size",
        "max-model-len",
        "max-num-seqs",
        "dtype",
        "enable-prefix-caching",
        "block-size",
        "num-gpu-blocks-override",
        "enable-chunked-prefill",
        "max-num-batched-tokens",
        "additional-config",
        "device",
        "override-neuron-config",
    }
)


@dataclass(frozen=True)
class NeuronEngine:
    flags: list[str]  # engine flags after --model/--host/--port
    override: dict[str, Any]
    env: dict[str, str]
    integration: str  # "plugin" | "in-tree"
    graph: dict[str, Any]  # everything that changes the compiled graph (for the cache key)
    # The engine environment that points it at the compiled-artifact directory (plan/build.py gives it
    # the local directory); None: NEURON_COMPILED_ARTIFACTS=<dir>, as vllm-neuron 0.2.x/0.4.x read it.
    cache_env: Callable[[str], dict[str, str]] | None = None
    # Where the lane's engine compiles, under the keyed artifact directory ("" = that directory itself;
    # lane 2.32: neuron/compile_cache under VLLM_CACHE_ROOT, plan/lane232cache.py).
    artifacts_subdir: str = ""
    # The lane's own request support (None: plan/support.py's, from the rendered override).
    support: RequestSupport | None = None

    def artifacts_env(self, local_dir: str) -> dict[str, str]:
        if self.cache_env is None:
            return {"NEURON_COMPILED_ARTIFACTS": local_dir}
        return self.cache_env(local_dir)


Step = Callable[[Launch, Resolution], None]


def _integration(n: Launch, res: Resolution) -> None:
    n.integration, n.framework = choose_integration(n.settings, n.facts, res)


def _task(n: Launch, res: Resolution) -> None:
    rules.check_task(n.settings.get("task"), n.settings.get("runner"), res)


def _architecture(n: Launch, res: Resolution) -> None:
    rules.check_architecture(n.model, n.model_uri, res, n.facts.versions.get("vllm-neuron"), n.rules)


def _guards(n: Launch, res: Resolution) -> None:
    """Settings the plugin accepts and ignores or fails on (plan/guards.py); vLLM's in-tree Neuron
    support (0.9/0.10) reads --quantization neuron_quant itself, so those two are the plugin's only."""
    if n.integration == "plugin":
        guards.check_quantization(n.settings)
        guards.check_parallelism(n.settings)
    guards.check_speculative_fields(n.settings, res)


def _multimodal_keys(n: Launch, res: Resolution) -> None:
    """Before any rule adds a key: a multimodal model's override holds only its nested objects."""
    multimodal.check_user_keys(n.model, res, n.rules)


def _multimodal_launch(n: Launch, res: Resolution) -> None:
    multimodal.check_launch(n.model, n.settings, n.seqs, n.length, res, n.rules)


def _speculation_edge(n: Launch, res: Resolution) -> None:
    guards.warn_speculation_edge(n.length, res)


def _multimodal_conflicts(n: Launch, res: Resolution) -> None:
    multimodal.check_conflicts(n.model, res, n.rules)


def _lora(n: Launch, res: Resolution) -> None:
    overrides.check_lora(n.lora, n.facts.versions.get("vllm-neuron"), res, n.rules)


def _chunked(n: Launch, res: Resolution) -> None:
    rules.check_chunked(n.chunked, n.seqs, res)


def _chunked_config(n: Launch, res: Resolution) -> None:
    overrides.check_chunked_config(n.seqs, res)


def _launch_duplicates(n: Launch, res: Resolution) -> None:
    overrides.check_launch_duplicates(launch.launch_keys(n, res), res)


def _kv(n: Launch, res: Resolution) -> None:
    if n.tnx:
        n.kv_flags, res.kv = tnx_kv(n.settings, launch.count(n.settings, "block-size"), n.length, res)
    else:
        n.kv_flags, res.kv = kv_layout(
            n.settings, length=n.length, seqs=n.seqs, res=res, plugin=n.integration == "plugin"
        )


def _prefix_floor(n: Launch, res: Resolution) -> None:
    """NxD Inference's smallest prefix-caching prefill bucket (rules.PREFIX_MIN_CONTEXT_BUCKET): a shorter
    max_model_len may fail the compile; said, since a user's own buckets may avoid it."""
    floor = rules.PREFIX_MIN_CONTEXT_BUCKET
    if res.kv["mode"] == "prefix" and n.length < floor and "context_encoding_buckets" not in res.override:
        res.warn(
            f"prefix caching with max_model_len {n.length} < {floor}: NxD Inference's smallest "
            f"prefix-caching prefill bucket is {floor}; if the compile fails, set "
            f"SM_VLLM_MAX_MODEL_LEN={floor} or more"
        )


def _buckets(n: Launch, res: Resolution) -> None:
    prefix = res.kv["mode"] == "prefix"
    rules.check_buckets(length=n.length, max_context=n.max_context, prefix=prefix, res=res)
    n.buckets = nxdi.context_buckets(res.override, n.max_context, prefix, n.chunked)


def _sequence_parallel(n: Launch, res: Resolution) -> None:
    rules.check_sequence_parallel(n.buckets, n.tp, res)


def _sampling(n: Launch, res: Resolution) -> None:
    overrides.check_sampling(res)


def _eagle(n: Launch, res: Resolution) -> None:
    said = pluginrules.check_eagle3(res.speculation.method, res.origins["speculative-config"], n.rules)
    if said:
        res.warn(said)
    cfg = res.speculation.config
    n.draft = n.facts.paths.get(str(cfg.get("model"))) if cfg is not None else None
    rules.check_eagle(n.draft, res)


# The order the plan resolves and refuses in (see the module docstring).
STEPS: tuple[Step, ...] = (
    _integration,
    _task,
    _architecture,
    _guards,
    _multimodal_keys,
    launch.tp,
    launch.model_len,
    launch.seqs,
    _multimodal_launch,
    launch.dtype,
    launch.logical_nc,
    _lora,
    _chunked,
    _chunked_config,
    launch.batched_tokens,
    _launch_duplicates,
    _kv,
    _prefix_floor,
    launch.max_context,
    _buckets,
    _sequence_parallel,
    _sampling,
    _eagle,
    _speculation_edge,
    _multimodal_conflicts,
)


def neuron_engine(
    settings: Settings,
    facts: HostFacts,
    model_uri: str,
    model: ModelFacts | None,
    res: Resolution,
    *,
    lane: Lane = DEFAULT_LANE,
) -> NeuronEngine:
    """Resolve and check the Neuron engine settings (pure), then render them: NxD Inference lanes
    through STEPS (the rules read `Launch.lane` where the lanes differ), the rewritten plugin's lane
    through its own renderer (plan/native.py)."""
    if lane.generation == "native":
        return native.native_engine(settings, facts, model_uri, model, res, lane=lane)
    n = Launch(settings, facts, model_uri, model, lane=lane)
    for step in STEPS:
        step(n, res)
    return render(n, res)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def render(n: Launch, res: Resolution) -> NeuronEngine:
    """The engine flags, environment and compiled-graph description of a resolved launch."""
    settings, override = n.settings, res.override
    if n.integration == "plugin":
        override = multimodal.nest(n.model, override, n.rules)  # Llama 4, Pixtral (Qwen VL in 2.28)
    flags = ["--tensor-parallel-size", str(n.tp), "--max-model-len", str(n.length)]
    flags += ["--max-num-seqs", str(n.seqs), "--dtype", n.dtype, *n.kv_flags]
    if n.chunked:
        flags += ["--enable-chunked-prefill", "--max-num-batched-tokens", str(n.batched)]
    env: dict[str, str] = {}
    env["NEURON_RT_VISIBLE_CORES"] = settings.visible_cores or (f"0-{n.tp - 1}" if n.tp > 1 else "0")
    if n.chunked:
        env["DISABLE_NEURON_CUSTOM_SCHEDULER"] = "1"
    if n.integration == "plugin":
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
    return NeuronEngine(flags, override, env, n.integration, _graph(n, res, override))


def _graph(n: Launch, res: Resolution, override: dict[str, Any]) -> dict[str, Any]:
    """Everything that changes the compiled graph, for the cache key (plan/cachekey.py): besides the
    launch numbers, every --additional-config key reaches the plugin (0.2.2's max_prompt_length
    changes the graph), NEURON_CC_FLAGS reaches the compiler, the draft is identified by its
    content, the override as rendered (nested for multimodal models), and the hardware it is compiled
    for (cachekey.neuron_target: NeuronCore generation, compiler target, logical core size)."""
    settings, draft = n.settings, n.draft
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
        "neuron_target": cachekey.neuron_target(
            settings.fit.instance_type, n.facts, settings.logical_nc_config
        ),
    }
