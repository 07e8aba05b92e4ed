"""The NxD Inference lanes' steps: the ordered table that resolves each compiled-graph setting and checks
each rule against what is resolved so far (plan/lanes/nxdi/engine.py runs it, then renders).

Each step resolves one value (launch.py) or checks one rule (rules.py, overrides.py, kv.py, guards.py,
multimodal.py, models.py, combinations.py, in this folder). The order is the contract: when several
settings are wrong, the first step that refuses names the one to fix. Where the two plugin versions
differ a step reads the lane's plugin profile (`Launch.rules`, profiles.py).
"""

from __future__ import annotations

from collections.abc import Callable

from neuronserve.errors import ConfigError
from neuronserve.plan.lanes.nxdi import (
    combinations,
    derive,
    guards,
    launch,
    models,
    multimodal,
    override_fields,
    overrides,
    rules,
    speculation,
)
from neuronserve.plan.lanes.nxdi.intree import choose_integration, tnx_kv
from neuronserve.plan.lanes.nxdi.kv import kv_layout
from neuronserve.plan.lanes.nxdi.launch import Launch
from neuronserve.plan.resolution import Resolution, count
from neuronserve.types import Integration

Step = Callable[[Launch, Resolution], None]


def _integration(n: Launch, res: Resolution) -> None:
    n.integration, n.framework = choose_integration(n.settings, n.facts, res)


def _task(n: Launch, res: Resolution) -> None:
    rules.check_task(n.settings.get("task"), n.settings.get("runner"), res)


def _architecture(n: Launch, res: Resolution) -> None:
    """Against the installed NxD Inference's model registry, else the lane's (said: models.py)."""
    n.registry = models.registry(n.facts, n.rules)
    models.warn_assumed(n.registry, n.facts, res)
    plugin = n.facts.versions.get("vllm-neuron")
    models.check_architecture(n.model, n.model_uri, res, plugin, n.rules, reg=n.registry)
    if n.integration == Integration.PLUGIN:
        combinations.check_routing(multimodal.architecture(n.model), n.model_uri, n.rules)


def _guards(n: Launch, res: Resolution) -> None:
    """Settings the plugin accepts and ignores or fails on (guards.py); vLLM's in-tree Neuron
    support (0.9/0.10) reads --quantization neuron_quant itself, so those two are the plugin's only; NxD
    Inference asserts the quantized checkpoint path under either."""
    if n.integration == Integration.PLUGIN:
        guards.check_quantization(n.settings)
        guards.check_parallelism(n.settings)
    guards.check_quantized_path(res)
    guards.check_speculative_fields(n.settings, res)


def _override_fields(n: Launch, res: Resolution) -> None:
    """Before any rule adds a key: each user key is a field the lane's NxD Inference reads, or one the
    plugin pops itself (override_fields.py). The in-tree integration's framework is not the plugin's."""
    if n.integration == Integration.PLUGIN:
        override_fields.check_override_keys(n.model, res, n.rules)


def _multimodal_keys(n: Launch, res: Resolution) -> None:
    """Before any rule adds a key: a multimodal model's override holds only its nested objects."""
    multimodal.check_user_keys(n.model, res, n.rules)


def _trained_context(n: Launch, res: Resolution) -> None:
    """max_model_len beyond what config.json's positions (and rope scaling) cover: said (rules.py)."""
    rules.warn_beyond_trained(n.length, n.model.config if n.model else None, n.model_uri, res)


def _multimodal_launch(n: Launch, res: Resolution) -> None:
    multimodal.check_launch(n.model, n.settings, res, seqs=n.seqs, length=n.length, rules=n.rules)


def _speculation_edge(n: Launch, res: Resolution) -> None:
    guards.warn_speculation_edge(n.length, res)


def _multimodal_conflicts(n: Launch, res: Resolution) -> None:
    multimodal.check_conflicts(n.model, res, n.rules)


def _lora(n: Launch, res: Resolution) -> None:
    overrides.check_lora(n.lora, n.facts.versions.get("vllm-neuron"), res, n.rules)
    if n.lora:
        var = n.settings.origin("max-lora-rank", "SM_VLLM_MAX_LORA_RANK")
        overrides.check_lora_rank(count(n.settings, "max-lora-rank", 1), var, n.rules)


def _combinations(n: Launch, res: Resolution) -> None:
    """Pairs of features the plugin runs wrongly (combinations.py); the in-tree integration is not it."""
    if n.integration == Integration.PLUGIN:
        arch = multimodal.architecture(n.model)
        combinations.check_combinations(arch, lora=n.lora, chunked=n.chunked, res=res, rules=n.rules)


def _chunked(n: Launch, res: Resolution) -> None:
    """Rule 7, and the lanes whose NxD Inference cannot build chunked prefill at all (profiles.py
    `chunked_prefill_refused`: 2.28's raises NotImplementedError when the model is built)."""
    if n.chunked and n.rules.chunked_prefill_refused:
        var = res.origins["enable-chunked-prefill"]
        raise ConfigError(
            f"{var}=true: chunked prefill does not build on {n.rules.plugin}: its NxD Inference raises "
            f'"Chunked Prefill is not available in NxDI for now" when the model is built '
            f"({n.rules.chunked_prefill_refused}): unset {var}",
            (var,),
        )
    rules.check_chunked(n.chunked, n.seqs, res)


def _chunked_config(n: Launch, res: Resolution) -> None:
    overrides.check_chunked_config(n.seqs, res)


def _launch_duplicates(n: Launch, res: Resolution) -> None:
    overrides.check_launch_duplicates(launch.launch_keys(n, res), res)


def _kv(n: Launch, res: Resolution) -> None:
    if n.tnx:
        n.kv_flags, res.kv = tnx_kv(n.settings, count(n.settings, "block-size"), n.length, res)
    else:
        n.kv_flags, res.kv = kv_layout(
            n.settings,
            length=n.length,
            seqs=n.seqs,
            res=res,
            plugin=n.integration == Integration.PLUGIN,
            profile=n.rules,
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
    n.buckets = derive.context_buckets(res.override, n.max_context, prefix, n.chunked)


def _sequence_parallel(n: Launch, res: Resolution) -> None:
    rules.check_sequence_parallel(n.buckets, n.tp, res)


def _sampling(n: Launch, res: Resolution) -> None:
    overrides.check_sampling(res)


def _speculative_method(n: Launch, res: Resolution) -> None:
    """A method the lane does not run as asked is refused, naming the one it runs (speculation.py; the
    plugin's rules: the in-tree integration is not it)."""
    cfg = res.speculation.config
    n.draft = n.facts.paths.get(str(cfg.get("model"))) if cfg is not None else None
    if n.integration == Integration.PLUGIN:
        speculation.check_method(n.draft, res, n.rules)


def _eagle(n: Launch, res: Resolution) -> None:
    rules.check_eagle(n.draft, res)
    if n.integration == Integration.PLUGIN:
        speculation.check_draft_class(n.model, n.draft, res, n.rules)
        speculation.check_prefix(res, n.rules)


# The order the plan resolves and refuses in (see the module docstring).
STEPS: tuple[Step, ...] = (
    _integration,
    _task,
    _architecture,
    _guards,
    _speculative_method,
    _override_fields,
    _multimodal_keys,
    launch.tp,
    launch.model_len,
    _trained_context,
    launch.seqs,
    _multimodal_launch,
    launch.dtype,
    launch.logical_nc,
    _lora,
    _combinations,
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
